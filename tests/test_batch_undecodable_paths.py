"""A clip path that is not valid UTF-8 (a file named with bytes no UTF-8 text has, read back by Python as lone
surrogates, `\\udcff`, and written so in a manifest) ended, when its clip was missing or broken, as
"agent: ValidationError: 1 validation error for Fault ...": the fault's message could not hold the character.
The row stays ineligible, now with the stage's reason naming the clip (escaped for display) and the problem."""

from __future__ import annotations

import json
import os

import pytest

from graph.cli import app
from graph.schemas import Fault
from tests.cli_agent_helpers import _scripted, runner


def test_a_fault_message_with_a_surrogate_escaped_path_is_kept_escaped():
    fault = Fault(stage="quality", kind="video", message="VideoNotFoundError: /clips/\udcffa.mp4: video file not found")
    assert fault.message == "VideoNotFoundError: /clips/\\udcffa.mp4: video file not found"
    assert fault.reason().encode("utf-8")  # writable as UTF-8 anywhere a reason goes


def test_score_batch_names_an_undecodable_clip_path_and_its_problem(monkeypatch, tmp_path):
    pytest.importorskip("graph.builder")
    from tests.graph_scripts import garbage_file

    _scripted(monkeypatch, tmp_path)
    garbage_file(tmp_path / "g.mp4")
    os.rename(tmp_path / "g.mp4", os.fsencode(tmp_path) + b"/\xffgarbage.mp4")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"path": p, "instruction": "push"}) + "\n"
                                for p in ("\udcffmissing.mp4", "\udcffgarbage.mp4")))
    out = tmp_path / "o.jsonl"
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify"])
    assert res.exit_code == 0, res.output
    rows = {r["line"]: r["result"] for r in map(json.loads, out.read_text().splitlines())}
    assert all(r["status"] == "ineligible" and r["reward"] is None for r in rows.values())
    missing, garbage = rows[1]["reasons"][0], rows[2]["reasons"][0]
    assert "ValidationError" not in missing + garbage, (missing, garbage)
    assert "\\udcffmissing.mp4" in missing and "not found" in missing, missing
    assert "\\udcffgarbage.mp4" in garbage and "VideoDecodeError" in garbage, garbage
