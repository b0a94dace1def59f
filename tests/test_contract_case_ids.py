"""A contract whose requirement ids are equal up to letter case or surrounding spaces ("R1" and "r1") was frozen
as it was: duplicate ids were refused, but these passed as distinct, and every later lookup that reads an id up to
case (`graph.nodes.common.contract_id` for judgments and audit findings, `graph.nodes.audit.involved_ids`) could
not tell them apart: a judgment written " r1" was dropped, and one spelled like the other id counted for it. Such
a contract is refused like one with duplicate ids: a malformed answer, re-asked with the reason naming the ids, and
the run is ineligible when the re-asks are spent."""

from __future__ import annotations

import pytest
from graph_scripts import CONTRACT, full_script, make_agent, run

from graph.schemas import TaskContract


def _contract(*ids: str) -> dict:
    return {"requirements": [{"id": i, "kind": "action", "text": f"step {k}"} for k, i in enumerate(ids)]}


@pytest.mark.parametrize("ids", [("R1", "r1"), ("R1", "R2", " R2"), ("Ab", "aB")])
def test_ids_equal_up_to_case_or_spaces_are_refused(ids):
    with pytest.raises(ValueError, match="equal up to letter case") as info:
        TaskContract.model_validate(_contract(*ids))
    assert all(repr(i) in str(info.value) for i in ids[-2:])


def test_distinct_and_exact_duplicate_ids_keep_their_handling():
    assert [r.id for r in TaskContract.model_validate(_contract("R1", "R10", "a1")).requirements] == ["R1", "R10", "a1"]
    with pytest.raises(ValueError, match="must be unique"):
        TaskContract.model_validate(_contract("R1", "R1"))


def test_a_case_variant_contract_is_reasked(clip):
    agent, model = make_agent("full", full_script(contract=[_contract("R1", "r1"), CONTRACT]))
    out = run(agent, clip, run_id="case-ids-reasked")
    assert len(model.calls_for("contract")) == 2
    assert "'R1' and 'r1'" in model.calls_for("contract")[1].text()
    assert [r.id for r in out["contract"].requirements] == ["R1", "R2", "R3"]
    assert out["result"].status == "scored"


def test_a_contract_that_keeps_case_variant_ids_makes_the_run_ineligible(clip):
    agent, _ = make_agent("full", full_script(contract=[_contract("R1", "r1"), _contract("A", "a")]))
    res = run(agent, clip, run_id="case-ids-ineligible")["result"]
    assert res.status == "ineligible" and res.reward is None
    assert any(r.startswith("contract: invalid_reply:") and "'A' and 'a'" in r for r in res.reasons), res.reasons
