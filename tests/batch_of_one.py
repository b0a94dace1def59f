"""One clip scored by `raa score-batch` with the scripted model (tests/cli_agent_helpers.py), for the resume tests
of test_video_fault_retry.py and test_unjudged_rows_resume.py: `batch_of_one` scores a clip of `frames` frames,
`one_frame_zero` a one-frame clip, which the quality check zeroes (DESIGN §3: under 2 frames) with no model call."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from graph.cli import app
from tests.cli_agent_helpers import _scripted
from tests.test_batch_resume import TASK, _rows

runner = CliRunner()


@dataclass(frozen=True)
class BatchOfOne:
    """The clip, its one-line manifest, the output and the `raa score-batch` arguments that scored it."""

    clip: Path
    manifest: Path
    out: Path
    args: list[str]


def batch_of_one(monkeypatch, tmp_path: Path, frames: int = 33) -> BatchOfOne:  # noqa: ANN001 - pytest fixture
    """c.mp4 (`moving_square` of `frames` frames) scored once at preset "decomposed" into out.jsonl."""
    from tests.graph_scripts import moving_square

    _scripted(monkeypatch, tmp_path)
    clip = moving_square(tmp_path / "c.mp4", frames=frames, seed=1)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "c.mp4", "instruction": TASK}) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return BatchOfOne(clip, manifest, out, args)


def one_frame_zero(monkeypatch, tmp_path: Path) -> BatchOfOne:  # noqa: ANN001 - pytest fixture
    """`batch_of_one` of a one-frame clip (a renderer that had written one frame): its one row is the quality
    check's zero (status "zero", first reason "quality: ...")."""
    batch = batch_of_one(monkeypatch, tmp_path, frames=1)
    [row] = _rows(batch.out)
    assert row["result"]["status"] == "zero" and row["result"]["reasons"][0].startswith("quality: "), row
    return batch
