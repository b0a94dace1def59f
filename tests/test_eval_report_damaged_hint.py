"""`raa eval report DIR` refuses the folder when a row of results.jsonl cannot be counted (a hand edit: a reward
outside 0..1, an ineligible row carrying one): the error named the file, line and field, and nothing of what to do.
It now says how to repair it: the run's own command (`raa eval reward` scores such a row again) or dropping the
line."""

from __future__ import annotations

import json
import shlex

from typer.testing import CliRunner

from graph.cli import app

GOOD = {"path": "/c/a.mp4", "preset": "full", "label": "failure", "reward": 0.5, "status": "scored",
        "judge": {"status": "judged", "reasonable": False}, "usage": {"calls": 2}}


def _report(tmp_path, summary: dict | None):
    out = tmp_path / "ev dir"
    out.mkdir()
    rows = [GOOD, {**GOOD, "path": "/c/b.mp4", "reward": 1.5}]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary is not None:
        (out / "summary.json").write_text(json.dumps(summary))
    res = CliRunner().invoke(app, ["eval", "report", str(out)], env={"RAA_TRACES_PATH": str(tmp_path / "t.db")})
    return out, res.exit_code, " ".join(res.output.split())


def test_the_refusal_names_the_runs_command_and_the_line_to_drop(tmp_path):
    summary = {"paths": ["/c/a.mp4", "/c/b.mp4"], "presets": ["full"], "manifest": "/m/manifest.jsonl"}
    out, code, text = _report(tmp_path, summary)
    assert code == 2 and f"{out / 'results.jsonl'}:2" in text, text
    command = shlex.join(["raa", "eval", "reward", "-m", "/m/manifest.jsonl", "-o", str(out), "--presets", "full"])
    assert f"to repair it, run `{command}` (it scores that row again)" in text, text
    assert "or delete line 2 of" in text and not (out / "index.html").exists(), text


def test_without_a_recorded_run_the_hint_names_the_folder(tmp_path):
    out, code, text = _report(tmp_path, None)
    assert code == 2 and f"{out / 'results.jsonl'}:2" in text, text
    assert f"rerun `raa eval reward` with its manifest and -o {shlex.quote(str(out))} (it scores" in text, text
    assert "or delete line 2 of" in text, text


def test_without_a_recorded_run_the_hint_names_the_rows_preset(tmp_path):
    """`raa eval reward` scores preset full unless --presets says otherwise: a hint without it named a command that
    left a refused row of preset direct as it was."""
    out = tmp_path / "ev"
    out.mkdir()
    rows = [{**GOOD, "preset": "direct"}, {**GOOD, "path": "/c/b.mp4", "preset": "direct", "reward": 1.5}]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["eval", "report", str(out)], env={"RAA_TRACES_PATH": str(tmp_path / "t.db")})
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and f"{out / 'results.jsonl'}:2" in text, text
    assert f"-o {shlex.quote(str(out))} (it scores that row again with --presets naming direct)" in text, text
