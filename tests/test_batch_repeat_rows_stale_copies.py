"""Another manifest's copies of a row this run scores again (`graph.batch_repeat_rows.others_copies`) are written again
from the new row only as that manifest holds them now: a copy of a line deleted from it since (or whose fields changed
since) was written again as it stood, a stale row refreshed with a new result, which stayed until that manifest ran
again."""

from __future__ import annotations

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.test_batch_manifest_lines import TASK, _rows, _write
from tests.test_batch_repeat_rows_shared import first_row_deleted


def _run(manifest, out) -> str:  # noqa: ANN001
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 0, res.output
    return res.output


def test_a_copy_of_a_line_the_other_manifest_no_longer_has_is_not_written_again(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": "b1"}])  # b's repeat line b2 deleted since
    said = _run(a, out)
    assert "of other manifests" not in said, said
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2"], _rows(out)


def test_a_copy_is_written_again_with_the_other_manifests_line_as_it_is_now(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("b1", "b2-new")])  # its field since
    said = _run(a, out)
    assert "1 row(s) of other manifests sharing" in said, said
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2", "b2-new"], rows
    assert len({r["result"]["run_id"] for r in rows}) == 1, rows
