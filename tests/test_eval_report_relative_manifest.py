"""summary.json and started.json written before `raa eval reward` recorded its manifest as an absolute path hold it as
given, relative to the folder the run started in (which they do not record): `raa eval report` run from another folder
named a wrong path in the repair hint, the page's header and the command finishing a stopped run. A relative path is
now resolved against the record's own folder, and when the manifest is not there the text says so
(`evals.eval_runs.run_manifest`)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from typer.testing import CliRunner

from evals.eval_runs import run_manifest, shown_run, unfinished_note
from graph.cli import app
from tests.test_eval_report_damaged_hint import GOOD


def _report(tmp_path, manifest: str):
    out = tmp_path / "ev"
    out.mkdir()
    rows = [GOOD, {**GOOD, "path": "/c/b.mp4", "reward": 1.5}]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "summary.json").write_text(json.dumps({"paths": ["/c/a.mp4", "/c/b.mp4"], "presets": ["full"],
                                                  "manifest": manifest}))
    res = CliRunner().invoke(app, ["eval", "report", str(out)], env={"RAA_TRACES_PATH": str(tmp_path / "t.db")})
    return out, res.exit_code, " ".join(res.output.split())


def test_a_relative_manifest_found_in_the_records_folder_is_named_in_full(tmp_path):
    out = tmp_path / "ev"
    (out / "suite").mkdir(parents=True)
    (out / "suite" / "manifest.jsonl").write_text("")
    record = {"manifest": "suite/manifest.jsonl"}
    assert run_manifest(record, out) == str(out / "suite" / "manifest.jsonl")
    assert run_manifest(record) == "suite/manifest.jsonl"  # no folder given: as recorded
    assert f"manifest {out / 'suite' / 'manifest.jsonl'}," in shown_run({**record, "finished": "t"}, out)
    command = shlex.join(["raa", "eval", "reward", "-m", str(out / "suite" / "manifest.jsonl"), "-o", str(out)])
    assert f"`{command}`" in unfinished_note(record, out)


def test_a_relative_manifest_not_there_is_said_to_be_so(tmp_path):
    out, code, text = _report(tmp_path, "suite/manifest.jsonl")
    assert code == 2, text
    assert "suite/manifest.jsonl is a path relative to the folder `raa eval reward` ran in" in text, text
    assert f"not in {out} ({out / 'suite' / 'manifest.jsonl'} is no file)" in text, text
    note = unfinished_note({"manifest": "suite/manifest.jsonl"}, out)
    assert "relative to the folder `raa eval reward` ran in" in note and "is no file" in note, note
    header = shown_run({"manifest": "suite/manifest.jsonl"}, out)
    assert "relative to the folder" in header, header


def test_an_absolute_manifest_is_named_as_recorded(tmp_path):
    out, code, text = _report(tmp_path, "/m/manifest.jsonl")  # not there either: a record of this raa, as before
    assert code == 2 and "-m /m/manifest.jsonl" in text and "relative" not in text, text


def test_a_relative_manifest_of_two_files_is_not_resolved_to_the_records_folder(tmp_path, monkeypatch):
    # the record's path names a file from the folder the report runs in, and another in the record's folder: the run
    # may have started in either (the record does not say), so neither is taken silently; the same file twice is one
    ran = tmp_path / "ran"
    out = ran / "ev"
    out.mkdir(parents=True)
    (ran / "manifest.jsonl").write_text('{"path": "/c/a.mp4"}\n')
    (out / "manifest.jsonl").write_text('{"path": "/c/other.mp4"}\n')
    monkeypatch.chdir(ran)
    record = {"manifest": "manifest.jsonl"}
    assert run_manifest(record, out) == "manifest.jsonl"  # as recorded: the folder's file may not be the run's
    note = unfinished_note(record, out)
    assert f"{ran / 'manifest.jsonl'}" in note and f"{out / 'manifest.jsonl'}" in note, note
    assert "two files" in shown_run(record, out)
    (out / "manifest.jsonl").unlink()
    (out / "manifest.jsonl").symlink_to(ran / "manifest.jsonl")
    assert run_manifest(record, out) == str(out / "manifest.jsonl")  # one file under two names: no doubt
    assert run_manifest(record, Path("ev")) == str(out / "manifest.jsonl")  # a relative record folder: joined, in full
