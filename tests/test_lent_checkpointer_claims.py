"""A run whose checkpointer comes in the call's config (`configurable["__pregel_checkpointer"]`, LangGraph's key for
a saver lent to a graph; it wins over the compiled one) claims its run id in that saver's trace file: the agent
checked the thread in the lent saver (`graph.thread_guard`) but claimed in its compiled checkpointer's file, so an
agent compiled without one claimed nothing and one compiled with another database claimed in the wrong file (the
run in the lent file was "incomplete" while it ran, not spared by `raa prune`, open to a second process)."""

from __future__ import annotations

import pytest
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from test_plain_invoke_claims import _claims

from tests.graph_scripts import PUSH, FakeSurprise, full_script


def _agent(checkpointer, **script):
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    backbone = Backbone(ScriptedChatModel(full_script(**script)), schema_retries=1, max_retries=1, timeout_s=10,
                        retry_wait=(0.0, 0.0))
    return build_reward_agent(AgentConfig(preset="decomposed"), backbone=backbone, checkpointer=checkpointer,
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


@pytest.mark.parametrize("compiled", ["none", "other database"])
def test_a_run_on_a_lent_checkpointer_claims_its_id_in_that_file(clip, tmp_path, compiled) -> None:
    from graph.builder import default_checkpointer

    lent_db, own_db = tmp_path / "lent.sqlite", tmp_path / "own.sqlite"
    seen: list[tuple[list[str], list[str]]] = []

    def assess(messages, k):
        from tests.graph_scripts import assessment

        seen.append((_claims(lent_db), _claims(own_db)))
        return assessment()

    agent = _agent(False if compiled == "none" else default_checkpointer(own_db), assess=assess)
    config = {"configurable": {"thread_id": "lent", CONFIG_KEY_CHECKPOINTER: default_checkpointer(lent_db)}}
    out = agent.invoke({"video": str(clip), "instruction": PUSH, "run_id": "lent"}, config)
    assert out["result"].status == "scored"
    assert seen == [(["lent"], [])], seen
    assert _claims(lent_db) == []
    assert default_checkpointer(lent_db).get_tuple({"configurable": {"thread_id": "lent"}}) is not None  # traced there
