"""Correctness review of the run report and the eval index (`raa report`, `raa eval report`): a tiny positive
reward never reads as 0.000 anywhere on a page (`graph.reward_format.reward_text`)."""

from __future__ import annotations

from evals.report import render_run_report
from evals.report_frames import FrameStore
from graph.tracing import RunTrace, step_row


def _direct_run(reward: float) -> RunTrace:
    """A direct-scoring run with `reward` as its score, as the gate records it (graph/nodes/gate.py)."""
    values = {"preset": "direct", "result": {"reward": reward, "status": "scored"},
              "direct": {"reward": reward, "rationale": "the block moved a little"}}
    gate = {"node": "gate", "decision": "scored: R = x",
            "gate_inputs": {"eligible": True, "direct_reward": reward, "reward": reward}}
    return RunTrace("run-1", "2026-01-01T00:00:00", values, [gate])


def test_a_tiny_direct_score_never_reads_as_zero_in_the_gate_and_judgment_sections():
    """The header showed 4.00e-04, the gate inputs "0.000" and the direct score "Direct score 0.000" on the
    same page: F+ counts it as positive."""
    html = render_run_report(_direct_run(0.0004), store=FrameStore(error="no clip"))
    assert "0.000<" not in html and "0.000 " not in html and "=0.000" not in html
    assert "<td>reward</td><td>4.00e-04</td>" in html and "<td>direct_reward</td><td>4.00e-04</td>" in html
    assert "Direct score 4.00e-04:" in html


def test_the_step_trace_gate_column_shows_a_tiny_reward():
    """`raa trace` and the report's step trace wrote the gate inputs with 3 decimals: reward=0.000."""
    row = step_row(0, _direct_run(0.0004).steps[0])
    assert "reward=4.00e-04" in row["gate"] and "direct_reward=4.00e-04" in row["gate"]
    gated = step_row(0, {"node": "gate", "gate_inputs": {"T": 0.5, "reward": 0.25, "failure": False}})
    assert gated["gate"] == "T=0.500 reward=0.250 failure=False"  # other inputs keep their 3 decimals
