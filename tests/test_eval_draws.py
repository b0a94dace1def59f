"""`raa eval draws`: reward variation across draws of one score-batch output, against hand-computed values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.draws import DrawsError, clip_labels, draw_statistics, summarize_draws
from graph.batch import read_manifest, result_line
from graph.cli import app
from graph.run_results import ineligible_result
from graph.schemas import RewardResult

runner = CliRunner()

# clip -> reward per draw (None: ineligible); hand values in test_summary_hand_computed
DRAWS = {"a": [0.2, 0.4], "b": [0.8, 0.8], "c": [None, 0.5], "d": [0.0, 0.6]}


def _draws(tmp: Path, draws: dict[str, list[float | None]] = DRAWS, preset: str = "full") -> Path:
    """What `raa score-batch M --out scores.jsonl --draw k` writes for k = 0, 1 (rows as the real writer makes
    them), appended to scores.jsonl."""
    manifest = tmp / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"{k}.mp4", "instruction": "stack the blocks"}) + "\n"
                                for k in draws))
    lines = []
    for draw in range(2):
        for item, rewards in zip(read_manifest(manifest, preset, draw), draws.values(), strict=True):
            reward = rewards[draw]
            result = (ineligible_result(preset, "observe: transport: timeout") if reward is None else
                      RewardResult(reward=reward, status="zero" if reward == 0 else "scored", preset=preset))
            lines.append(result_line(item, result))
    out = tmp / "scores.jsonl"
    with out.open("a") as fh:
        fh.write("\n".join(lines) + "\n")
    return out


def test_draw_statistics_hand_computed():
    # a: mean 0.3 var 0.01; b: mean 0.8 var 0; W = 0.005; B = var(0.3, 0.8) = 0.0625
    within, between, share = draw_statistics([[0.2, 0.4], [0.8, 0.8]])
    assert (within, between) == pytest.approx((0.005, 0.0625))
    assert share == pytest.approx(0.005 / 0.0675)
    assert draw_statistics([[0.5, 0.5], [0.5, 0.5]]) == (0.0, 0.0, None)  # nothing varies: no share
    assert draw_statistics([[0.2, 0.8]]) == (pytest.approx(0.09), None, None)  # one clip: no spread to compare
    equal = [[0.9749999999999999] * 3] * 3  # equal rewards whose mean is not exact: rounding, not noise
    assert draw_statistics(equal)[2] is None


def test_summary_hand_computed(tmp_path):
    s = summarize_draws(_draws(tmp_path))
    assert (s.rows, s.clips, s.draws_min, s.draws_max) == (8, 4, 2, 2)
    assert (s.ineligible_rows, s.clips_single, s.n) == (1, 1, 3)  # c has one eligible draw
    # a, b, d: vars 0.01, 0, 0.09 -> W = 0.1/3; means 0.3, 0.8, 0.3 -> B = 1/18; share = (1/30) / (1/30 + 1/18)
    assert s.within_std == pytest.approx((0.1 / 3) ** 0.5)
    assert s.between_std == pytest.approx((1 / 18) ** 0.5)
    assert s.noise_share == pytest.approx(0.375)
    assert (s.mean_range, s.max_range) == pytest.approx((0.8 / 3, 0.6))
    assert s.status_flips == 1  # d: zero, then scored
    assert [Path(c["path"]).name for c in s.most_variable] == ["d.mp4", "a.mp4", "b.mp4"]
    assert s.most_variable[0]["statuses"] == ["zero", "scored"]


def test_one_preset_at_a_time(tmp_path):
    _draws(tmp_path)
    out = _draws(tmp_path, {"a": [0.9, 0.9], "b": [0.1, 0.1]}, preset="direct")  # the same output, another preset
    with pytest.raises(DrawsError, match="holds presets direct, full: summarise one preset at a time"):
        summarize_draws(out)
    full = summarize_draws(out, "full")
    assert (full.preset, full.rows, full.clips) == ("full", 8, 4) and full.noise_share == pytest.approx(0.375)
    direct = summarize_draws(out, "direct")
    assert (direct.rows, direct.within_std, direct.noise_share) == (4, 0.0, 0.0)
    with pytest.raises(DrawsError, match="no row of preset 'motion' \\(presets found: direct, full\\)"):
        summarize_draws(out, "motion")
    res = runner.invoke(app, ["eval", "draws", str(out), "--preset", "direct"])
    assert res.exit_code == 0 and "preset direct: 4 rows, 2 clips" in res.output, res.output
    res = runner.invoke(app, ["eval", "draws", str(out)])
    assert res.exit_code == 2 and "--preset NAME" in res.output


def test_clip_labels_tell_listed_clips_apart():
    clips = [{"path": p, "instruction": i} for p, i in [
        ("/runs/a/it10/clip_0.mp4", "stack the blocks"), ("/runs/b/it10/clip_0.mp4", "stack the blocks"),
        ("/runs/a/it10/clip_1.mp4", "stack the blocks"),
        ("/runs/a/it10/clip_1.mp4", "pick up the red cube and place it in the bowl")]]
    assert clip_labels(clips) == ["a/it10/clip_0.mp4", "b/it10/clip_0.mp4",
                                  'clip_1.mp4 "stack the blocks"', 'clip_1.mp4 "pick up the red cube and…"']
    assert clip_labels([{"path": "x.mp4", "instruction": "i"}]) == ["x.mp4"]
    assert clip_labels([{"path": "v/x.mp4", "instruction": "i"}, {"path": "x.mp4", "instruction": "i"}]) == \
        ["v/x.mp4", "x.mp4"]  # one path is the other's tail: the shorter stays whole
    assert clip_labels([]) == []


def test_rows_without_a_draw_count_as_draw_0_and_a_repeated_draw_is_an_error(tmp_path):
    out = _draws(tmp_path)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        if row["draw"] == 0:
            del row["draw"]  # an output written before rows recorded their draw
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert summarize_draws(out).noise_share == pytest.approx(0.375)
    out.write_text(out.read_text() + json.dumps(rows[-1]) + "\n")
    with pytest.raises(DrawsError, match=r"scores.jsonl:9: draw 1 of .*d\.mp4 \(full\) appears twice"):
        summarize_draws(out)
    out.write_text('{"path": "x.mp4"}\n')
    with pytest.raises(DrawsError, match="scores.jsonl:1: not a score-batch row"):
        summarize_draws(out)
    with pytest.raises(DrawsError, match="results file not found"):
        summarize_draws(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("result, says", [
    ({"status": "scored", "reward": "0.9"}, "status 'scored' needs a finite number as its reward, got reward '0.9'"),
    ({"status": "scored", "reward": False}, "got reward False"),
    ({"status": "ineligible", "reward": 0.5}, "an ineligible row carries a reward"),
])
def test_a_row_whose_status_and_reward_disagree_is_skipped_naming_its_line(tmp_path, result, says):
    """A "scored" draw whose reward was a string was silently one more ineligible draw."""
    out = _draws(tmp_path)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rows[2]["result"] = {**rows[2]["result"], **result}
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = summarize_draws(out)  # skipped and named, never one more draw (it refused the whole file)
    assert [x.line for x in s.skipped_lines] == [f"{out}:3"] and re.search(says, s.skipped_lines[0].reason)
    assert s.rows == 7


def test_cli_prints_the_summary_and_writes_json(tmp_path):
    out = _draws(tmp_path)
    res = runner.invoke(app, ["eval", "draws", str(out), "--json", str(tmp_path / "d.json")])
    assert res.exit_code == 0, res.output
    assert "noise share 0.375" in res.output and "status flips (scored vs zero) 1" in res.output
    assert "0.000(zero) 0.600" in res.output  # d's draws, its zero marked
    assert json.loads((tmp_path / "d.json").read_text())["noise_share"] == pytest.approx(0.375)
    (tmp_path / "one").mkdir()
    one = _draws(tmp_path / "one", {"a": [0.5, None]})
    res = runner.invoke(app, ["eval", "draws", str(one)])
    assert res.exit_code == 0 and "nothing to measure" in res.output, res.output
    res = runner.invoke(app, ["eval", "draws", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 2 and "results file not found" in res.output
    res = runner.invoke(app, ["eval", "draws", str(out), "--json", str(tmp_path)])  # a folder: was a traceback
    assert res.exit_code == 2 and f"cannot write --json {tmp_path}" in res.output, res.output


def test_bad_manifest_lines_are_counted_but_are_no_clip(tmp_path):
    """A manifest line that named no clip has score-batch's placeholder path "<line N>" in every draw: it was
    summarised as one more clip (with < 2 eligible draws), and two manifests' bad line 2 in one output were
    "draw 0 of <line 2> appears twice", refusing a valid score-batch output."""
    from graph.run_results import ineligible_result as bad_result

    def manifest_draws(name: str, rewards: list[float]) -> list[str]:
        manifest = tmp_path / f"{name}.jsonl"
        manifest.write_text(json.dumps({"path": f"{name}.mp4", "instruction": "stack the blocks"}) + "\n{broken\n")
        lines = []
        for draw in range(2):
            for item in read_manifest(manifest, "full", draw):
                result = (bad_result("full", f"input: {item['error']}") if item["error"] else
                          RewardResult(reward=rewards[draw], status="scored", preset="full"))
                lines.append(result_line(item, result) + "\n")
        return lines

    out = tmp_path / "scores.jsonl"
    out.write_text("".join(manifest_draws("a", [0.2, 0.4])))
    s = summarize_draws(out)
    # a: 0.2, 0.4 (2 rows); its bad line 2: 2 ineligible rows, no clip
    assert (s.rows, s.clips, s.draws_min, s.draws_max, s.ineligible_rows, s.clips_single, s.n) == (4, 1, 2, 2, 2, 0, 1)
    assert s.bad_lines == 2 and s.within_std == pytest.approx(0.1)
    out.write_text(out.read_text() + "".join(manifest_draws("b", [0.8, 0.8])))  # another manifest, same output
    s = summarize_draws(out)
    assert (s.rows, s.clips, s.ineligible_rows, s.clips_single, s.n, s.bad_lines) == (8, 2, 4, 0, 2, 4)
    # a: var 0.01, b: var 0 -> W = 0.005; means 0.3, 0.8 -> B = 0.0625
    assert s.noise_share == pytest.approx(0.005 / 0.0675)
    res = runner.invoke(app, ["eval", "draws", str(out)])
    assert res.exit_code == 0 and "preset full: 8 rows, 2 clips" in res.output, res.output
    assert "note: 4 of those rows are manifest lines that named no clip" in res.output


def test_a_zero_row_with_a_positive_reward_is_skipped_naming_its_line(tmp_path):
    """A "zero" row with reward 0.6 counted as a zero in the status flips and as 0.6 in the statistics."""
    path = _draws(tmp_path)
    lines = path.read_text().splitlines()
    row = json.loads(lines[2])
    row["result"] = {**row["result"], "status": "zero", "reward": 0.6}
    lines[2] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    s = summarize_draws(path)
    assert [str(x) for x in s.skipped_lines] == [f"{path}:3: a row with status 'zero' has reward 0.6; expected 0"]
    assert s.rows == 7


def test_rows_without_a_preset_and_an_empty_file_read_sensibly(tmp_path):
    """Rows that record no preset were summarised as preset "None" (the str of a missing value), and an empty
    file printed "preset : 0 rows". They read "preset (none)" and "no rows in FILE"; an empty file exits 0 with
    nothing to measure, as `raa eval compare` and `raa eval report` do on empty results."""
    out = _draws(tmp_path)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        del row["preset"]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = summarize_draws(out)
    assert (s.preset, s.rows) == ("", 8) and s.noise_share == pytest.approx(0.375)
    res = runner.invoke(app, ["eval", "draws", str(out)])
    assert res.exit_code == 0 and "preset (none): 8 rows, 4 clips" in res.output, res.output
    both = _draws(tmp_path, {"a": [0.9, 0.9]}, preset="direct")  # appended: one preset recorded, one not
    with pytest.raises(DrawsError, match=r"holds presets \(none\), direct: .*--preset '' for the rows without"):
        summarize_draws(both)
    assert summarize_draws(both, "").rows == 8 and summarize_draws(both, "direct").rows == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    res = runner.invoke(app, ["eval", "draws", str(empty), "--json", str(tmp_path / "e.json")])
    assert res.exit_code == 0 and f"no rows in {empty}: nothing to measure" in res.output, res.output
    assert res.output.startswith("no rows in ") and json.loads((tmp_path / "e.json").read_text())["rows"] == 0


def test_draws_that_agree_have_exactly_no_spread():
    """Three draws of 0.1 had within_std 1.4e-17 (float rounding of their mean), read as noise in the JSON."""
    from evals.draws import draw_statistics
    from training.metrics import _std

    within, between, share = draw_statistics([[0.1, 0.1, 0.1], [0.7, 0.7, 0.7]])
    assert within == 0.0 and between == pytest.approx(0.09) and share == 0.0
    assert draw_statistics([[0.1, 0.1, 0.1], [0.1, 0.1]])[:2] == (0.0, 0.0)
    assert _std([0.1, 0.1, 0.1]) == 0.0 and _std([0.0, 1.0]) == 0.5


@pytest.mark.parametrize("field, value", [("path", None), ("path", 3), ("instruction", None)])
def test_a_row_naming_no_clip_is_skipped_naming_its_line(tmp_path, field, value):
    """A row without a path (hand-edited, another tool's) was a clip called "None" (an instruction: "None"), one
    more clip with fewer than two draws; it is skipped and named, as `raa eval compare` skips a row with nothing to
    pair by."""
    out = _draws(tmp_path)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    if value is None:
        del rows[2][field]
    else:
        rows[2][field] = value
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = summarize_draws(out)
    assert [x.line for x in s.skipped_lines] == [f"{out}:3"], s.skipped_lines
    assert f"'{field}'" in s.skipped_lines[0].reason
    assert s.rows == 7 and s.clips == 4
