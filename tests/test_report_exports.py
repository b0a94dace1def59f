"""The training report's header names which iteration ``final/`` holds, and says when the run's latest checkpoint
is newer (training/report_exports.py)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from training.engine import mark_latest
from training.report import render_training_report
from training.resume import StateLayout, write_layout


def _run(tmp_path: Path, final_iteration: int | None) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump({"backend": "cosmos", "finetune": "full", "max_iterations": 4}))
    (out / "metrics.jsonl").write_text("".join(json.dumps({"iteration": i, "reward_mean": 0.1 * i}) + "\n"
                                               for i in (1, 2, 3, 4)))
    for it in (2, 4):
        folder = out / "checkpoints" / f"iter_{it:06d}"
        folder.mkdir(parents=True)
        write_layout(folder, StateLayout(2, "float32"))
    mark_latest(out / "checkpoints", 4)
    if final_iteration is not None:
        (out / "final").mkdir()
        (out / "final" / "export.json").write_text(json.dumps({
            "format": "raa-policy-export/1", "iteration": final_iteration,
            "source": str(out / "checkpoints" / f"iter_{final_iteration:06d}")}))
    return out


def _final_cell(html: str) -> str:
    return html.split("final export")[1].split("</tr>")[0]


def test_a_final_export_behind_the_latest_checkpoint_is_named_so(tmp_path):
    """The header said "final export: yes" for a final/ of iteration 2 while the run's latest checkpoint was
    iteration 4 (a resumed run whose end-of-run export failed, or an export --tag into final/): generate then
    sampled an older policy than the page's curves end at."""
    cell = _final_cell(render_training_report(_run(tmp_path, 2)))
    assert "iteration 2" in cell and "iter_000004" in cell and "python -m training.export --run" in cell


def test_a_final_export_of_the_latest_checkpoint_names_its_iteration(tmp_path):
    cell = _final_cell(render_training_report(_run(tmp_path, 4)))
    assert "iteration 4" in cell and "older" not in cell


def test_no_final_export_says_no(tmp_path):
    cell = _final_cell(render_training_report(_run(tmp_path, None)))
    assert ">no<" in cell.replace(" ", "")
