"""The readers of a score-batch output and the rows of lines that repeat an earlier line's clip and instruction under
another id (`graph.batch.write_repeats`, "repeat_of"): such a row is the earlier line's result again, not another
run, yet `raa eval draws` refused the file ("draw 0 of ... appears twice") and `raa eval compare --pair-by path`
(the pairing its own hint suggests across presets) refused it as a duplicate path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.compare import CompareError, compare
from evals.draws import DrawsError, read_draws, summarize_draws
from graph.batch import drop_repeats, read_manifest, result_line, write_repeats
from graph.batch_output import RowWriter
from graph.schemas import RewardResult
from tests.test_eval_compare import twin

TASK = "stack the blocks"


def _output(tmp: Path, name: str, preset: str, rewards: dict[str, float], draws: int = 1) -> Path:
    """score-batch's output of a manifest whose clip a.mp4 is named twice, under ids "a1" and "a2" (the second line
    takes the first's result), as the real writer makes it, for draws 0 .. `draws` - 1."""
    manifest = tmp / "m.jsonl"
    lines = [{"path": "a.mp4", "instruction": TASK, "id": "a1"}, {"path": "b.mp4", "instruction": TASK, "id": "b"},
             {"path": "a.mp4", "instruction": TASK, "id": "a2"}]
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp / f"{name}.jsonl"
    writer = RowWriter(out)
    for draw in range(draws):
        items, _, shared = drop_repeats(read_manifest(manifest, preset, draw))
        assert shared == ["line 3 = line 1"]
        for item in write_repeats(items, {}, writer):
            reward = rewards[Path(item["path"]).stem] + draw / 10
            writer.write(result_line(item, RewardResult(reward=reward, status="scored", preset=preset)), "scored")
    assert len(out.read_text().splitlines()) == 3 * draws
    return out


def test_eval_draws_reads_a_repeat_row_as_its_lines_draw_not_a_second_one(tmp_path):
    out = _output(tmp_path, "o", "full", {"a": 0.2, "b": 0.6}, draws=2)
    clips, _, _ = read_draws(out)
    assert sorted((Path(c.path).name, c.draws) for c in clips) == [("a.mp4", 2), ("b.mp4", 2)]
    s = summarize_draws(out)
    assert (s.clips, s.n) == (2, 2)
    # a: 0.2, 0.3 -> var 0.0025; b: 0.6, 0.7 -> var 0.0025; W = 0.0025
    assert s.within_std == pytest.approx(0.05)


def test_eval_compare_by_path_pairs_a_repeated_clip_once(tmp_path):
    a = _output(tmp_path, "a", "full", {"a": 0.2, "b": 0.6})
    b = _output(tmp_path, "b", "decomposed", {"a": 0.5, "b": 0.4})
    c = compare(a, b, pair_by="path")
    assert (c.pairs, c.n, c.a.rows, c.b.rows) == (2, 2, 2, 2)
    assert c.mean_diff == pytest.approx(((0.2 - 0.5) + (0.6 - 0.4)) / 2)
    by_id = compare(a, twin(a), pair_by="id")  # each id of the manifest stays a pair of its own
    assert (by_id.pairs, by_id.a.rows) == (3, 3)


def test_two_rows_of_one_path_that_are_not_repeats_are_still_refused(tmp_path):
    out = _output(tmp_path, "o", "full", {"a": 0.2, "b": 0.6})
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    [repeat] = [r for r in rows if "repeat_of" in r]
    del repeat["repeat_of"]  # another run of the clip (two outputs concatenated), not a repeat of line 1
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(CompareError, match="appears twice"):
        compare(out, out, pair_by="path")


def test_a_clip_named_through_a_symlink_is_one_clip_whatever_name_its_rows_give(tmp_path):
    """score-batch rows name a clip as the manifest gave it (a Hugging Face cache's `snapshots/` link), rows written
    before by its resolved target (`blobs/<sha>`): draws of one clip written before and after, or two outputs of
    either age, are one clip, as score-batch's own key (of the resolved path) makes them."""
    (tmp_path / "blobs").mkdir()
    (tmp_path / "snapshots").mkdir()
    for name in ("a", "b"):
        (tmp_path / "blobs" / f"{name}.bin").write_bytes(name.encode())
        (tmp_path / "snapshots" / f"{name}.mp4").symlink_to(tmp_path / "blobs" / f"{name}.bin")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"snapshots/{n}.mp4", "instruction": TASK, "id": n}) + "\n"
                                for n in ("a", "b")))

    def rows(draw: int, rewards: dict[str, float], old: bool) -> list[str]:
        lines = []
        for item in read_manifest(manifest, "full", draw):
            row = json.loads(result_line(item, RewardResult(reward=rewards[item["manifest"]["id"]], status="scored",
                                                            preset="full")))
            lines.append(json.dumps({**row, "path": item["resolved"]} if old else row))  # old: the link's target
        return lines

    draws = tmp_path / "draws.jsonl"
    draws.write_text("\n".join(rows(0, {"a": 0.2, "b": 0.6}, old=True) + rows(1, {"a": 0.4, "b": 0.6}, old=False)) + "\n")
    s = summarize_draws(draws)
    assert (s.clips, s.n) == (2, 2)
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text("\n".join(rows(0, {"a": 0.2, "b": 0.6}, old=True)) + "\n")
    new.write_text("\n".join(rows(0, {"a": 0.4, "b": 0.5}, old=False)) + "\n")
    c = compare(new, old, pair_by="path")
    assert (c.pairs, c.n) == (2, 2) and c.mean_diff == pytest.approx(((0.4 - 0.2) + (0.5 - 0.6)) / 2)


def test_a_repeat_row_whose_result_differs_from_its_lines_is_a_contradiction(tmp_path):
    """A repeat row holds a copy of its line's row (`RowWriter.write_repeat`): one whose result differs comes from
    another run (outputs of two scorers concatenated, the repeat row of one and the line's row of the other), and
    was silently taken as the line's row again, its reward dropped (draws) or kept in place of the line's (compare)."""
    out = _output(tmp_path, "o", "full", {"a": 0.2, "b": 0.6})
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    [repeat] = [r for r in rows if "repeat_of" in r]
    repeat["result"]["reward"] = 0.9  # another scorer's result for the clip
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DrawsError, match="appears twice"):
        read_draws(out)
    with pytest.raises(CompareError, match="appears twice"):
        compare(out, out, pair_by="path")


def _blob_links(tmp: Path, names: tuple[str, ...]) -> None:
    """snapshots/<name>.mp4 for each of `names`, all links to one blob (two clips of the same bytes, as a Hugging Face
    cache stores them), and snapshots/c.mp4 to a blob of its own."""
    (tmp / "blobs").mkdir()
    (tmp / "snapshots").mkdir()
    (tmp / "blobs" / "same").write_bytes(b"same")
    (tmp / "blobs" / "other").write_bytes(b"other")
    for name in names:
        (tmp / "snapshots" / f"{name}.mp4").symlink_to(Path("..") / "blobs" / "same")
    (tmp / "snapshots" / "c.mp4").symlink_to(tmp / "blobs" / "other")


def _rows_of(tmp: Path, name: str, lines: list[tuple[str, str]], rewards: dict[str, float], old: bool = False) -> Path:
    """An output of a manifest of (clip name, instruction) `lines` (rewards by clip name; each line's "id" its clip
    name); `old`: rows name the link's target, as rows did before they named clips as the manifest gave them."""
    manifest = tmp / f"{name}.manifest.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"snapshots/{n}.mp4", "instruction": task, "id": n}) + "\n"
                                for n, task in lines))
    out = tmp / f"{name}.jsonl"
    writer = RowWriter(out)
    items, _, _ = drop_repeats(read_manifest(manifest, "full"))
    for item in write_repeats(items, {}, writer):
        row = RewardResult(reward=rewards[Path(item["path"]).stem], status="scored", preset="full")
        writer.write(result_line({**item, "path": item["resolved"]} if old else item, row), "scored")
    return out


def test_two_clips_of_one_blob_are_two_clips_by_path(tmp_path):
    """Two clips of one Hugging Face cache blob (identical bytes, two names) with their own instructions were one path
    for `raa eval compare --pair-by path` (the blob's), which refused the output: "appears twice"."""
    _blob_links(tmp_path, ("a", "b"))
    lines = [("a", "push"), ("b", "pull"), ("c", "push")]
    a = _rows_of(tmp_path, "a", lines, {"a": 0.1, "b": 0.5, "c": 0.9})
    b = _rows_of(tmp_path, "b", lines, {"a": 0.2, "b": 0.7, "c": 0.9})
    c = compare(a, b, pair_by="path")
    assert (c.pairs, c.n, c.pairs_instruction_differs) == (3, 3, 0)
    assert c.mean_diff == pytest.approx(((0.1 - 0.2) + (0.5 - 0.7) + 0.0) / 3)
    one = _rows_of(tmp_path, "one", [("b", "pull"), ("c", "push")], {"b": 0.6, "c": 0.8})  # one of the two: its pair
    c = compare(a, one, pair_by="path")
    assert (c.pairs, c.unpaired_a, c.pairs_instruction_differs) == (2, 1, 0)
    old = _rows_of(tmp_path, "old", [("c", "push")], {"c": 0.8}, old=True)  # a row naming the target still pairs
    assert compare(a, old, pair_by="path").pairs == 1


def test_readers_resolve_each_folder_once_not_each_rows_path(tmp_path, monkeypatch):
    """`clip_identity` resolved every row's path in full (`os.path.realpath` stats each folder on the way, slow on a
    network disk); a reader now resolves each folder once and each clip's own link."""
    import posixpath

    from graph.batch import clip_identity

    _blob_links(tmp_path, tuple(f"n{i}" for i in range(40)))
    lines = [(f"n{i}", f"task {i}") for i in range(40)] + [("c", "push")]
    out = _rows_of(tmp_path, "o", lines, {**{f"n{i}": 0.5 for i in range(40)}, "c": 0.9})
    calls = []
    real = posixpath.realpath
    monkeypatch.setattr(posixpath, "realpath", lambda p, *a, **k: calls.append(p) or real(p, *a, **k))
    c = compare(out, twin(out), pair_by="path")
    assert c.pairs == 41 and len(calls) <= 10, len(calls)
    monkeypatch.setattr(posixpath, "realpath", real)
    from graph.batch_manifest import path_identities

    identity = path_identities()
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "chain.mp4").symlink_to("snapshots/c.mp4")
    for path in (tmp_path / "snapshots" / "n3.mp4", tmp_path / "chain.mp4", tmp_path / "missing.mp4",
                 tmp_path / "snapshots" / ".." / "chain.mp4", tmp_path / "loop", "rel/x.mp4", "", "/",
                 tmp_path / "blobs" / "same", "a\0b"):
        assert identity(path) == identity(path) == clip_identity(path), path


def test_two_links_to_one_blob_with_one_instruction_stay_one_run(tmp_path):
    """Two links to one blob with one instruction are one score-batch item (the second line's row "repeat_of" the
    first's): still one pair, not two of one run."""
    _blob_links(tmp_path, ("a", "b"))
    lines = [("a", "push"), ("b", "push"), ("c", "push")]
    a = _rows_of(tmp_path, "a", lines, {"a": 0.1, "c": 0.9})
    b = _rows_of(tmp_path, "b", lines, {"a": 0.3, "c": 0.9})
    assert sum("repeat_of" in json.loads(line) for line in a.read_text().splitlines()) == 1
    c = compare(a, b, pair_by="path")
    assert (c.pairs, c.n) == (2, 2) and c.mean_diff == pytest.approx(-0.1)
