"""Correctness review of the run report and the eval index (`raa report`, `raa eval report`): a tiny positive
reward never reads as 0.000 anywhere on a page (`graph.reward_format.reward_text`)."""

from __future__ import annotations

from evals.report import render_run_report
from evals.report_frames import FrameStore, wanted_indices
from graph.trace_text import step_row
from graph.tracing import RunTrace


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


def _dead_links(html: str) -> list[str]:
    import re

    ids = set(re.findall(r'id="([^"]+)"', html))
    return sorted({h for h in re.findall(r'href="#([^"]+)"', html) if h not in ids})


def test_every_frame_the_page_links_to_has_an_anchor():
    """Judgments citing a frame the model saw during inspection (not in the uniform sample), the final check's
    frames and the frames a repair re-viewed linked to #frame-N, which only sampled frames had: the links went
    nowhere. Cited frames outside the sample now have their own figure in the frames section."""
    import numpy as np

    frames = {i: np.full((8, 8, 3), 25 * i, np.uint8) for i in (0, 5, 6, 8)}
    store = FrameStore(frames, total=10, fps=5.0)
    values = {"preset": "full", "sample": [0, 8],
              "contract": {"requirements": [{"id": "R1", "kind": "outcome", "text": "it moves"}]},
              "assessment": {"judgments": [{"requirement_id": "R1", "status": "met", "evidence_frames": [0, 5]}]},
              "observation": {"summary": "s", "events": [{"start_frame": 0, "end_frame": 8, "description": "d"}]},
              "final_check": {"failure_established": False, "essential_unverifiable": False, "evidence_frames": [6]},
              "audits": [{"clean": False, "missing_requirements": ["R2"]}]}
    steps = [{"node": "repair", "audit_round": 0, "decision": "re-viewed", "frames": [7]}]
    html = render_run_report(RunTrace("run-1", "2026-01-01T00:00:00", values, steps), store=store)
    assert _dead_links(html) == []
    assert 'id="frame-5"' in html and 'id="frame-6"' in html and 'id="frame-7"' in html
    assert "Sampled frames (2)" in html  # the sample's count is unchanged
    assert {5, 6, 7} <= wanted_indices({**values, "steps": steps})  # decoded for the page (7: a repair's)


def test_usage_per_clip_reads_the_same_on_the_console_as_in_table_md():
    """`raa eval reward` printed calls/clip with 2 decimals and table.md with 1 (`USAGE_DIGITS` names the
    decimals of both): 2.25 calls read 2.25 on the console and 2.2 in the table."""
    from evals.eval_views import usage_lines
    from evals.table import preset_metrics, render_markdown

    rows = [{"path": f"/c/{i}.mp4", "preset": "full", "reward": 0.5, "status": "scored",
             "usage": {"calls": c, "images": 3, "input_tokens": 10, "output_tokens": 5, "cache_hits": 1}}
            for i, c in enumerate((2, 2, 2, 3))]
    metrics = [preset_metrics("full", rows)]
    (line,) = usage_lines(metrics)
    table = render_markdown(metrics)
    assert "| 2.2 | 3.0 | 10 | 5 | 1.0 |" in table  # calls/clip 2.25 with 1 decimal
    assert line.startswith("full: calls/clip 2.2, images/clip 3.0, input tokens/clip 10, output tokens/clip 5, "
                           "cache hits/clip 1.0")
