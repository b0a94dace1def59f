"""A repair round's notes (citations dropped, a rubric level kept, a judgment left out and kept) were added again by
every later round that did the same: three rounds of one repair reply carried each note three times, word for word,
in the run's notes and the result's reasons, as the audit's note on an unknown id did (test_audit_note_once.py). A
note the run already holds is left out now; a round that does something new still gets its note."""

from __future__ import annotations

from graph_scripts import assessment, full_script, judgments, make_agent, run

DIRTY = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R1 is met but the block never moves"]}


def test_a_repair_note_is_added_once_per_run(clip):
    low = assessment(phys=2, vis=2)
    left_out = [j for j in judgments(frames=(0, 17, 40)) if j["requirement_id"] != "R3"]
    same = {**assessment(phys=5, vis=5), "judgments": left_out}  # frame 40 is past the 33-frame clip
    new = {**same, "judgments": [{**j, "evidence_frames": [0, 17, 41]} for j in left_out]}
    agent, model = make_agent("full", full_script(assess=[low], reflect=[low], audit=[DIRTY] * 4,
                                                  repair=[same, same, new]))
    out = run(agent, clip)
    assert out["repair_rounds"] == 3 and len(model.calls_for("repair")) == 3
    notes = out["notes"]
    assert len(notes) == len(set(notes)), notes
    assert notes.count("repair: R3 kept partial (the revised assessment left it out)") == 1
    assert sum(n.startswith("repair: physical_level kept 2") for n in notes) == 1
    assert "repair: R1 cited frames [40] outside the clip (0..32); dropped" in notes
    assert "repair: R1 cited frames [41] outside the clip (0..32); dropped" in notes  # round 3's own
    assert len(out["result"].reasons) == len(set(out["result"].reasons))
    decisions = [s["decision"] for s in out["steps"] if s["node"] == "repair"]
    assert all("unsupported change(s) kept" in d for d in decisions)  # each round's step still says what it did


def test_a_run_resumed_between_repair_rounds_has_the_same_notes(clip):
    """The notes a round leaves out are those the checkpointed state holds: a run stopped after each repair round and
    resumed from its checkpoint ends with the notes and reasons of the run that went through."""
    low = assessment(phys=2, vis=2)
    left_out = [j for j in judgments(frames=(0, 17, 40)) if j["requirement_id"] != "R3"]
    same = {**assessment(phys=5, vis=5), "judgments": left_out}
    new = {**same, "judgments": [{**j, "evidence_frames": [0, 17, 41]} for j in left_out]}

    def script() -> dict:
        return full_script(assess=[low], reflect=[low], audit=[DIRTY] * 4, repair=[same, same, new])

    whole = run(make_agent("full", script())[0], clip)
    agent, _ = make_agent("full", script())
    config = {"configurable": {"thread_id": "run-test"}}
    agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "run-test"}, config,
                 interrupt_after=["repair"])
    stops = 1
    while agent.get_state(config).next:
        agent.invoke(None, config, interrupt_after=["repair"])
        stops += 1
    out = agent.get_state(config).values
    assert stops == 4 and out["repair_rounds"] == 3  # (three rounds, each stopped after, and the rest)
    assert out["notes"] == whole["notes"]
    assert out["result"].reasons == whole["result"].reasons
