"""`raa eval compare`: paired rewards of two score-batch outputs, against hand-computed values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from evals.compare import CompareError, bootstrap_ci, compare, sign_test
from graph.batch import read_manifest, result_line
from graph.cli import app
from graph.run_results import ineligible_result
from graph.schemas import RewardResult

runner = CliRunner()


def _scores(tmp: Path, name: str, rewards: dict[str, float | None], instruction: str = "stack the blocks",
            scorer: dict | None = None, preset: str = "full") -> Path:
    """A score-batch output over a generate-style manifest (rows keyed by manifest field 'key'); `scorer`
    is the row's "scorer" record as score-batch writes it (none: an output from before it did)."""
    folder = tmp / name
    folder.mkdir()
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"videos/{k}.mp4", "instruction": instruction, "key": k}) + "\n"
                                for k in rewards))
    lines = []
    for item, reward in zip(read_manifest(manifest, preset), rewards.values(), strict=True):
        if reward is None:
            result = ineligible_result(preset, "observe: transport: timeout")
        else:
            result = RewardResult(reward=reward, status="zero" if reward == 0 else "scored", preset=preset)
        row = json.loads(result_line(item, result))
        lines.append(json.dumps(row if scorer is None else {**row, "scorer": scorer}))
    out = folder / "scores.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


def twin(path: Path) -> Path:
    """A copy of the results file `path` beside it, as side B: the file itself as both sides is refused (each row
    would pair with itself, `evals.compare`'s module docstring), a copy is read as another file."""
    copy = path.with_name(f"{path.stem}.twin{path.suffix}")
    copy.write_bytes(path.read_bytes())
    return copy


def test_sign_test_hand_computed():
    assert sign_test(3, 1) == pytest.approx(2 * (1 + 4) / 16)  # 0.625
    assert sign_test(8, 0) == pytest.approx(2 / 256)
    assert sign_test(2, 2) == 1.0  # capped
    assert sign_test(0, 0) is None


def test_bootstrap_ci():
    assert bootstrap_ci(np.array([0.5, 0.5, 0.5])) == (0.5, 0.5)
    assert bootstrap_ci(np.array([0.3])) is None
    d = np.random.default_rng(1).normal(0.2, 0.1, 50)
    low, high = bootstrap_ci(d, seed=3)
    assert low < d.mean() < high and high - low < 0.1
    assert bootstrap_ci(d, seed=3) == (low, high)  # seeded: reproducible


def _one_array_ci(diffs, seed, draws):
    """The bootstrap as it was before chunking: one (draws x n) index array."""
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(draws, len(diffs)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


@pytest.mark.parametrize("chunk", [1, 7 * 13, 10**9])
def test_bootstrap_chunks_bounded_and_bit_identical(monkeypatch, chunk):
    """The resamples are drawn a chunk of rows at a time (never more than BOOTSTRAP_CHUNK_VALUES indices,
    at least one row), and the interval equals the one-array bootstrap's bit for bit for the same seed."""
    import evals.paired_stats as cmp

    d = np.random.default_rng(5).normal(0.1, 0.3, 13)
    expected = _one_array_ci(d, seed=4, draws=500)
    sizes: list[tuple[int, int]] = []
    real_rng = np.random.default_rng

    class Spy:
        def __init__(self, seed):
            self.rng = real_rng(seed)

        def integers(self, *args, size, **kwargs):
            sizes.append(size)
            return self.rng.integers(*args, size=size, **kwargs)

    monkeypatch.setattr(cmp, "BOOTSTRAP_CHUNK_VALUES", chunk)
    monkeypatch.setattr(cmp.np.random, "default_rng", Spy)
    assert cmp.bootstrap_ci(d, seed=4, draws=500) == expected
    assert sum(rows for rows, _ in sizes) == 500 and all(n == 13 for _, n in sizes)
    assert max(rows for rows, _ in sizes) == min(500, max(1, chunk // 13))


def test_compare_hand_computed(tmp_path):
    a = _scores(tmp_path, "trained", {"k1": 0.8, "k2": 0.5, "k3": None, "k4": 0.6, "k5": 0.9})
    b = _scores(tmp_path, "base", {"k1": 0.4, "k2": 0.5, "k3": 0.7, "k4": 0.0, "k6": 0.2})
    c = compare(a, b)
    assert (c.pairs, c.pairs_ineligible, c.unpaired_a, c.unpaired_b, c.n) == (4, 1, 1, 1, 3)
    assert c.mean_a == pytest.approx((0.8 + 0.5 + 0.6) / 3) and c.mean_b == pytest.approx((0.4 + 0.5 + 0.0) / 3)
    assert c.mean_diff == pytest.approx((0.4 + 0.0 + 0.6) / 3)
    assert (c.wins, c.ties, c.losses) == (2, 1, 0) and c.p_sign == pytest.approx(0.5)
    assert c.ci95 is not None and c.ci95[0] <= c.mean_diff <= c.ci95[1]
    assert (c.a.rows, c.a.scored, c.a.zero, c.a.ineligible) == (5, 4, 0, 1)
    assert c.a.mean_reward == pytest.approx((0.8 + 0.5 + 0.6 + 0.9) / 4)  # the ineligible row is no number
    assert (c.b.scored, c.b.zero, c.b.ineligible) == (4, 1, 0) and c.b.mean_reward == pytest.approx(1.8 / 5)
    assert c.by_instruction == [{"instruction": "stack the blocks", "n": 3, "mean_a": c.mean_a, "mean_b": c.mean_b,
                                 "mean_diff": c.mean_diff}]


def test_compare_refuses_what_it_cannot_pair(tmp_path):
    good = _scores(tmp_path, "good", {"k1": 0.5})
    with pytest.raises(CompareError, match="not found"):
        compare(tmp_path / "missing.jsonl", good)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + "{torn\n")  # a damaged line is skipped and named, no longer refused
    assert [str(s) for s in compare(bad, good).a.skipped_lines] == [f"{bad}:2: not valid JSON (Expecting property "
                                                                      "name enclosed in double quotes)"]
    with pytest.raises(CompareError, match="no 'sample' field"):
        compare(good, good, pair_by="sample")
    twice = tmp_path / "twice.jsonl"
    twice.write_text(good.read_text() * 2)
    with pytest.raises(CompareError, match="appears twice"):
        compare(twice, good)
    import json
    odd = tmp_path / "odd_manifest.jsonl"  # an AttributeError traceback before
    odd.write_text(json.dumps({**json.loads(good.read_text()), "manifest": "c1.mp4"}) + "\n")
    with pytest.raises(CompareError, match=r"odd_manifest.jsonl:1: 'manifest' is not an object"):
        compare(odd, good)


@pytest.mark.parametrize("result, says", [
    ({"status": "scored", "reward": "0.9"}, "status 'scored' needs a finite number as its reward, got reward '0.9'"),
    ({"status": "scored"}, "status 'scored' needs a finite number as its reward, got no reward"),
    ({"status": "zero", "reward": None}, "status 'zero' needs a finite number as its reward, got reward None"),
    ({"status": "scored", "reward": True}, "got reward True"),
    ({"status": "scored", "reward": float("nan")}, "got reward nan"),
    ({"status": "ineligible", "reward": 0.4}, "an ineligible row carries a reward \\(0.4\\)"),
])
def test_a_row_whose_status_and_reward_disagree_is_skipped_naming_its_line(tmp_path, result, says):
    """A "scored" row with reward "0.9" or none was counted as ineligible (and as scored): silently no number."""
    good = _scores(tmp_path, "good", {"k1": 0.5, "k2": 0.4})
    rows = [json.loads(line) for line in good.read_text().splitlines()]
    rows[1]["result"] = {**rows[1]["result"], **result}
    if "reward" not in result:
        del rows[1]["result"]["reward"]
    odd = tmp_path / "odd.jsonl"
    odd.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = compare(odd, good)  # the row is skipped and named, never counted (it refused the whole file)
    assert [s.line for s in c.a.skipped_lines] == [f"{odd}:2"] and re.search(says, c.a.skipped_lines[0].reason)
    assert (c.a.rows, c.n) == (1, 1)
    assert [s.line for s in compare(good, odd).b.skipped_lines] == [f"{odd}:2"]


def test_cli(tmp_path):
    a = _scores(tmp_path, "trained", {"k1": 0.9, "k2": 0.7, "k3": 0.8})
    b = _scores(tmp_path, "base", {"k1": 0.5, "k2": 0.7, "k3": None})
    out = tmp_path / "cmp.json"
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "wins/ties/losses 1/1/0" in res.output and "1 left out" in res.output
    saved = json.loads(out.read_text())
    assert saved["n"] == 2 and saved["mean_diff"] == pytest.approx(0.2)
    res = runner.invoke(app, ["eval", "compare", str(a), str(tmp_path / "nope.jsonl")])
    assert res.exit_code == 2 and "not found" in res.output


QWEN = {"model": "Qwen/Qwen3-VL-8B-Instruct", "temperature": 0.0}


def test_compare_names_each_sides_scorer_and_counts_pairs_scored_differently(tmp_path):
    a = _scores(tmp_path, "trained", {"k1": 0.9, "k2": 0.7, "k3": 0.8}, scorer=QWEN)
    b = _scores(tmp_path, "base", {"k1": 0.5, "k2": 0.7, "k3": None}, scorer=QWEN)
    c = compare(a, b)
    assert c.a.scorers == {"full · Qwen/Qwen3-VL-8B-Instruct @ T=0.0": 3} and c.b.scorers == c.a.scorers
    assert (c.pairs_scored_differently, c.pairs_scorer_unrecorded) == (0, 0)
    hot = _scores(tmp_path, "hot", {"k1": 0.5, "k2": 0.7, "k3": 0.1}, scorer={**QWEN, "temperature": 0.7})
    assert compare(a, hot).pairs_scored_differently == 3  # same model, another temperature
    other = _scores(tmp_path, "other", {"k1": 0.5, "k2": 0.7}, preset="direct", scorer=QWEN)
    assert compare(a, other).pairs_scored_differently == 2  # another preset
    old = _scores(tmp_path, "old", {"k1": 0.5, "k2": 0.7, "k3": 0.6})  # written before rows named their scorer
    c = compare(a, old)
    assert c.b.scorers == {"full · model unrecorded": 3}
    assert (c.pairs_scored_differently, c.pairs_scorer_unrecorded) == (0, 3)  # unknown is not "different"


def test_cli_warns_when_the_sides_were_scored_differently(tmp_path):
    a = _scores(tmp_path, "trained", {"k1": 0.9, "k2": 0.7}, scorer=QWEN)
    b = _scores(tmp_path, "base", {"k1": 0.5, "k2": 0.7}, scorer={"model": "gpt-4o [eval]", "temperature": 0.0})
    res = runner.invoke(app, ["eval", "compare", str(a), str(b)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output  # a warning, not a refusal
    assert "2 of the 2 compared pairs were scored by another preset, model or temperature" in res.output
    assert "gpt-4o [eval] @ T=0.0" in res.output  # rich markup in a model name is printed, not parsed
    assert "wins/ties/losses 1/1/0" in res.output
    alike = _scores(tmp_path, "alike", {"k1": 0.4, "k2": 0.7}, scorer=QWEN)  # not A itself: refused (its own test)
    same = runner.invoke(app, ["eval", "compare", str(a), str(alike)], env={"COLUMNS": "250"})
    assert same.exit_code == 0 and "warning" not in same.output and "note:" not in same.output


def test_pairs_of_different_instructions_are_counted_and_warned(tmp_path):
    """`key` is a prompt index: sides generated from reordered prompt lists paired different tasks silently."""
    a = _scores(tmp_path, "trained", {"k1": 0.9, "k2": 0.7}, scorer=QWEN)
    b = _scores(tmp_path, "base", {"k1": 0.5, "k2": 0.7}, instruction="open the drawer", scorer=QWEN)
    result = compare(a, b)
    assert (result.pairs_instruction_differs, result.first_instruction_mismatch) == (2, "k1")
    assert compare(a, twin(a)).pairs_instruction_differs == 0
    res = runner.invoke(app, ["eval", "compare", str(a), str(b)], env={"COLUMNS": "250"})
    assert res.exit_code == 0 and "2 of the 2 compared pairs name different instructions" in res.output


def test_two_presets_on_one_manifest_pair_by_path_and_say_so(tmp_path):
    """score-batch's own key hashes the preset: two presets' outputs of one plain manifest (no manifest
    'key' field) share no key; the comparison points at --pair-by path instead of reporting nothing."""
    manifest = tmp_path / "clips.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"videos/c{i}.mp4", "instruction": "push it"}) + "\n"
                                for i in range(3)))
    outs = {}
    for preset, rewards in (("full", [0.9, 0.0, 0.7]), ("direct", [0.8, 0.6, 0.7])):
        rows = [json.loads(result_line(item, RewardResult(reward=r, status="zero" if r == 0 else "scored",
                                                           preset=preset)))
                for item, r in zip(read_manifest(manifest, preset), rewards, strict=True)]
        outs[preset] = tmp_path / f"{preset}.jsonl"
        outs[preset].write_text("".join(json.dumps({**row, "scorer": QWEN}) + "\n" for row in rows))
    c = compare(outs["full"], outs["direct"])
    assert c.pairs == 0 and "3 video path(s) appear in both" in c.hint and "--pair-by path" in c.hint
    res = runner.invoke(app, ["eval", "compare", str(outs["full"]), str(outs["direct"])], env={"COLUMNS": "250"})
    assert res.exit_code == 0 and "pair them with --pair-by path" in res.output
    c = compare(outs["full"], outs["direct"], pair_by="path")
    assert (c.n, c.hint, c.wins, c.ties, c.losses) == (3, None, 1, 1, 1)
    assert c.pairs_scored_differently == 3  # a preset ablation: counted (and warned about), not refused


def test_most_changed_instructions(tmp_path):
    from evals.compare import most_changed

    rows = [{"instruction": t, "n": n, "mean_a": 0.0, "mean_b": 0.0, "mean_diff": d}
            for t, n, d in (("open", 2, 0.1), ("push", 3, -0.4), ("lift", 1, 0.3), ("stack", 2, -0.1), ("pour", 4, 0.0))]
    assert [r["instruction"] for r in most_changed(rows, 3)] == ["lift", "open", "push"]  # |d| 0.4, 0.3, 0.1 (2 pairs
    # each for open and stack: the text breaks the tie), shown from the largest gain to the largest loss
    assert most_changed(rows, 0) == [] and len(most_changed(rows, 99)) == 5
    a = _scores(tmp_path, "trained", {"k1": 0.9, "k2": 0.1}, instruction="open the drawer")
    b = _scores(tmp_path, "base", {"k1": 0.5, "k2": 0.6}, instruction="open the drawer")
    one = runner.invoke(app, ["eval", "compare", str(a), str(b)], env={"COLUMNS": "200"})
    assert one.exit_code == 0 and "Most changed" not in one.output  # a single instruction: the summary says it all
    rows_a = [json.loads(line) for line in a.read_text().splitlines()]
    rows_a[1]["instruction"] = "close the drawer"
    a.write_text("".join(json.dumps(r) + "\n" for r in rows_a))
    two = runner.invoke(app, ["eval", "compare", str(a), str(b), "--instructions", "1"], env={"COLUMNS": "200"})
    assert two.exit_code == 0 and "Most changed instructions (1 of 2)" in two.output
    assert "close the drawer" in two.output and "-0.5000" in two.output and "open the drawer" not in two.output


def test_bad_manifest_lines_are_counted_but_never_paired(tmp_path):
    """Unrelated manifests' bad line 2 share the placeholder path "<line 2>": never a pair, nor a shared video."""
    def side(name: str, video: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        manifest = folder / "manifest.jsonl"
        manifest.write_text(json.dumps({"path": video, "instruction": f"stack {name}", "key": name}) + "\n{broken\n")
        items = read_manifest(manifest, "full")
        out = folder / "scores.jsonl"
        out.write_text("".join(result_line(it, ineligible_result("full", it["error"]) if it["error"] else
                                           RewardResult(reward=0.5, status="scored", preset="full")) + "\n"
                               for it in items))
        return out

    a, b = side("a", "x.mp4"), side("b", "y.mp4")
    for pair_by in ("key", "path", "instruction"):
        result = compare(a, b, pair_by=pair_by)
        assert result.pairs == 0 and result.hint is None, pair_by
        assert (result.a.rows, result.a.ineligible, result.a.bad_lines) == (2, 1, 1)
        assert (result.unpaired_a, result.unpaired_b) == (1, 1)
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--pair-by", "path"])
    assert res.exit_code == 0 and "1 row(s) of A are manifest lines that named no clip" in res.output, res.output


def _draws(tmp: Path, name: str, by_draw: dict[int, dict[str, float]]) -> Path:
    """A score-batch output holding several draws of one generate-style manifest (one row per key and draw)."""
    folder = tmp / name
    folder.mkdir()
    manifest = folder / "manifest.jsonl"
    keys = list(next(iter(by_draw.values())))
    manifest.write_text("".join(json.dumps({"path": f"videos/{k}.mp4", "instruction": "stack", "key": k}) + "\n"
                                for k in keys))
    lines = [result_line(item, RewardResult(reward=rewards[item["manifest"]["key"]], status="scored", preset="full"))
             for draw, rewards in by_draw.items() for item in read_manifest(manifest, "full", draw)]
    out = folder / "scores.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_a_multi_draw_file_compares_one_draw_or_says_why_it_cannot(tmp_path):
    """Draws 0 and 1 in one file share each manifest key: the error read as a plain duplicate key."""
    a = _draws(tmp_path, "trained", {0: {"k1": 0.9, "k2": 0.6}, 1: {"k1": 0.5, "k2": 0.8}})
    b = _draws(tmp_path, "base", {0: {"k1": 0.4, "k2": 0.6}, 1: {"k1": 0.5, "k2": 0.2}})
    with pytest.raises(CompareError, match=r"key 'k1' appears in draws 0 and 1: .*--draw K"):
        compare(a, b)
    one = compare(a, b, draw=1)
    assert (one.n, one.a.rows, one.draw) == (2, 2, 1) and one.mean_diff == pytest.approx((0.0 + 0.6) / 2)
    assert compare(a, b, draw=0).mean_diff == pytest.approx((0.5 + 0.0) / 2)
    with pytest.raises(CompareError, match=r"no row of draw 2 \(draws found: 0, 1\)"):
        compare(a, b, draw=2)
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--draw", "1"])
    assert res.exit_code == 0, res.output
    assert "draw 1 of each file" in res.output and "wins/ties/losses 1/1/0" in res.output


@pytest.mark.parametrize("result, says", [
    ({"status": "zero", "reward": 0.4}, "a row with status 'zero' has reward 0.4; expected 0"),
    ({"status": "done", "reward": 0.5}, "status 'done' is not one of scored, zero, ineligible"),
    ({"status": None, "reward": 0.5}, "status None is not one of scored, zero, ineligible"),
    ({"status": "scored", "reward": 1.5}, "reward 1.5 is outside 0..1"),
    ({"status": "scored", "reward": -0.1}, "reward -0.1 is outside 0..1"),
])
def test_a_row_no_reward_result_can_be_is_skipped_naming_its_line(tmp_path, result, says):
    """A "zero" row with reward 0.4 was a zero in the side's status counts and 0.4 in its mean; a row of another
    status ("done", none) was an eligible reward counted under no status (rows != scored + zero + ineligible);
    a reward outside 0..1 (no RewardResult holds one) entered the means and the paired differences."""
    good = _scores(tmp_path, "good", {"k1": 0.5, "k2": 0.4})
    rows = [json.loads(line) for line in good.read_text().splitlines()]
    rows[1]["result"] = {**rows[1]["result"], **result}
    odd = tmp_path / "odd.jsonl"
    odd.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = compare(odd, good)  # skipped and named, not counted
    assert [s.line for s in c.a.skipped_lines] == [f"{odd}:2"] and re.search(says, c.a.skipped_lines[0].reason)
    assert (c.a.rows, c.a.zero, c.n) == (1, 0, 1)
