"""`raa score-batch`'s manifest and output, each looked at and then read by name in a second step
(`graph.batch_command.score_batch_command`, `graph.batch_output.read_output`): a file removed between the two looks.

- The manifest, removed after `missing_file` found it: with an output already there, ``out.samefile(manifest)``
  stat'ed it again and its bare FileNotFoundError escaped (a traceback); with none, the read said "cannot read
  manifest M: FileNotFoundError: ..." where a missing manifest is "manifest not found: M".
- The output, removed after `read_output`'s stamp (a stat) and before its read by name: the read's FileNotFoundError
  refused the batch ("--out O cannot be read"), though an output that is not there is a batch started afresh."""

from __future__ import annotations

import json

import pytest

from graph.batch_output import read_output
from graph.cli import app
from tests.cli_agent_helpers import _env, runner
from tests.path_calls import removed_after_first_look


@pytest.mark.parametrize("with_output", [True, False])
@pytest.mark.parametrize("looks", [2, 3])
def test_a_manifest_removed_after_a_look_is_not_found(monkeypatch, tmp_path, looks, with_output):
    """Its first look is click's (`click.Path`: a stat, then os.access), its second asks whether it is a folder
    (`Path.is_dir`), its third whether it is a file (`missing_file`)."""
    _env(monkeypatch, tmp_path)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    manifest.write_text(json.dumps({"path": "a.mp4", "instruction": "push it"}) + "\n")
    before = json.dumps({"key": "k", "result": {"status": "scored", "reward": 1.0}}) + "\n"
    if with_output:
        out.write_text(before)
    seen = removed_after_first_look(monkeypatch, manifest, looks)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out)])
    monkeypatch.undo()
    assert len(seen) >= looks and not manifest.exists(), seen
    assert res.exit_code == 2, (res.output, res.exception)
    assert f"manifest not found: {manifest}" in res.output, res.output
    assert (out.read_text() == before) if with_output else not out.exists()


def test_an_output_removed_after_its_stamp_is_read_as_none(monkeypatch, tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"key": "k", "result": {"status": "scored", "reward": 1.0}}) + "\n")
    seen = removed_after_first_look(monkeypatch, out)
    output = read_output(out)
    monkeypatch.undo()
    assert seen and not out.exists()
    assert (output.lines, output.values, output.stamp) == ([], [], None) or len(output.lines) == 1, output
    if output.stamp is not None:  # read whole by the one look: the stamp is of the file read
        assert output.values[0]["key"] == "k"
