"""Whose a row of a bad manifest line or of a repeat line is ("which manifest wrote it") is one rule,
`graph.batch_manifest_file.RowManifests`, asked by both `graph.batch_resume.stale_rows` (a bad line's row goes and
is written again) and `graph.batch_repeat_rows.recorded_manifest` (a repeat row is judged as this manifest's).
Each wrote it out on its own, and they disagreed on a manifest moved with a link left at its old folder, then saved
by a rename (a new inode) and run by its new name: its repeat rows were taken as its own (the name they record leads
here, into the folder they record), its bad line's row was not (its key is of the old name, which the run was not
given), so that row stayed beside the one written under the new name, line 1 twice."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from graph import batch_manifest_file
from graph.batch_manifest import drop_repeats, read_items
from graph.batch_manifest_file import RowManifests
from graph.batch_repeat_rows import recorded_manifest
from graph.batch_resume import stale_rows
from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.graph_scripts import square_clips

LINES = ["{not json", '{"path": "c.mp4", "instruction": "push", "id": "a"}',
         '{"path": "c.mp4", "instruction": "push", "id": "b"}']


def _write(path: Path, lines: list[str] = LINES) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def _saved(path: Path) -> None:
    """`path` saved by an editor that writes a new file and renames it over the old one: a new inode."""
    _write(path.with_name("new.jsonl"))
    path.with_name("new.jsonl").replace(path)


def _rows(manifest: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bad line's row and the repeat line's row a run of `manifest` writes (their item fields, as
    `graph.batch.write_bad_lines` and `write_repeats` copy them)."""
    items = drop_repeats(read_items(manifest, "full")[0])[0]
    bad = next(it for it in items if it["error"] is not None)
    repeat = next(it for it in items if it.get("repeat_of") is not None)
    fields = ("key", "line", "path", "preset", "draw", "manifest", "manifest_file", "manifest_file_id",
              "manifest_folder_id")
    return ({k: bad[k] for k in fields} | {"result": {"status": "ineligible"}},
            {k: repeat[k] for k in fields} | {"repeat_of": repeat["repeat_of"], "result": {"status": "scored"}})


def _judged(manifest: Path, bad: dict[str, Any], repeat: dict[str, Any]) -> tuple[bool, bool]:
    """(the bad line's row goes as this manifest's, the repeat row is this manifest's), for a run of `manifest`."""
    items, _, read = read_items(manifest, "full")
    manifests = RowManifests(read)  # one per run, as `raa score-batch` builds it
    goes = stale_rows(manifest, items, "full", 0, manifests=manifests, retry_ineligible=False)
    return goes(bad) == "bad line", recorded_manifest(manifests)(repeat) == "this"


Rows = tuple[dict[str, Any], dict[str, Any]]


def _same(tmp: Path) -> tuple[Rows, Path]:
    return _rows(tmp / "day" / "m.jsonl"), tmp / "day" / "m.jsonl"


def _saved_since(tmp: Path) -> tuple[Rows, Path]:
    rows = _rows(tmp / "day" / "m.jsonl")
    _saved(tmp / "day" / "m.jsonl")
    return rows, tmp / "day" / "m.jsonl"


def _moved(tmp: Path, *, saved: bool) -> Rows:
    """Rows of day/m.jsonl; then mv day day1; ln -s day1 day; and, `saved`, day1/m.jsonl saved by a rename."""
    rows = _rows(tmp / "day" / "m.jsonl")
    (tmp / "day").rename(tmp / "day1")
    (tmp / "day").symlink_to(tmp / "day1", target_is_directory=True)
    if saved:
        _saved(tmp / "day1" / "m.jsonl")
    return rows


def _moved_run_by_old_name(tmp: Path) -> tuple[Rows, Path]:
    return _moved(tmp, saved=False), tmp / "day" / "m.jsonl"


def _moved_saved_run_by_new_name(tmp: Path) -> tuple[Rows, Path]:
    return _moved(tmp, saved=True), tmp / "day1" / "m.jsonl"


def _moved_saved_run_by_old_name(tmp: Path) -> tuple[Rows, Path]:
    return _moved(tmp, saved=True), tmp / "day" / "m.jsonl"


def _link_re_pointed(tmp: Path) -> tuple[Rows, Path]:
    rows = _rows(tmp / "day" / "m.jsonl")
    (tmp / "day").rename(tmp / "day1")
    (tmp / "day2").mkdir()
    _write(tmp / "day2" / "m.jsonl")
    (tmp / "day").symlink_to(tmp / "day2", target_is_directory=True)
    return rows, tmp / "day" / "m.jsonl"


def _written_by_another_name_of_the_file(tmp: Path) -> tuple[Rows, Path]:
    os.link(tmp / "day" / "m.jsonl", tmp / "day" / "n.jsonl")  # a hard link: duplicate names of one manifest
    return _rows(tmp / "day" / "n.jsonl"), tmp / "day" / "m.jsonl"


def _written_by_another_manifest(tmp: Path) -> tuple[Rows, Path]:
    (tmp / "other").mkdir()
    _write(tmp / "other" / "m.jsonl")
    return _rows(tmp / "other" / "m.jsonl"), tmp / "day" / "m.jsonl"


def _written_by_one_since_gone(tmp: Path) -> tuple[Rows, Path]:
    rows, run = _written_by_another_manifest(tmp)
    (tmp / "other" / "m.jsonl").unlink()
    return rows, run


CASES = {  # how the rows were written and the manifest is run now; whether they are its own
    "same": (_same, True),
    "saved by a rename since": (_saved_since, True),
    "moved, a link left, run by the old name": (_moved_run_by_old_name, True),
    "moved, a link left, saved, run by the new name": (_moved_saved_run_by_new_name, True),
    "moved, a link left, saved, run by the old name": (_moved_saved_run_by_old_name, True),
    "link re-pointed at another manifest": (_link_re_pointed, False),
    "two names of one file (a hard link)": (_written_by_another_name_of_the_file, True),
    "another manifest": (_written_by_another_manifest, False),
    "written by a manifest since deleted": (_written_by_one_since_gone, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_lines_row_and_a_repeat_row_of_one_manifest_are_judged_alike(tmp_path, case):
    (tmp_path / "day").mkdir()
    _write(tmp_path / "day" / "m.jsonl")
    make, own = CASES[case]
    (bad, repeat), run = make(tmp_path)
    assert _judged(run, bad, repeat) == (own, own)


def test_an_inode_reused_by_another_manifest_keeps_that_manifests_rows(tmp_path):
    """A row recording this manifest's file under another manifest's own name (`cp a.jsonl b.jsonl` may give b the
    inode a had before a save by a rename) is that manifest's, for both kinds of row."""
    (tmp_path / "day").mkdir()
    _write(tmp_path / "day" / "m.jsonl")
    (tmp_path / "other").mkdir()
    _write(tmp_path / "other" / "m.jsonl")
    here = _rows(tmp_path / "day" / "m.jsonl")
    bad, repeat = (row | {k: here[i][k] for k in ("manifest_file_id", "manifest_folder_id")}
                   for i, row in enumerate(_rows(tmp_path / "other" / "m.jsonl")))
    assert _judged(tmp_path / "day" / "m.jsonl", bad, repeat) == (False, False)


@pytest.mark.parametrize("by, own", [("this name", True), ("another name", False)])
def test_an_old_bad_lines_row_recording_no_manifest_is_known_by_its_key(tmp_path, by, own):
    """A bad line's row written before rows recorded their manifest (no name, no file) is known by its key alone: of
    a name the manifest is run by, it is this manifest's; a repeat row recording none is not known (None:
    `graph.batch_repeat_rows.stale_repeats` judges it by its key's place and its line's fields instead)."""
    (tmp_path / "day").mkdir()
    _write(tmp_path / "day" / "m.jsonl")
    (tmp_path / "other").mkdir()
    _write(tmp_path / "other" / "m.jsonl")
    bad, repeat = _rows(tmp_path / ("day" if by == "this name" else "other") / "m.jsonl")
    for row in (bad, repeat):
        for k in ("manifest_file", "manifest_file_id", "manifest_folder_id"):
            del row[k]
    assert _judged(tmp_path / "day" / "m.jsonl", bad, repeat) == (own, False)


def test_a_rows_answer_does_not_change_when_the_folder_its_name_leads_into_changes_during_the_run(tmp_path):
    """The folder a recorded name leads into is looked up once per name and run, as where the name leads is: the
    manifest moved with a link left and saved by a rename, run by its new name; the link re-pointed at another
    folder while the tools load (between `graph.batch.done_keys` and `drop_rows`, which ask the same row). Looked up
    at each question, the bad line's row went at the first and stayed at the second, beside the row written again
    (the line twice), and the repeat row was this manifest's, then another's."""
    (tmp_path / "day").mkdir()
    _write(tmp_path / "day" / "m.jsonl")
    (bad, repeat), run = _moved_saved_run_by_new_name(tmp_path)
    items, _, read = read_items(run, "full")
    manifests = RowManifests(read)
    goes = stale_rows(run, items, "full", 0, manifests=manifests, retry_ineligible=False)
    whose = recorded_manifest(manifests)
    first = (goes(bad), whose(repeat))
    assert first == ("bad line", "this")
    (tmp_path / "day2").mkdir()
    (tmp_path / "day").unlink()
    (tmp_path / "day").symlink_to(tmp_path / "day2", target_is_directory=True)
    assert (goes(bad), whose(repeat)) == first


def test_one_run_judges_every_row_by_one_view_of_the_manifest_names(monkeypatch, tmp_path):
    """`raa score-batch` asks whose a bad line's row (`stale_rows`) and a repeat row (`recorded_manifest`, at the
    start and for other manifests' copies) is, and `fixable_rows` asks again: each built its own `RowManifests`, so
    each looked up the folder a recorded name leads into on its own, and a link re-pointed between the lookups judged
    the rows of one run against different folders. One `RowManifests` per run; one lookup per name."""
    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "day").mkdir()
    square_clips(tmp_path / "day", 1)[0].rename(tmp_path / "day" / "c.mp4")
    _write(tmp_path / "day" / "m.jsonl")
    out = tmp_path / "out.jsonl"

    def run(manifest: Path) -> str:
        res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
        assert res.exit_code == 0, res.output
        return res.output

    run(tmp_path / "day" / "m.jsonl")
    _moved(tmp_path, saved=True)  # rows recording a name that leads here, another file: the folder is asked
    built, looked = [], []
    real_init, real_folder = batch_manifest_file.RowManifests.__init__, batch_manifest_file.manifest_folder_id

    def init(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        built.append(args)
        real_init(self, *args, **kwargs)

    def folder(name):  # noqa: ANN001, ANN202
        looked.append(str(name))
        return real_folder(name)

    monkeypatch.setattr(batch_manifest_file.RowManifests, "__init__", init)
    monkeypatch.setattr(batch_manifest_file, "manifest_folder_id", folder)
    said = run(tmp_path / "day1" / "m.jsonl")
    assert len(built) == 1, (built, said)
    assert looked and len(looked) == len(set(looked)), looked
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["line"] for r in rows) == [1, 2, 3], rows  # one row per line: none left beside its new one
