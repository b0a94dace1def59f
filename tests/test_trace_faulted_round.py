"""A faulted audit or repair step keeps its round in the trace: both set `audit_round` after their model call,
so an audit round that timed out was listed by `raa trace` with no round, and which round failed had to be
counted from the steps before it."""

from __future__ import annotations

from tests.graph_scripts import CLEAN_AUDIT, assessment, full_script, make_agent, moving_square, run

ISSUE = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R3 says smooth, frames jump"]}


def _rounds(tmp_path, **script) -> list[tuple[str, int | None, bool]]:
    agent, _ = make_agent("full", full_script(**script))
    out = run(agent, moving_square(tmp_path / "m.mp4"))
    assert out["result"].status == "ineligible", out["result"]
    return [(s["node"], s["audit_round"], s["decision"].startswith("fault")) for s in out["steps"]
            if s["node"] in ("audit", "repair")]


def test_a_faulted_second_audit_is_round_1(tmp_path) -> None:
    assert _rounds(tmp_path, audit=[ISSUE, TimeoutError("slow")], repair=[assessment()]) == \
        [("audit", 0, False), ("repair", 0, False), ("audit", 1, True)]


def test_a_faulted_repair_keeps_its_round(tmp_path) -> None:
    assert _rounds(tmp_path, audit=[ISSUE, CLEAN_AUDIT], repair=[TimeoutError("slow")]) == \
        [("audit", 0, False), ("repair", 0, True)]


def test_a_faulted_model_call_keeps_the_frames_it_sent(tmp_path) -> None:
    """A stage whose model call faulted (a timeout) listed no frames, though the request carried them (its
    usage counts their images): the trace could not say what the failed request held."""
    for stage in ("observe", "assess", "repair"):
        agent, _ = make_agent("full", full_script(**{stage: [TimeoutError("slow")], "audit": [ISSUE, CLEAN_AUDIT]}))
        out = run(agent, moving_square(tmp_path / "m.mp4"), run_id=f"run-{stage}")
        step = next(s for s in out["steps"] if s["node"] == stage)
        assert step["decision"].startswith("fault (timeout)") and step["frames"], (stage, step)
    agent, _ = make_agent("direct", full_script(direct=[TimeoutError("slow")]))
    step = run(agent, moving_square(tmp_path / "m.mp4"), run_id="run-direct")["steps"][-2]
    assert step["node"] == "direct" and step["decision"].startswith("fault (timeout)") and step["frames"], step


def test_the_audit_column_counts_rounds_as_the_repair_decision_does(tmp_path) -> None:
    """`raa trace`'s audit column printed the stored 0-based `audit_round`: the first repair read 0 beside its
    decision "round 1: ...". The column now counts from 1, as the decision and the report's "repair 1" do: an
    audit and the repair that acts on it share a round, the audit after repair N is round N + 1."""
    from graph.trace_text import describe_update, step_row

    agent, _ = make_agent("full", full_script(audit=[ISSUE, ISSUE, CLEAN_AUDIT], repair=[assessment(), assessment()]))
    steps = [s for s in run(agent, moving_square(tmp_path / "m.mp4"))["steps"] if s["node"] in ("audit", "repair")]
    shown = [(s["node"], step_row(i, s)["audit"]) for i, s in enumerate(steps)]
    assert shown == [("audit", "1"), ("repair", "1"), ("audit", "2"), ("repair", "2"), ("audit", "3")], shown
    for s in steps:
        if s["node"] == "repair":
            assert s["decision"].startswith(f"round {step_row(0, s)['audit']}: "), s
    assert "audit=1]" in describe_update("repair", {"steps": [steps[1]]})
    assert step_row(0, {"node": "audit", "audit_round": "x"})["audit"] == "x"  # an edited fork's value, as written
