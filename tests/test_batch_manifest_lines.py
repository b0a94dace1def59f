"""Manifest lines as `raa score-batch` turns them into rows: a line repeating an earlier clip and instruction under
another `id` got no row (its id was lost to `raa eval compare --pair-by id`), a `#` comment line got an ineligible
row, a bad line's reason said "manifest" twice, and a symlinked clip's row named the link's target (a Hugging Face
cache's `blobs/<sha>`) instead of the path the manifest gave."""

from __future__ import annotations

import json
from pathlib import Path

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.graph_scripts import square_clips

TASK = "push the red block to the right"


def _rows(out) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


def _write(manifest, rows: list[dict | str]) -> None:
    manifest.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def test_a_repeated_clip_under_another_id_gets_its_own_row_scored_once(monkeypatch, tmp_path):
    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 2)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    _write(manifest, [{"path": "c0.mp4", "instruction": TASK, "id": "a"},
                      {"path": "c1.mp4", "instruction": TASK, "id": "b"},
                      {"path": "c0.mp4", "instruction": TASK, "id": "c"},  # c0 again, another id: its own row
                      {"path": "c0.mp4", "instruction": TASK, "id": "a"}])  # line 1 again, as it is: no second row
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = {r["manifest"]["id"]: r for r in _rows(out)}
    assert sorted(rows) == ["a", "b", "c"] and len(_rows(out)) == 3, _rows(out)
    assert rows["c"]["line"] == 3 and rows["c"]["result"] == rows["a"]["result"]  # the first's result, reused
    assert len({r["key"] for r in rows.values()}) == 3
    assert "scored=3" in res.output and "line 4 = line 1" in res.output, res.output
    calls = len(model.calls)
    res = runner.invoke(app, args)  # a resume counts both lines of c0 as done
    assert res.exit_code == 0 and "3 items, 3 already in" in res.output and "0 to score" in res.output, res.output
    assert len(_rows(out)) == 3 and len(model.calls) == calls
    # an output written before repeats had rows: the repeat's row is added from its first line's, without a run
    out.write_text("".join(json.dumps(r) + "\n" for r in _rows(out) if r["manifest"]["id"] != "c"))
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 already in" in res.output, res.output
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a", "b", "c"] and len(model.calls) == calls
    lines = manifest.read_text().replace('"id": "c"', '"id": "d"')  # the repeat's id corrected: its row follows
    manifest.write_text(lines)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output, res.output
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a", "b", "d"] and len(model.calls) == calls


def test_comment_lines_are_skipped_and_counted_not_ineligible(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    _write(manifest, ["# clips of run 3", {"path": "c0.mp4", "instruction": TASK},
                      '  # {"path": "c1.mp4", "instruction": "push"}'])
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 0, res.output
    assert [r["line"] for r in _rows(out)] == [2] and "ineligible=0" in res.output, res.output
    assert "2 comment line(s) (#) skipped" in res.output, res.output


def test_a_bad_lines_reason_names_the_manifest_once(tmp_path):
    from graph.batch import read_manifest, write_bad_lines
    from graph.batch_output import RowWriter

    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"path": "a.mp4"}\n{broken\n')
    write_bad_lines(read_manifest(manifest, "full"), RowWriter(tmp_path / "out.jsonl"))
    reasons = [r["result"]["reasons"][0] for r in _rows(tmp_path / "out.jsonl")]
    assert reasons[0].startswith("manifest: input: line 1: a manifest row needs"), reasons
    assert reasons[1].startswith("manifest: input: line 2: not valid JSON"), reasons
    assert all(reason.count("manifest") == 1 + reason.startswith("manifest: input: line 1") for reason in reasons)


def test_a_symlinked_clips_row_names_the_path_the_manifest_gave(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "blobs").mkdir()
    (tmp_path / "snapshots").mkdir()
    [clip] = square_clips(tmp_path / "blobs", 1)
    (tmp_path / "snapshots" / "clip.mp4").symlink_to(clip)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    _write(manifest, [{"path": "snapshots/clip.mp4", "instruction": TASK}])
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    assert runner.invoke(app, args).exit_code == 0
    [row] = _rows(out)
    assert row["path"] == str(tmp_path.resolve() / "snapshots" / "clip.mp4"), row["path"]
    assert row["result"]["status"] == "scored"
    res = runner.invoke(app, args)  # the resume still knows it
    assert "1 already in" in res.output and len(_rows(out)) == 1, res.output
    out.write_text(json.dumps({**row, "path": str(clip.resolve())}) + "\n")  # as rows named it before
    res = runner.invoke(app, args)
    assert "1 already in" in res.output and "took their manifest line's current fields" in res.output, res.output
    assert [r["path"] for r in _rows(out)] == [row["path"]]


def test_a_repeat_follows_its_lines_row_whatever_it_holds(tmp_path):
    """The repeat's row is written with its earlier line's, in one process or from a worker (`RowWriter.follow`):
    an ineligible result (a worker that died on the clip) is the repeat's too, counted, not in the usage twice."""
    from graph.batch import ROW_FIELDS, result_line
    from graph.batch_output import RowWriter
    from graph.run_results import fault_result
    from graph.schemas import Fault

    item = {"key": "k0", "line": 1, "path": "/x/c.mp4", "instruction": TASK, "preset": "full", "draw": 0,
            "manifest": {"id": "a"}}
    writer = RowWriter(tmp_path / "out.jsonl", scorer={"model": "m"})
    writer.follow("k0", {**{k: item[k] for k in ROW_FIELDS}, "key": "k1", "line": 2, "manifest": {"id": "b"},
                         "repeat_of": "k0"})
    fault = Fault(stage="batch", kind="internal", message="the worker process died (signal 9) on each of 2 attempts")
    writer.write(result_line(item, fault_result("full", fault)), "ineligible")
    first, repeat = _rows(tmp_path / "out.jsonl")
    assert (repeat["key"], repeat["line"], repeat["manifest"], repeat["repeat_of"]) == ("k1", 2, {"id": "b"}, "k0")
    assert repeat["result"] == first["result"] and repeat["scorer"] == {"model": "m"}
    assert writer.counts["ineligible"] == 2 and writer.faults["batch: internal"][0] == 2
    assert writer.followers == {}


def _repeats_manifest(tmp_path, ids: list[str]):
    """A manifest naming clip c0 once per id of `ids` (lines 2.. repeat line 1's clip and instruction), then c1."""
    square_clips(tmp_path, 2)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    _write(manifest, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ids]
           + [{"path": "c1.mp4", "instruction": TASK, "id": "z"}])
    return manifest, out, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]


def test_deleting_a_middle_repeat_line_leaves_one_row_per_line(monkeypatch, tmp_path):
    """Repeat rows are keyed by their place among the repeats (`repeat_key`): deleting line 2 of a, b, c moved c into
    b's place (its row took id c) and c's old row stayed, so the output held id c twice."""
    model = _scripted(monkeypatch, tmp_path)
    manifest, out, args = _repeats_manifest(tmp_path, ["a", "b", "c"])
    assert runner.invoke(app, args).exit_code == 0
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a", "b", "c", "z"]
    calls = len(model.calls)
    _write(manifest, [line for line in manifest.read_text().splitlines() if '"id": "b"' not in line])
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output, res.output
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a", "c", "z"], _rows(out)
    assert len(model.calls) == calls


def test_a_lines_rescored_row_is_copied_again_into_its_repeats(monkeypatch, tmp_path):
    """Deleting the row of a line to score it again rescored it, but the rows of lines repeating it kept the old copy:
    one clip with two results, which `raa eval compare` then refuses (or reads as two runs)."""
    _scripted(monkeypatch, tmp_path)
    manifest, out, args = _repeats_manifest(tmp_path, ["a", "b"])
    assert runner.invoke(app, args).exit_code == 0
    rows = _rows(out)
    first = next(r for r in rows if r["manifest"]["id"] == "a")
    # an old result of line 1 in every copy: deleting line 1's row must not leave it in line 2's
    old = {**first["result"], "reward": 0.123}
    out.write_text("".join(json.dumps({**r, "result": old}) + "\n" for r in rows if r["manifest"]["id"] == "b")
                   + "".join(json.dumps(r) + "\n" for r in rows if r["manifest"]["id"] == "z"))
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "1 to score, 1 to take an earlier line's result" in res.output, res.output
    rows = {r["manifest"]["id"]: r for r in _rows(out)}
    assert sorted(rows) == ["a", "b", "z"] and len(_rows(out)) == 3, _rows(out)
    assert rows["b"]["result"] == rows["a"]["result"] and rows["a"]["result"]["reward"] != 0.123


def test_a_path_with_dotdot_is_named_without_it_where_that_names_the_same_file(tmp_path):
    """A manifest line's "../clips/a.mp4" was kept in the row as "<folder>/m/../clips/a.mp4"; it is the clip's name
    without the ".." when that names the same file, and as given when a link on the way makes ".." lead elsewhere."""
    from graph.batch import read_manifest

    (tmp_path / "m").mkdir()
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "a.mp4").write_bytes(b"a")
    (tmp_path / "far" / "deep").mkdir(parents=True)
    (tmp_path / "far" / "a.mp4").write_bytes(b"far")
    (tmp_path / "m" / "link").symlink_to(tmp_path / "far" / "deep")  # link/.. is far/, not m/
    manifest = tmp_path / "m" / "m.jsonl"
    _write(manifest, [{"path": "../clips/a.mp4", "instruction": TASK}, {"path": "link/../a.mp4", "instruction": TASK}])
    plain, linked = read_manifest(manifest, "full")
    root = tmp_path.resolve()
    assert plain["path"] == str(root / "clips" / "a.mp4") and plain["written"] == "../clips/a.mp4"
    assert linked["path"] == str(root / "m" / "link" / ".." / "a.mp4")  # normalised it would name m/a.mp4
    assert linked["resolved"] == str(root / "far" / "a.mp4")


def test_a_path_with_dotdot_through_a_missing_folder_is_kept_as_given(tmp_path):
    """"gone/../clips/a.mp4" names no file when gone/ is missing (the system resolves gone/ before its ".."), but
    os.path.realpath collapses it lexically: the row named clips/a.mp4 and that clip was scored, where the line's
    own path is not found."""
    from graph.batch import read_manifest

    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "a.mp4").write_bytes(b"a")
    manifest = tmp_path / "m.jsonl"
    _write(manifest, [{"path": "gone/../clips/a.mp4", "instruction": TASK}])
    (item,) = read_manifest(manifest, "full")
    assert item["path"] == str(tmp_path.resolve() / "gone" / ".." / "clips" / "a.mp4")
    assert not Path(item["path"]).exists()


def test_every_name_of_one_clip_gets_a_row(monkeypatch, tmp_path):
    """Two names of one file (links into a Hugging Face cache's blob) with one instruction are one clip and one
    key: the second line was dropped as a repeat of the first, and its name had no row at all. It now gets its own
    row, under its own name, holding the first's result ("repeat_of": no second run); a line repeating another
    under its name and fields too still gets none (the same row twice). A hard link resolves to itself: another
    clip, scored on its own."""
    import os

    model = _scripted(monkeypatch, tmp_path)
    (blob,) = square_clips(tmp_path, 1)
    (tmp_path / "a.mp4").symlink_to(blob)
    (tmp_path / "b.mp4").symlink_to(blob)
    os.link(blob, tmp_path / "h.mp4")
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    _write(manifest, [{"path": "a.mp4", "instruction": TASK}, {"path": "b.mp4", "instruction": TASK},
                      {"path": "a.mp4", "instruction": TASK}, {"path": "h.mp4", "instruction": TASK}])
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 to score, 1 to take an earlier line's result" in res.output, res.output
    rows = {Path(r["path"]).name: r for r in _rows(out)}
    assert sorted(rows) == ["a.mp4", "b.mp4", "h.mp4"] and len(_rows(out)) == 3, _rows(out)
    assert rows["b.mp4"]["repeat_of"] == rows["a.mp4"]["key"] and rows["b.mp4"]["line"] == 2
    assert rows["b.mp4"]["result"] == rows["a.mp4"]["result"] and rows["a.mp4"]["result"]["status"] == "scored"
    assert "repeat_of" not in rows["h.mp4"] and rows["h.mp4"]["result"]["status"] == "scored"
    calls = len(model.calls)
    res = runner.invoke(app, args)  # a resume: the rows stand, nothing scored again
    assert res.exit_code == 0 and "0 to score" in res.output and len(model.calls) == calls, res.output
    assert len(_rows(out)) == 3


def test_the_comment_lines_said_are_those_of_the_manifest_read(monkeypatch, tmp_path):
    """The comment lines were counted from a second read of the manifest: one edited between the two reads was
    scored as one file and its comments counted from another (and the file was read twice)."""
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    _write(manifest, ["# clips of run 3", {"path": "c0.mp4", "instruction": TASK}])
    real = Path.read_bytes

    def read_then_edited(path: Path) -> bytes:
        data = real(path)
        if path == manifest:  # edited as soon as it has been read: its comment line gone
            _write(manifest, [{"path": "c0.mp4", "instruction": TASK}])
        return data

    monkeypatch.setattr(Path, "read_bytes", read_then_edited)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 0 and [r["line"] for r in _rows(out)] == [2], res.output
    assert "1 comment line(s) (#) skipped: line(s) 1" in res.output, res.output


def _two_names_of_one_clip(monkeypatch, tmp_path: Path) -> tuple[Path, Path]:
    """A manifest naming c0.mp4 twice with one instruction, first through a missing folder ("gone/../c0.mp4": one
    key, a name that cannot be opened), and its output's path."""
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    _write(manifest, [{"path": "gone/../c0.mp4", "instruction": TASK, "id": 1},
                      {"path": "c0.mp4", "instruction": TASK, "id": 2}])
    return manifest, out


def test_a_repeat_of_an_unreadable_name_is_not_offered_to_a_rerun_that_cannot_change_it(monkeypatch, tmp_path):
    """A line repeating an earlier line's clip and instruction under another name takes that line's result, also a
    failure to open the clip by the earlier name ("gone/../c0.mp4": a missing folder before a "..", which the key
    resolves away). Judged by its own name, which can be read, the repeat's row was "a rerun can fix": every resume
    said --retry-ineligible writes it again, and the flag wrote the same copy again. It now follows its first line's
    row alone: retried when that row is, and the first line's name is what to fix."""
    manifest, out = _two_names_of_one_clip(monkeypatch, tmp_path)
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "1 to take an earlier line's result" in res.output, res.output
    first, repeat = _rows(out)
    assert repeat["repeat_of"] == first["key"] and first["result"]["status"] == "ineligible", _rows(out)
    assert "not found" in first["result"]["reasons"][0] and repeat["result"] == first["result"], first
    assert "a rerun can fix" not in res.output and "writes it again" not in res.output, res.output
    res = runner.invoke(app, args)  # a plain resume: nothing the flag would change
    assert res.exit_code == 0 and "writes it again" not in res.output, res.output
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "0 to score" in res.output and "to take an earlier" not in res.output, res.output


def test_a_name_fixed_to_one_of_the_same_key_is_retried_by_the_next_retry(monkeypatch, tmp_path):
    """A line's name fixed to another name of the same file ("gone/../c0.mp4" to "c0.mp4": one key) keeps its row,
    and --retry-ineligible asked whether the clip can be read now by the row's old name: it could not, so the row
    stayed "not found" (and took the new name), and only a second --retry-ineligible scored it. The rerun reads the
    clip by the line's name as it is now, so that is the name asked about."""
    manifest, out = _two_names_of_one_clip(monkeypatch, tmp_path)
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    assert runner.invoke(app, args).exit_code == 0
    key = _rows(out)[0]["key"]
    _write(manifest, [{"path": "c0.mp4", "instruction": TASK, "id": 1}, {"path": "c0.mp4", "instruction": TASK, "id": 2}])
    res = runner.invoke(app, args)  # a plain resume offers the row to the flag
    assert res.exit_code == 0 and "a rerun can fix" in res.output, res.output
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "1 to score, 1 to take an earlier line's result" in res.output, res.output
    rows = _rows(out)
    assert [r["result"]["status"] for r in rows] == ["scored", "scored"] and rows[0]["key"] == key, rows
