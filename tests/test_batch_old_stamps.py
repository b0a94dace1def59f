"""Outputs written before rows recorded their clip's inode and device ("clip": size and modification time only) still
resume: their clips are not scored again, in place or moved with a link left at the folder's old name."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graph.cli import app
from tests.test_batch_moved_clips import _move, _rows, _setup

runner = CliRunner()


def _as_old_version(out) -> None:
    """Each row's "clip" as the version before wrote it: size and modification time, no inode or device."""
    rows = _rows(out)
    assert all({"ino", "dev"} <= set(row["clip"]) for row in rows), rows  # else this tests nothing
    out.write_text("".join(json.dumps({**row, "clip": {k: row["clip"][k] for k in ("size", "mtime_ns")}}) + "\n"
                           for row in rows))


@pytest.mark.parametrize("moved", [False, True])
def test_rows_without_inode_and_device_are_kept_not_scored_again(monkeypatch, tmp_path, moved):
    manifest, out, args = _setup(monkeypatch, tmp_path, 2)
    assert runner.invoke(app, args).exit_code == 0
    _as_old_version(out)
    before = _rows(out)
    if moved:
        _move(tmp_path)
    for extra in ([], ["--retry-ineligible"]):
        res = runner.invoke(app, [*args, *extra])
        assert res.exit_code == 0, res.output
        assert "0 to score" in res.output and "warning" not in res.output, res.output
        rows = _rows(out)
        assert len(rows) == 2 and [r["result"] for r in rows] == [r["result"] for r in before], rows
        assert all("ino" not in r["clip"] for r in rows), rows  # kept as they were, not written again
