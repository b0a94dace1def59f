"""`graph.batch_resume.stale_rows`' answer for a bad manifest line's row is asked of every row several times a run
(the rows that stay, other manifests' copies, edited rows, the rewrite): its line's key (`bad_line_key`: the
manifest's path resolved, a digest) is worked out once per line, not at every question."""

from __future__ import annotations

from graph import batch_resume
from graph.batch import bad_line_key, bad_line_path
from graph.batch_manifest import read_items
from graph.batch_manifest_file import RowManifests
from graph.batch_repeat_rows import recorded_manifest


def test_a_bad_lines_key_is_worked_out_once_per_line(monkeypatch, tmp_path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("not json\n{}\n")
    calls = []

    def counted(*args):  # noqa: ANN002, ANN202
        calls.append(args)
        return bad_line_key(*args)

    monkeypatch.setattr(batch_resume, "bad_line_key", counted)
    rows = [{"key": bad_line_key(manifest, n, "full"), "line": n, "path": bad_line_path(n), "result": {}}
            for n in (1, 2)]
    rows.append({**rows[0], "key": "another manifest's"})
    read = read_items(manifest, "full")[2]
    goes = batch_resume.stale_rows(manifest, [], "full", 0, manifests=RowManifests(read), retry_ineligible=False)
    for _ in range(3):
        assert [goes(row) for row in rows] == ["bad line", "bad line", None]
    assert sorted(args[1] for args in calls) == [1, 2], calls


def test_a_bad_lines_rows_recorded_name_is_looked_up_once(tmp_path) -> None:
    """A bad line's row recording the file read under a name no file has now (the manifest moved since, no link left)
    is this manifest's. A file made at that name during the run (`cp`) turned the later question (`drop_rows`,
    minutes after `kept_rows`) into another manifest's: the row stayed beside the one the run wrote, the line twice.
    Whether the name is another manifest's own is looked up once, as the rest of a row's answer."""
    for day in ("a", "b"):
        (tmp_path / day).mkdir()
    manifest = tmp_path / "b" / "m.jsonl"
    manifest.write_text("not json\n")
    read = read_items(manifest, "full")[2]
    row = {"key": "a's old key", "line": 1, "path": bad_line_path(1), "result": {}, "preset": "full", "draw": 0,
           "manifest_file": str((tmp_path / "a").resolve() / "m.jsonl"), "manifest_file_id": read.identity,
           "manifest_folder_id": read.folder}
    goes = batch_resume.stale_rows(manifest, [], "full", 0, manifests=RowManifests(read), retry_ineligible=False)
    assert goes(row) == "bad line"
    (tmp_path / "a" / "m.jsonl").write_text("not json\n")  # made at the recorded name mid-run
    assert goes(row) == "bad line"


def test_a_repeat_rows_recorded_name_is_looked_up_once(tmp_path) -> None:
    """The same for a repeat row (`graph.batch_repeat_rows.recorded_manifest`, asked by `kept_rows` at the start and
    `drop_rows` at the end): "this" at the start (its line written again), "other" once a file was made at its name,
    so it stayed beside the new row, the id twice with its reward."""
    for day in ("a", "b"):
        (tmp_path / day).mkdir()
    manifest = tmp_path / "b" / "m.jsonl"
    manifest.write_text('{"path": "c.mp4", "instruction": "push"}\n')
    read = read_items(manifest, "full")[2]
    row = {"key": "k", "repeat_of": "s", "manifest_file": str((tmp_path / "a").resolve() / "m.jsonl"),
           "manifest_file_id": read.identity, "manifest_folder_id": read.folder}
    whose = recorded_manifest(RowManifests(read))
    assert whose(row) == "this"
    (tmp_path / "a" / "m.jsonl").write_text("{}\n")  # made at the recorded name mid-run
    assert whose(row) == "this"
