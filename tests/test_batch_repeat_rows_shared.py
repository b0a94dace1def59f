"""Two manifests sharing one `--out`, each repeating one clip and instruction under other ids, a different number of
times: repeat rows were keyed by their place among the repeats alone (`repeat_key`), so the manifests shared keys.
Each run of the one with fewer repeats deleted the other's extra rows (no line of it had their keys), and each run of
either overwrote the other's rows of shared places with its own ids: a manifest's ids went missing from the output
until it ran again, and every run of one rewrote the other's rows. Repeat rows are keyed per manifest now, as the rows
of bad lines are (`bad_line_key`)."""

from __future__ import annotations

from pathlib import Path

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.graph_scripts import square_clips
from tests.test_batch_manifest_lines import TASK, _rows, _write


def test_two_manifests_with_other_repeats_of_one_clip_keep_each_others_rows(monkeypatch, tmp_path):
    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out = tmp_path / "out.jsonl"
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")])
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("b1", "b2")])

    def run(manifest):  # noqa: ANN001, ANN202
        res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
        assert res.exit_code == 0, res.output
        return res.output

    run(a)
    calls = len(model.calls)
    run(b)
    # the clip's one row (its first line's) is shared and takes the fields of the manifest run last, as any row
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a2", "a3", "b1", "b2"], _rows(out)
    for manifest in (a, b):  # nothing more to write: neither run removes or rewrites the other's rows
        said = run(manifest)
        assert "to take an earlier line's result" not in said, said
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a2", "a3", "b1", "b2"], _rows(out)
    assert len({r["result"]["run_id"] for r in _rows(out)}) == 1 and len(model.calls) == calls


def test_repeat_rows_keyed_before_keys_were_per_manifest_are_rewritten_once(monkeypatch, tmp_path):
    """A repeat row keyed by its place alone (an output written before) is the manifest's: it goes and comes back
    under the manifest's key, not left beside a new one (its id twice in the output)."""
    import hashlib
    import json

    from graph.batch import repeat_key

    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, manifest = tmp_path / "out.jsonl", tmp_path / "a.jsonl"
    _write(manifest, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")])
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    assert runner.invoke(app, args).exit_code == 0
    rows = _rows(out)
    source = rows[0]["key"]
    old = [r if "repeat_of" not in r else {**r, "key": hashlib.sha256(json.dumps(
        ["repeat", source, int(r["manifest"]["id"][1:]) - 1]).encode()).hexdigest()[:32]} for r in rows]
    out.write_text("".join(json.dumps(r) + "\n" for r in old))
    calls = len(model.calls)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 to take an earlier line's result" in res.output, res.output
    keys = {r["manifest"]["id"]: r["key"] for r in _rows(out)}
    assert len(_rows(out)) == 3 and keys["a3"] == repeat_key(str(manifest.resolve()), source, 2), _rows(out)
    assert len(model.calls) == calls


def test_a_renamed_manifest_leaves_no_second_copy_of_its_repeat_rows(monkeypatch, tmp_path):
    """Keyed per manifest, a manifest renamed (or moved) would find its repeat rows under its old name's keys: not its
    own, they stayed beside the new ones, each id twice in the output. A repeat row holding one of this manifest's
    repeat lines as it is (line, clip, fields) is the row this run writes for it: it goes."""
    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, manifest = tmp_path / "out.jsonl", tmp_path / "a.jsonl"
    _write(manifest, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")])
    assert runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]).exit_code == 0
    calls = len(model.calls)
    renamed = manifest.rename(tmp_path / "clips.jsonl")
    res = runner.invoke(app, ["score-batch", str(renamed), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "a3"], _rows(out)
    assert {r.get("manifest_file") for r in _rows(out) if "repeat_of" in r} == {str(renamed.resolve())}, _rows(out)
    assert len(model.calls) == calls


def test_a_renamed_manifests_repeat_rows_that_record_no_manifest_go_as_before(monkeypatch, tmp_path):
    """Repeat rows written before they recorded their manifest ("manifest_file"): a row holding one of the renamed
    manifest's repeat lines as it is goes, as it did, and comes back recording it."""
    import json

    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, manifest = tmp_path / "out.jsonl", tmp_path / "a.jsonl"
    _write(manifest, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")])
    _run(manifest, out)
    out.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "manifest_file"}) + "\n"
                           for r in _rows(out)))
    calls = len(model.calls)
    renamed = manifest.rename(tmp_path / "clips.jsonl")
    said = _run(renamed, out)
    assert "2 to take an earlier line's result" in said and "warning" not in said, said
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "a3"], _rows(out)
    assert {r.get("manifest_file") for r in _rows(out) if "repeat_of" in r} == {str(renamed.resolve())}, _rows(out)
    assert len(model.calls) == calls


def first_row_deleted(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(out, a, b): manifests a (ids a1, a2) and b (b1, b2) listing one clip, run in turn into one output, whose
    clip's first-line row is then deleted (the repeat copies stay)."""
    import json

    square_clips(tmp_path, 1)
    out, a, b = tmp_path / "out.jsonl", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2")])
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("b1", "b2")])
    _run(a, out)
    _run(b, out)
    out.write_text("".join(json.dumps(r) + "\n" for r in _rows(out) if "repeat_of" in r))  # the first line's row
    return out, a, b


def _run(manifest, out) -> str:  # noqa: ANN001
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 0, res.output
    return res.output


def test_one_manifest_named_relative_absolute_or_by_a_link_keeps_its_repeat_rows(monkeypatch, tmp_path):
    """The key holds the manifest's resolved path: named another way (relative, or by a symlink elsewhere), its repeat
    rows are its own, not rewritten."""
    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, manifest = tmp_path / "out.jsonl", tmp_path / "a.jsonl"
    _write(manifest, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")])
    _run(manifest, out)
    calls, before = len(model.calls), out.read_text()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "link.jsonl").symlink_to(manifest)
    for name in ("a.jsonl", tmp_path / "sub" / "link.jsonl"):
        said = _run(name, out)
        assert "to take an earlier line's result" not in said and "warning" not in said, said
    assert out.read_text() == before and len(model.calls) == calls


def test_an_output_two_manifests_wrote_with_keys_of_the_place_alone_resumes_without_a_run(monkeypatch, tmp_path):
    """As the place-keyed version left it after manifest a then b (b's first repeat over a's, a's second beside it):
    each manifest's next run rewrites the rows it needs without scoring, and then neither touches the other's."""
    import hashlib
    import json

    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, a, b = tmp_path / "out.jsonl", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")])
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("b1", "b2")])
    _run(a, out)
    rows = _rows(out)
    source = rows[0]["key"]

    def old(n: int) -> str:
        return hashlib.sha256(json.dumps(["repeat", source, n]).encode()).hexdigest()[:32]

    rows = [rows[0], {**rows[1], "key": old(1), "manifest": {"id": "b2"}}, {**rows[2], "key": old(2)}]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls = len(model.calls)
    _run(a, out)
    _run(b, out)
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a2", "a3", "b1", "b2"], _rows(out)
    for manifest in (a, b):
        said = _run(manifest, out)
        assert "to take an earlier line's result" not in said, said
    assert len(model.calls) == calls and len({r["result"]["run_id"] for r in _rows(out)}) == 1


def test_a_manifest_and_its_copy_sharing_an_output_leave_each_others_repeat_rows(monkeypatch, tmp_path):
    """clips.jsonl and clips_v2.jsonl (its copy, extended by a line) in one folder, one --out, the same repeat lines:
    each run removed the other's rows of those lines as a renamed manifest's (same line, clip and fields) and wrote
    its own, so every run printed "2 to take an earlier line's result" and rewrote the file. A repeat row records its
    manifest ("manifest_file"); one whose manifest still exists is that manifest's and stays."""
    import json

    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 2)
    out, a, b = tmp_path / "out.jsonl", tmp_path / "clips.jsonl", tmp_path / "clips_v2.jsonl"
    lines = [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")]
    _write(a, lines)
    _write(b, [*lines, {"path": "c1.mp4", "instruction": TASK, "id": "a4"}])
    for manifest in (a, b):
        _run(manifest, out)
    calls, before = len(model.calls), out.read_text()
    for manifest in (a, b, a, b):
        said = _run(manifest, out)
        assert "to take an earlier line's result" not in said and "warning" not in said, said
        assert out.read_text() == before, manifest
    assert len(model.calls) == calls
    rows = [json.loads(line) for line in before.splitlines()]
    assert sorted(r["manifest_file"] for r in rows if "repeat_of" in r) == sorted([str(a.resolve())] * 2
                                                                                 + [str(b.resolve())] * 2)
    assert all("manifest_file" not in r for r in rows if "repeat_of" not in r), rows


def test_a_repeat_line_dropped_with_its_row_leaves_no_second_row_of_the_next(monkeypatch, tmp_path):
    """Lines a, b, c, d of one clip; a researcher drops c from the experiment: its line from the manifest and its row
    from the output. d moves into c's place (its row is written again under that place's key), and d's old row,
    keyed by a place past the repeat rows left in the output, was not taken for this manifest's: it stayed, id d
    twice. A repeat row records its manifest ("manifest_file"): one of this manifest whose line is gone goes."""
    import json

    from tests.test_batch_manifest_lines import _repeats_manifest

    model = _scripted(monkeypatch, tmp_path)
    manifest, out, args = _repeats_manifest(tmp_path, ["a", "b", "c", "d"])
    assert runner.invoke(app, args).exit_code == 0
    calls = len(model.calls)
    _write(manifest, [json.loads(line) for line in manifest.read_text().splitlines() if '"id": "c"' not in line])
    out.write_text("".join(json.dumps(r) + "\n" for r in _rows(out) if r["manifest"]["id"] != "c"))
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a", "b", "d", "z"], _rows(out)
    assert {r["manifest"]["id"]: r["line"] for r in _rows(out)}["d"] == 3 and len(model.calls) == calls


def test_a_first_line_scored_again_by_one_manifest_rewrites_the_other_manifests_copies(monkeypatch, tmp_path):
    """Manifests a and b share an output and the row of their first line (one clip and instruction: one key). That row
    deleted to score the clip again, a's run scored it and wrote a's repeat rows again from it, but removed b's (no
    longer copies of the row): b's ids were missing from the output until b ran again. They are written again too."""
    import json

    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, a, b = tmp_path / "out.jsonl", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2")])
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("b1", "b2", "b3")])
    _run(a, out)
    _run(b, out)
    old = _rows(out)[0]["result"]["run_id"]
    out.write_text("".join(json.dumps(r) + "\n" for r in _rows(out) if "repeat_of" in r))  # the first line's row
    said = _run(a, out)
    assert "2 row(s) of other manifests sharing" in said, said
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2", "b2", "b3"], rows
    assert len({json.dumps(r["result"], sort_keys=True) for r in rows}) == 1 and rows[0]["result"]["run_id"] != old
    assert {r["manifest_file"] for r in rows if r["manifest"]["id"] in ("b2", "b3")} == {str(b.resolve())}, rows
    calls = len(model.calls)
    said = _run(b, out)  # b's rows are there: nothing to write
    assert "to take an earlier line's result" not in said and sorted(r["manifest"]["id"] for r in _rows(out)) == \
        ["a2", "b1", "b2", "b3"], said
    assert len(model.calls) == calls


def test_a_repeat_line_dropped_with_its_row_from_an_output_keyed_by_place_leaves_no_second_row(monkeypatch, tmp_path):
    """As the last test, in an output written before repeat rows recorded their manifest, keyed by their place alone:
    such a row was taken as this manifest's only up to the place of the last repeat row left in the output, so d's
    old row (place 3, two repeat rows left, line 4) stayed beside its new one for a run, id d twice. A row recording no
    manifest is this manifest's by the clip and fields of one of its repeat lines too, whatever its line."""
    import hashlib
    import json

    from tests.test_batch_manifest_lines import _repeats_manifest

    model = _scripted(monkeypatch, tmp_path)
    manifest, out, args = _repeats_manifest(tmp_path, ["a", "b", "c", "d"])
    assert runner.invoke(app, args).exit_code == 0
    calls, source = len(model.calls), _rows(out)[0]["key"]
    placed = [r if "repeat_of" not in r else {**{k: v for k, v in r.items() if k != "manifest_file"}, "key": hashlib
              .sha256(json.dumps(["repeat", source, r["line"] - 1]).encode()).hexdigest()[:32]} for r in _rows(out)]
    _write(manifest, [json.loads(line) for line in manifest.read_text().splitlines() if '"id": "c"' not in line])
    out.write_text("".join(json.dumps(r) + "\n" for r in placed if r["manifest"]["id"] != "c"))
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a", "b", "d", "z"], _rows(out)
    assert {r["manifest"]["id"]: r["line"] for r in _rows(out)}["d"] == 3 and len(model.calls) == calls


def test_a_manifest_moved_with_a_link_left_at_its_old_name_keeps_one_row_per_line(monkeypatch, tmp_path):
    """A manifest moved into a folder (its clips' paths absolute), a symlink left at its old name: the old name, which
    its repeat rows record ("manifest_file"), still exists, so they were taken for another manifest's (a copy sharing
    the output) and stayed beside the rows this run wrote under its new name, each id twice at every run. A recorded
    name that is this manifest's file now (resolved) is this manifest."""
    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, manifest = tmp_path / "out.jsonl", tmp_path / "a.jsonl"
    _write(manifest, [{"path": str(tmp_path / "c0.mp4"), "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")])
    _run(manifest, out)
    calls = len(model.calls)
    (tmp_path / "sub").mkdir()
    moved = manifest.rename(tmp_path / "sub" / "a.jsonl")
    manifest.symlink_to(moved)
    for name in (manifest, moved):
        said = _run(name, out)
        assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "a3"], (said, _rows(out))
    assert {r.get("manifest_file") for r in _rows(out) if "repeat_of" in r} == {str(moved.resolve())}, _rows(out)
    assert len(model.calls) == calls


def test_other_manifests_copies_are_said_written_again_only_once_the_checks_passed(monkeypatch, tmp_path):
    """"N row(s) of other manifests ... written again" was said before the endpoint check and the tools' load: a batch
    stopped there (an endpoint down, a Ctrl-C) said it wrote them, then that the output was as it was."""

    from graph import commands

    _scripted(monkeypatch, tmp_path)
    out, a, b = first_row_deleted(tmp_path)
    before = out.read_text()

    def interrupted(*args):  # noqa: ANN002, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "loaded_tools", interrupted)
    res = runner.invoke(app, ["score-batch", str(a), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 130 and out.read_text() == before, res.output
    assert "of other manifests" not in res.output, res.output
    monkeypatch.undo()
    _scripted(monkeypatch, tmp_path)
    assert "1 row(s) of other manifests sharing" in _run(a, out)


def test_two_outputs_concatenated_get_no_second_row_of_another_manifests_copy(monkeypatch, tmp_path):
    """Two outputs of manifests a and b concatenated (`same_run`): the first one's rows of the clip are of another run
    than the rows that stay (the last of its key). b's first copies went and were written again from the row that
    stays, beside b's second copies under the same keys, which stayed: each b id twice, for good. A copy whose key has
    a row that stays is not written again."""
    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, a, b = tmp_path / "out.jsonl", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("a1", "a2")])
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("b1", "b2")])
    halves = []
    for n in range(2):
        half = tmp_path / f"half{n}.jsonl"
        _run(a, half)
        _run(b, half)
        halves.append(half.read_text())
        (tmp_path / "cache.sqlite").unlink(missing_ok=True)
    out.write_text("".join(halves))
    calls = len(model.calls)
    _run(a, out)
    ids = sorted(r["manifest"]["id"] for r in _rows(out))
    # the first line's row twice (each half's: not a repeat row, it stays, as it did), b2's copy once
    assert ids == ["a1", "a1", "a2", "b2"] and len(model.calls) == calls, _rows(out)
    assert "of other manifests" not in _run(b, out)


def test_a_manifest_named_by_a_hard_link_keeps_one_row_per_line(monkeypatch, tmp_path):
    """A manifest given by a second name of its own file (a hard link: `ln`, `cp -al` of an experiment's folder):
    its repeat rows recording the first name were taken for another manifest's (that name exists, and resolves to
    another path) and stayed beside the rows written under the second, each id twice. A recorded name that is this
    manifest's file, however named, is this manifest."""
    import os

    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    out, manifest = tmp_path / "out.jsonl", tmp_path / "a.jsonl"
    _write(manifest, [{"path": str(tmp_path / "c0.mp4"), "instruction": TASK, "id": i} for i in ("a1", "a2", "a3")])
    _run(manifest, out)
    calls = len(model.calls)
    (tmp_path / "sub").mkdir()
    second = tmp_path / "sub" / "a.jsonl"
    os.link(manifest, second)
    for name in (second, second):
        said = _run(name, out)
        assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "a3"], (said, _rows(out))
    assert {r.get("manifest_file") for r in _rows(out) if "repeat_of" in r} == {str(second.resolve())}, _rows(out)
    assert len(model.calls) == calls
