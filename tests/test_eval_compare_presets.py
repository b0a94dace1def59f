"""A score-batch output can hold several presets' rows of one manifest (`raa score-batch M --out A.jsonl --preset
full`, then `--preset direct` into the same file: score-batch's key hashes the preset). `raa eval compare` stopped
at "key 'k1' appears twice", as if the file held a contradiction, with no way to compare one preset of it; `raa
eval draws` names the presets and takes `--preset`. compare does the same now: the error names the presets and
the option, and `--preset NAME` compares that preset's rows of both files (a file without them is an error naming
the presets it holds).

Under score-batch's own key (a manifest without `key`: the key hashes the preset, so no two presets' rows collide) a
two-preset file did not stop at all: each row paired with its own preset's row, and one mean difference, interval
and sign test pooled the presets, unsaid. A file holding several presets is now refused whatever the pairing, as `raa
eval draws` refuses it; a clip in several draws likewise (the draw too is hashed into score-batch's key)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.compare import CompareError, compare
from graph.batch import read_manifest, result_line
from graph.cli import app
from graph.schemas import RewardResult
from tests.test_eval_compare import _scores, twin

runner = CliRunner()


def _two_presets(tmp: Path, name: str = "a", full=(0.9, 0.5), direct=(0.7, 0.4)) -> Path:
    """A score-batch output holding preset full's rows, then preset direct's, of one manifest (keys k1, k2)."""
    rows = [_scores(tmp, f"{name}_{preset}", dict(zip(("k1", "k2"), rewards, strict=True)), preset=preset)
            for preset, rewards in (("full", full), ("direct", direct))]
    both = tmp / f"{name}.jsonl"
    both.write_text("".join(r.read_text() for r in rows))
    return both


def test_a_file_of_two_presets_names_them_instead_of_a_duplicate(tmp_path):
    a, b = _two_presets(tmp_path), _scores(tmp_path, "b", {"k1": 0.5, "k2": 0.5})
    with pytest.raises(CompareError, match=r"a.jsonl holds presets direct, full: .*\(--preset NAME\)"):
        compare(a, b)


def test_one_preset_of_the_file_is_compared(tmp_path):
    a, b = _two_presets(tmp_path), _two_presets(tmp_path, "b", full=(0.5, 0.5), direct=(0.5, 0.5))
    full, direct = compare(a, b, preset="full"), compare(a, b, preset="direct")
    assert (full.n, full.a.rows, full.b.rows, full.preset) == (2, 2, 2, "full")
    assert full.mean_diff == pytest.approx((0.4 + 0.0) / 2) and direct.mean_diff == pytest.approx((0.2 - 0.1) / 2)
    with pytest.raises(CompareError, match=r"no row of preset 'audit_no_gate' \(presets found: direct, full\)"):
        compare(a, b, preset="audit_no_gate")
    one = _scores(tmp_path, "one", {"k1": 0.5, "k2": 0.5})  # preset full only
    with pytest.raises(CompareError, match=r"one/scores.jsonl: no row of preset 'direct' \(presets found: full\)"):
        compare(a, one, preset="direct")
    assert compare(a, one, preset="full").n == 2
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--preset", "full"])
    assert res.exit_code == 0, res.output
    assert "preset full of each file" in res.output and "wins/ties/losses 1/1/0" in res.output


def test_a_preset_and_draw_the_file_holds_apart_is_an_error(tmp_path):
    """--preset and --draw each held by the file, but not together (preset full at draw 0, direct at draw 1): each
    check passed, no row was left, and compare said "no rows in FILE: nothing to compare" (exit 0) of a file of
    rows, as if it were empty."""
    import json

    a = _two_presets(tmp_path)
    a.write_text("".join(json.dumps({**row, "draw": 1} if row["preset"] == "direct" else row) + "\n"
                         for row in map(json.loads, a.read_text().splitlines())))
    with pytest.raises(CompareError, match=r"no row of preset 'full' at draw 1 \(draws of preset full: 0\)"):
        compare(a, a, preset="full", draw=1)
    assert compare(a, twin(a), preset="direct", draw=1).n == 2
    assert compare(a, twin(a), draw=1).n == 2 and compare(a, twin(a), draw=0).a.mean_reward == pytest.approx(0.7)  # one preset each
    a.write_text(a.read_text() + "".join(json.dumps({**row, "preset": "audit_no_gate", "draw": 1}) + "\n"
                                         for row in map(json.loads, a.read_text().splitlines()[:2])))
    with pytest.raises(CompareError, match=r"holds presets audit_no_gate, direct at draw 1: .*--preset NAME"):
        compare(a, a, draw=1)
    res = runner.invoke(app, ["eval", "compare", str(a), str(a), "--preset", "full", "--draw", "1"])
    assert res.exit_code == 2 and "no row of preset 'full' at draw 1" in res.output, res.output


def _own_keys(tmp: Path, name: str, by_batch: dict[tuple[str, int], dict[str, float]]) -> Path:
    """A score-batch output `name`.jsonl of the clips of one manifest WITHOUT a `key` field (rows keyed by score-batch's
    own key, a hash of the clip's resolved path, instruction, preset and draw: two outputs pair only when they scored
    the same clips, e.g. by two scoring models), one batch per (preset, draw), rewards by video name."""
    manifest = tmp / "clips" / "manifest.jsonl"
    manifest.parent.mkdir(exist_ok=True)
    videos = list(next(iter(by_batch.values())))
    manifest.write_text("".join(json.dumps({"path": f"videos/{v}.mp4", "instruction": "stack"}) + "\n"
                                for v in videos))
    lines = [result_line(item, RewardResult(reward=rewards[Path(item["path"]).stem], status="scored", preset=preset))
             for (preset, draw), rewards in by_batch.items() for item in read_manifest(manifest, preset, draw)]
    out = tmp / f"{name}.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_score_batch_keys_of_several_presets_are_not_pooled(tmp_path):
    """Paired by score-batch's own key (a manifest without `key`), each row of a two-preset file pairs with the row
    of its own preset on the other side: nothing collided, the "Scored by" warning did not fire (each pair one
    preset), and one mean difference, interval and sign test pooled both presets, unsaid. A researcher comparing
    two checkpoints under `full` read a figure mixing every ablation preset."""
    a = _own_keys(tmp_path, "a", {("full", 0): {"v1": 0.9, "v2": 0.5}, ("direct", 0): {"v1": 0.1, "v2": 0.1}})
    b = _own_keys(tmp_path, "b", {("full", 0): {"v1": 0.5, "v2": 0.5}, ("direct", 0): {"v1": 0.6, "v2": 0.6}})
    with pytest.raises(CompareError, match=r"a.jsonl holds presets direct, full: compare one preset at a "
                                           r"time \(--preset NAME\)"):
        compare(a, b)
    res = runner.invoke(app, ["eval", "compare", str(a), str(b)])
    assert res.exit_code == 2 and "holds presets direct, full" in res.output and "n = " not in res.output, res.output
    full = compare(a, b, preset="full")
    assert (full.n, full.a.rows, full.preset) == (2, 2, "full") and full.mean_diff == pytest.approx(0.2)
    assert compare(a, b, preset="direct").mean_diff == pytest.approx(-0.5)


def test_one_side_of_several_presets_is_refused_whatever_the_other_holds(tmp_path):
    """B holds preset full only, so only A's full rows pair; but A's side summary (rows, mean reward) pooled both
    presets' rows, and the pairs said nothing of A's other preset."""
    a = _own_keys(tmp_path, "a", {("full", 0): {"v1": 0.9}, ("direct", 0): {"v1": 0.1}})
    b = _own_keys(tmp_path, "b", {("full", 0): {"v1": 0.5}})
    with pytest.raises(CompareError, match=r"a.jsonl holds presets direct, full"):
        compare(a, b)
    with pytest.raises(CompareError, match=r"a.jsonl holds presets direct, full"):
        compare(b, a)
    assert compare(a, b, preset="full").a.mean_reward == pytest.approx(0.9)


def test_rows_recording_no_preset_are_named_as_such(tmp_path):
    a = _own_keys(tmp_path, "a", {("full", 0): {"v1": 0.9}, ("direct", 0): {"v1": 0.1}})
    a.write_text("".join(json.dumps({k: v for k, v in row.items() if k != "preset" or v == "full"}) + "\n"
                         for row in map(json.loads, a.read_text().splitlines())))
    with pytest.raises(CompareError, match=r"holds presets \(none\), full: .*--preset '' for the rows without one"):
        compare(a, a)
    assert compare(a, twin(a), preset="").n == 1


def test_score_batch_keys_of_several_draws_are_not_pooled(tmp_path):
    """Draws 1.. hash into score-batch's own key, so draws 0 and 1 of a file shared no key and were pooled: each clip
    counted once per draw, as if its draws were other videos (n doubled, the interval too narrow, p too small). Under a
    manifest's own key the clip's two rows share it, and that was already this error."""
    a = _own_keys(tmp_path, "a", {("full", 0): {"v1": 0.9, "v2": 0.6}, ("full", 1): {"v1": 0.5, "v2": 0.8}})
    b = _own_keys(tmp_path, "b", {("full", 0): {"v1": 0.4, "v2": 0.6}, ("full", 1): {"v1": 0.5, "v2": 0.2}})
    with pytest.raises(CompareError, match=r"a.jsonl:3: clip '.*v1.mp4' \('stack'\) appears in draws 0 and 1: .*"
                                           r"compare one draw \(--draw K\)"):
        compare(a, b)
    res = runner.invoke(app, ["eval", "compare", str(a), str(b)])
    assert res.exit_code == 2 and "appears in draws 0 and 1" in res.output and "n = " not in res.output, res.output
    assert compare(a, b, draw=1).mean_diff == pytest.approx((0.0 + 0.6) / 2)
    mixed = _own_keys(tmp_path, "mixed", {("full", 0): {"v1": 0.9}, ("direct", 0): {"v1": 0.1},
                                          ("direct", 1): {"v1": 0.3}})
    assert compare(mixed, twin(mixed), preset="full").n == 1  # preset full holds one draw
    with pytest.raises(CompareError, match=r"mixed.jsonl:3: clip .* appears in draws 0 and 1"):
        compare(mixed, mixed, preset="direct")


def test_clips_each_in_one_draw_of_several_are_compared(tmp_path):
    """The draws rule refuses a clip counted twice, not a file of several draws: clips each scored in one draw, not
    the same one (a batch finished at another draw), are compared; and `--draw K` is never refused for draws."""
    a = _own_keys(tmp_path, "a", {("full", 0): {"v1": 0.9, "v2": 0.6}})
    text = a.read_text().splitlines()
    v2 = _own_keys(tmp_path, "v2", {("full", 1): {"v1": 0.9, "v2": 0.2}}).read_text().splitlines()
    a.write_text("\n".join([text[0], v2[1]]) + "\n")  # v1 at draw 0, v2 at draw 1
    result = compare(a, twin(a))
    assert (result.n, result.a.rows) == (2, 2)
    assert compare(a, twin(a), draw=1).n == 1
