"""`raa score-batch` output files across runs: torn rows, `--retry-ineligible` next to other draws, and manifest
lines that are bad (not UTF-8, a path no file can have) or that contain JSON-legal line separators."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graph.cli import app
from tests.graph_scripts import square_batch, square_clips
from tests.test_cli_agent import _scripted
from tools.jsonl import json_lines, mend_tail, text_lines

runner = CliRunner()
TASK = "push the red block to the right"


def _batch(monkeypatch, tmp_path, n: int) -> tuple:
    """(out, score-batch args) over a manifest of `n` clips of TASK, scored by the scripted model."""
    _scripted(monkeypatch, tmp_path)
    manifest = square_batch(tmp_path, n, TASK, name="m.jsonl")
    out = tmp_path / "out.jsonl"
    return out, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]


def _rows(out) -> list[dict]:
    return [row for _, row in json_lines(out, ValueError)]  # strict: every line must be JSON


def test_mend_tail_cuts_a_torn_row_and_closes_a_whole_one(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"a": 1}\n{"b": 2}\n{"c": ')
    mend_tail(f)
    assert f.read_text() == '{"a": 1}\n{"b": 2}\n'
    f.write_text('{"a": 1}\n{"b": 2}')  # whole, only its newline missing: kept
    mend_tail(f)
    assert f.read_text() == '{"a": 1}\n{"b": 2}\n'
    f.write_text('{"c": ' + "x" * 70000)  # no newline at all, longer than one read block
    mend_tail(f)
    assert f.read_text() == ""
    assert text_lines('{"t": "a\u2028b"}\r\n{"u": 1}\n') == ['{"t": "a\u2028b"}', '{"u": 1}']


def test_a_torn_last_row_is_scored_again_and_the_file_stays_readable(monkeypatch, tmp_path):
    out, args = _batch(monkeypatch, tmp_path, 3)
    assert runner.invoke(app, args).exit_code == 0
    text = out.read_text()
    out.write_text(text[: len(text) - len(text_lines(text)[-1]) // 2 - 1])  # the last row cut in half
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 already in" in res.output and "1 to score" in res.output, res.output
    rows = _rows(out)
    assert len(rows) == 3 and {r["line"] for r in rows} == {1, 2, 3}


def test_retry_ineligible_leaves_other_draws_alone(monkeypatch, tmp_path):
    out, args = _batch(monkeypatch, tmp_path, 2)
    for draw in ("0", "1"):
        assert runner.invoke(app, [*args, "--draw", draw]).exit_code == 0
    rows = _rows(out)
    dead = {"status": "ineligible", "reward": None, "reasons": ["observe: transport: APIConnectionError"]}
    out.write_text("".join(json.dumps({**r, "result": {**r["result"], **dead}} if r["draw"] == 1 else r) + "\n"
                           for r in rows))
    res = runner.invoke(app, [*args, "--draw", "0", "--retry-ineligible"])
    assert res.exit_code == 0 and "0 ineligible row(s) removed" in res.output, res.output
    assert sum(r["draw"] == 1 for r in _rows(out)) == 2  # draw 1's rows wait for a draw 1 retry
    res = runner.invoke(app, [*args, "--draw", "1", "--retry-ineligible"])
    assert "2 ineligible row(s) removed" in res.output and "2 to score" in res.output, res.output
    assert [r["result"]["status"] for r in _rows(out)] == ["scored"] * 4


def test_bad_manifest_lines_get_their_own_rows_and_a_fixed_line_replaces_its_row(monkeypatch, tmp_path):
    """A NUL byte in a path, a file name too long for the system and a line that is not UTF-8 crashed the whole
    batch (exit 1, no rows); a U+2028 inside a string split a valid line in two. A bad line's row used to stay
    after the line was fixed (keyed by its number only)."""
    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 2)
    manifest = tmp_path / "m.jsonl"
    good = json.dumps({"path": "c0.mp4", "instruction": "push the red\u2028block to the right"}, ensure_ascii=False)
    lines = [good.encode(), json.dumps({"path": "c1\u0000.mp4", "instruction": TASK}).encode(),
             json.dumps({"path": "x" * 300 + ".mp4", "instruction": TASK}).encode(),
             b'{"path": "caf\xe9.mp4", "instruction": "push"}', json.dumps({"video": "c1.mp4", "instruction": TASK}).encode()]
    manifest.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    res = runner.invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0 and "2 items" in res.output and "3 bad manifest line(s)" in res.output, res.output
    rows = {r["line"]: r["result"] for r in _rows(out)}
    assert sorted(rows) == [1, 2, 3, 4, 5] and rows[1]["status"] == "scored"
    assert "embedded null byte" in rows[2]["reasons"][0]
    assert rows[3]["status"] == "ineligible" and "video" in rows[3]["reasons"][0]  # a video fault: not retried
    assert "not UTF-8 text (byte 0xe9 at column 14" in rows[4]["reasons"][0]
    assert "rename 'video' to 'path'" in rows[5]["reasons"][0]
    lines[4] = json.dumps({"path": "c1.mp4", "instruction": TASK}).encode()  # the user follows the hint
    manifest.write_bytes(b"\n".join(lines) + b"\n")
    calls = len(model.calls)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "1 to score, 2 bad manifest line(s)" in res.output, res.output
    again = _rows(out)
    assert sorted(r["line"] for r in again) == [1, 2, 3, 4, 5]  # one row per line: line 5's old row went
    assert {r["line"]: r["result"]["status"] for r in again}[5] == "scored" and len(model.calls) > calls


def test_a_second_batch_into_the_same_output_is_refused(monkeypatch, tmp_path):
    """Nothing stopped two batches writing one output: both scored every item and wrote each row twice."""
    from graph.batch import lock_output

    out, args = _batch(monkeypatch, tmp_path, 1)
    held = lock_output(out)  # what a running batch holds
    try:
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "another score-batch is writing" in res.output and not out.exists()
    finally:
        held.close()
    assert runner.invoke(app, args).exit_code == 0 and runner.invoke(app, args).exit_code == 0  # released each time
    assert len(_rows(out)) == 1


def test_a_bad_line_blanked_or_deleted_since_loses_its_row(monkeypatch, tmp_path):
    """A bad line's row went only when its line number still held an item: blanking the line, or deleting the
    manifest's last line, left its ineligible row for good (an output of 2 clips kept 3 rows). Bad-line rows
    of another manifest or draw sharing the output stay."""
    out, args = _batch(monkeypatch, tmp_path, 2)
    manifest = tmp_path / "m.jsonl"
    good = manifest.read_text()
    other = tmp_path / "other.jsonl"
    other.write_text("{broken\n")
    manifest.write_text(good + "{broken\n" + "not json either\n")
    assert runner.invoke(app, args).exit_code == 0
    assert runner.invoke(app, [*args, "--draw", "1"]).exit_code == 0
    assert runner.invoke(app, ["score-batch", str(other), *args[2:]]).exit_code == 0
    assert len(_rows(out)) == 4 + 4 + 1
    manifest.write_text(good + "\n")  # line 3 blanked, line 4 deleted
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 already in" in res.output and "bad manifest" not in res.output, res.output
    rows = _rows(out)
    mine = [r for r in rows if r["draw"] == 0 and r["path"] != "<line 1>"]
    assert sorted(r["line"] for r in mine) == [1, 2] and all(r["result"]["status"] == "scored" for r in mine)
    assert sorted(r["line"] for r in rows if r["draw"] == 1) == [1, 2, 3, 4]  # draw 1 waits for a draw 1 run
    assert [r["path"] for r in rows if r["line"] == 1 and r["draw"] == 0].count("<line 1>") == 1  # other.jsonl


def _hand_rows(tmp_path, results: dict[int, dict], preset: str = "full") -> tuple:
    """(out, args): m.jsonl of clip c0 and a bad line 2, with `results` by line already in out.jsonl."""
    from graph.batch import read_manifest

    square_clips(tmp_path, 1)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "c0.mp4", "instruction": TASK}) + "\n{broken\n")
    out = tmp_path / "out.jsonl"
    items = {it["line"]: it for it in read_manifest(manifest, preset)}
    out.write_text("".join(json.dumps({**{k: items[n][k] for k in ("key", "line", "path", "instruction", "preset",
                                                                    "draw", "manifest")}, "result": r}) + "\n"
                           for n, r in results.items()))
    return out, ["score-batch", str(manifest), "--out", str(out), "--preset", preset]


BAD_LINE = {"status": "ineligible", "reward": None, "reasons": ["input: manifest line 2: Expecting value"]}


def test_a_tool_that_cannot_load_leaves_the_output_as_it_was(monkeypatch, tmp_path):
    """The bad-line rows (and with --retry-ineligible the retryable rows) were removed before the tools
    loaded: a tool that failed to load exited 2 with those rows gone and never written again."""
    from tests.test_cli_agent import _scripted

    model = _scripted(monkeypatch, tmp_path)
    dead = {"status": "ineligible", "reward": None, "reasons": ["observe: transport: APIConnectionError"]}
    out, args = _hand_rows(tmp_path, {1: dead, 2: BAD_LINE})
    before = out.read_text()
    monkeypatch.setenv("RAA_VJEPA_MODEL", str(tmp_path / "no-such-vjepa"))
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 2 and "no-such-vjepa" in res.output, res.output
    assert out.read_text() == before and model.calls == []


def test_nothing_to_score_loads_no_tool_and_the_bar_counts_clips(monkeypatch, tmp_path):
    """Bad lines counted as work: a finished batch with a bad line (or a manifest of bad lines only) still
    loaded V-JEPA 2 and CoTracker3, and exited 2 where they cannot load; the bar counted the bad lines while
    the message said "0 to score"."""
    from tests.test_cli_agent import _scripted

    model = _scripted(monkeypatch, tmp_path)
    scored = {"status": "scored", "reward": 0.5, "T": 0.5, "P": 0.5, "V": 0.5}
    out, args = _hand_rows(tmp_path, {1: scored, 2: BAD_LINE})
    monkeypatch.setenv("RAA_VJEPA_MODEL", str(tmp_path / "no-such-vjepa"))
    monkeypatch.setenv("RAA_ENDPOINT_WAIT_S", "0.5")  # the endpoint does not answer: nothing needs it either
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score, 1 bad manifest line(s)" in res.output, res.output
    assert "0/0" in res.output and "1/1" not in res.output, res.output
    assert sorted(r["line"] for r in _rows(out)) == [1, 2] and model.calls == []


def test_an_output_that_is_a_folder_is_a_clear_error(monkeypatch, tmp_path):
    """`--out results/` (a folder) ended in an IsADirectoryError traceback, exit 1, after the lock file was made."""
    out, args = _batch(monkeypatch, tmp_path, 1)
    out.mkdir()
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert f"--out {out} is a folder" in res.output and not list(tmp_path.glob(".out.jsonl.lock"))


def test_a_clip_rendered_while_the_tools_load_keeps_its_row(monkeypatch, tmp_path):
    """With --retry-ineligible, whether a "video file not found" row goes was decided twice: before the tools
    load (the clip missing: the row stays, the item is skipped) and again when the rows are dropped (the clip
    rendered meanwhile: the row went). The clip ended the run with no row, though the batch said it was in."""
    from graph import commands
    from graph.batch import read_manifest
    from tests.graph_scripts import moving_square

    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"path": p, "instruction": TASK}) + "\n" for p in ("c0.mp4", "late.mp4")))
    late = read_manifest(manifest, "decomposed")[1]
    missing = {"status": "ineligible", "reward": None,
               "reasons": [f"quality: video: VideoNotFoundError: {late['path']}: video file not found"]}
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({**{k: late[k] for k in ("key", "line", "path", "instruction", "preset", "draw",
                                                       "manifest")}, "result": missing}) + "\n")
    real = commands.loaded_tools

    def rendered_meanwhile(settings, preset):  # the renderer finishes the clip while the tools load
        moving_square(tmp_path / "late.mp4")
        return real(settings, preset)

    monkeypatch.setattr(commands, "loaded_tools", rendered_meanwhile)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed",
                              "--retry-ineligible"])
    assert res.exit_code == 0 and "1 already in" in res.output, res.output
    assert sorted(r["line"] for r in _rows(out)) == [1, 2]  # every line of the manifest keeps a row


def test_an_output_that_is_the_manifest_is_a_clear_error(monkeypatch, tmp_path):
    """`--out` naming the manifest itself (by any path to it) rewrote the manifest without its bad and blank
    lines and appended the result rows to it, which the next run then read as manifest lines."""
    out, args = _batch(monkeypatch, tmp_path, 1)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(manifest.read_text() + "\n{broken\n")
    before = manifest.read_text()
    (tmp_path / "lists").mkdir()
    for same in (manifest, tmp_path / "lists" / ".." / "m.jsonl"):
        res = runner.invoke(app, [*args[:2], "--out", str(same), *args[4:]])
        assert res.exit_code == 2 and "is the manifest" in res.output, res.output
    assert manifest.read_text() == before and not list(tmp_path.glob(".m.jsonl.lock"))


def test_an_output_that_is_not_a_results_file_is_a_clear_error_and_left_alone(monkeypatch, tmp_path):
    """`--out` naming a video (not UTF-8) ended in a UnicodeDecodeError traceback, and one naming another JSONL
    file lost every line that was not a result row once the batch rewrote it; an output holding only a torn
    row (an interrupted first write) is still resumed."""
    out, args = _batch(monkeypatch, tmp_path, 1)
    video = tmp_path / "c0.mp4"
    notes = tmp_path / "notes.jsonl"
    notes.write_text('["a list, not a row"]\n{"path": "c0.mp4"}\nplain text\n')
    for wrong, says in ((video, "not UTF-8 text"), (notes, "none of its 3 lines is a result row")):
        before = wrong.read_bytes()
        res = runner.invoke(app, [*args[:2], "--out", str(wrong), *args[4:], "--retry-ineligible"])
        assert res.exit_code == 2 and says in res.output and "another file" in res.output, res.output
        assert wrong.read_bytes() == before
    out.write_text('{"key": "k1", "resu')  # torn
    assert runner.invoke(app, args).exit_code == 0
    assert [r["result"]["status"] for r in _rows(out)] == ["scored"]


def test_an_unreadable_manifest_or_unwritable_output_is_a_clear_error(monkeypatch, tmp_path):
    """An --out under a file, and a manifest that cannot be read (permissions: the read raises here), ended in
    tracebacks (exit 1)."""
    out, args = _batch(monkeypatch, tmp_path, 1)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = runner.invoke(app, [*args[:3], str(blocker / "out.jsonl"), *args[4:]])
    assert res.exit_code == 2 and "cannot write --out" in res.output, res.output
    monkeypatch.setattr("graph.batch_manifest.read_file", lambda path: (_ for _ in ()).throw(PermissionError(13, "denied")))
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "cannot read manifest" in res.output and "denied" in res.output, res.output


def test_a_resume_reads_the_output_once(monkeypatch, tmp_path):
    """The output was read whole four times before a resume began (the results-file check, the scorer check, the
    keys done and the rows to drop): a training run's tens of thousands of rows, four times over. The one read
    is taken again only when the file changed before the lock was held."""
    from pathlib import Path

    out, args = _batch(monkeypatch, tmp_path, 2)
    assert runner.invoke(app, args).exit_code == 0
    reads = []
    for name in ("read_bytes", "read_text"):
        real = getattr(Path, name)

        def counted(self, *a, _real=real, **k):
            reads.append(self.name)
            return _real(self, *a, **k)

        monkeypatch.setattr(Path, name, counted)
    import graph.batch_output

    real_read = graph.batch_output.read_file  # the output's read (`tools.file_kinds.read_file`: no FIFO waited on)
    monkeypatch.setattr(graph.batch_output, "read_file", lambda path: reads.append(path.name) or real_read(path))
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "2 already in" in res.output, res.output
    assert reads.count(out.name) == 1, reads


def test_rows_written_before_the_lock_is_held_count_as_done(monkeypatch, tmp_path):
    """The output is read once before the lock; rows another batch writes between that read and the lock are
    seen (the file is read again), so their clips are not scored a second time under the same key."""
    import graph.batch

    out, args = _batch(monkeypatch, tmp_path, 2)
    assert runner.invoke(app, args).exit_code == 0
    full = out.read_text()
    out.write_text(text_lines(full)[0] + "\n")
    real = graph.batch.lock_output

    def other_batch_finishes_first(path):
        path.write_text(full)
        return real(path)

    monkeypatch.setattr(graph.batch, "lock_output", other_batch_finishes_first)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 already in" in res.output, res.output
    assert len(_rows(out)) == 2


def test_a_video_fault_with_process_notes_is_not_retried():
    """An ineligible result's reasons end with the run's process notes ("assess: R1 cited frames [16] the model
    was not shown; dropped"), which `retryable` read as a fault another run could fix: a clip whose frames
    failed to decode mid-run was scored again by every --retry-ineligible, failing the same way."""
    from graph.batch_retry import retryable

    note = "assess: R1 cited frames [16] the model was not shown; dropped"
    video = "inspect: video: VideoDecodeError: c.mp4: frame 40 cannot be decoded"
    assert not retryable({"status": "ineligible", "reasons": [video, note], "notes": [note]})
    assert retryable({"status": "ineligible", "reasons": ["assess: timeout: no reply", note], "notes": [note]})
    assert not retryable({"status": "ineligible", "reasons": [video]})  # a row written before notes existed


def test_a_manifest_that_is_not_json_lines_is_a_clear_error_and_writes_no_rows(monkeypatch, tmp_path):
    """A video given as the manifest (`raa score-batch clip.mp4`, meant `raa score`), a CSV, or a pretty-printed
    JSON array got one ineligible row per "line" (thousands for a video), appended to the results file, where
    rows of another manifest's bad lines stay for good. None of their lines is a JSON object: refused, exit 2."""
    out, args = _batch(monkeypatch, tmp_path, 1)
    assert runner.invoke(app, args).exit_code == 0
    before = out.read_text()
    csv = tmp_path / "m.csv"
    csv.write_text("path,instruction\nc0.mp4,push the block\n")
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps([{"path": "c0.mp4", "instruction": TASK}], indent=2) + "\n")
    for wrong in (tmp_path / "c0.mp4", csv, pretty):
        res = runner.invoke(app, ["score-batch", str(wrong), *args[2:]])
        assert res.exit_code == 2, res.output
        assert f"manifest {wrong} is not JSON lines" in res.output and "line 1:" in res.output, res.output
        assert out.read_text() == before
    one = tmp_path / "one.jsonl"  # a single bad line is still that line's own row
    one.write_text("{broken\n")
    res = runner.invoke(app, ["score-batch", str(one), *args[2:]])
    assert res.exit_code == 0 and len(_rows(out)) == 2, res.output


def test_a_manifest_written_as_one_json_array_is_refused_whatever_its_layout(monkeypatch, tmp_path):
    """A JSON array is no manifest however it is laid out: `json.dumps(rows)` on one line got one ineligible row,
    and an array with an object per line had every line but the last (comma-ended) refused while the last was
    scored, a batch of one clip with rows for "[" and "]". Refused, exit 2, before any row is written."""
    out, args = _batch(monkeypatch, tmp_path, 1)
    assert runner.invoke(app, args).exit_code == 0
    before = out.read_text()
    rows = [{"path": "c0.mp4", "instruction": TASK}, {"path": "c0.mp4", "instruction": TASK + " again"}]
    one_line, per_line = tmp_path / "one.json", tmp_path / "per_line.json"
    one_line.write_text(json.dumps(rows) + "\n")
    per_line.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    for wrong in (one_line, per_line):
        res = runner.invoke(app, ["score-batch", str(wrong), *args[2:]])
        assert res.exit_code == 2, res.output
        assert f"manifest {wrong} is not JSON lines" in res.output and "JSON array" in res.output, res.output
        assert out.read_text() == before


def test_a_symlinked_output_stays_a_link_to_the_file_that_gets_the_rows(monkeypatch, tmp_path):
    """Rows are appended through a symlinked --out (results kept on a scratch disk), but removing rows (the bad
    lines' rows, on every run) renamed a new file over the link itself: the link became a plain file holding the
    rows from then on, and the file it pointed at kept the removed rows, no longer updated."""
    out, args = _batch(monkeypatch, tmp_path, 1)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(manifest.read_text() + "{broken\n")
    (tmp_path / "scratch").mkdir()
    target = tmp_path / "scratch" / "results.jsonl"
    target.write_text("")
    out.symlink_to(target)
    assert runner.invoke(app, args).exit_code == 0
    res = runner.invoke(app, args)  # removes the bad line's row, writes it again
    assert res.exit_code == 0 and "0 to score" in res.output, res.output
    assert out.is_symlink() and out.resolve() == target.resolve()
    assert sorted(r["result"]["status"] for r in _rows(target)) == ["ineligible", "scored"]
