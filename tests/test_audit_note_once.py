"""The audit's note for a missing requirement id the contract does not hold ("audit: missing requirement 'R9'
is not in the contract (...); dropped") was added again on every audit round that named it: a run whose
audit kept naming R9 for three rounds carried the same note three times in its notes and the result's
reasons. It is noted once per id per run now (the notes reducer appends, so the audit leaves out a note
the run already holds); a new unknown id in a later round still gets its own note."""

from __future__ import annotations

from graph_scripts import assessment, full_script, make_agent, run


def test_an_unknown_audit_id_is_noted_once_per_run(clip):
    def finding(*ids: str) -> dict:  # unclean through the contradiction, so the repair rounds go on
        return {"missing_requirements": list(ids), "invented_conditions": [],
                "contradictions": ["R1 is judged met but the block never moves"]}

    clean = {"missing_requirements": [], "invented_conditions": [], "contradictions": []}
    script = full_script(audit=[finding("R9", "R9"), finding("R9"), finding("R9", "R8"), clean],
                         repair=[assessment(), assessment(), assessment()])
    agent, model = make_agent("full", script)
    out = run(agent, clip)
    assert len(model.calls_for("audit")) == 4 and out["repair_rounds"] == 3
    notes = out["notes"]
    r9 = [n for n in notes if "missing requirement 'R9' is not in the contract" in n]
    r8 = [n for n in notes if "missing requirement 'R8' is not in the contract" in n]
    assert len(r9) == 1 and len(r8) == 1, notes
    assert sum("'R9' is not in the contract" in r for r in out["result"].reasons) == 1
    decisions = [s["decision"] for s in out["steps"] if s["node"] == "audit"]
    assert "unknown id(s) dropped" in decisions[1]  # the step still says what it dropped each round
