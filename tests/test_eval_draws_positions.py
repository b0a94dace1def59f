"""`raa eval draws`' "Rewards by draw" column left an ineligible draw out, so a clip's rewards of draws 0 and 2 read
as draws 0 and 1 ("0.200 0.900"); the ineligible draw is shown in its place ("⊥") and the JSON names the draw of
each reward."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from evals.draws import summarize_draws
from graph.batch import read_manifest, result_line
from graph.cli import app
from graph.run_results import ineligible_result
from graph.schemas import RewardResult

runner = CliRunner()
DRAWS = {"a": [0.2, None, 0.9], "b": [0.5, 0.5, 0.5]}


def _three_draws(tmp: Path) -> Path:
    manifest = tmp / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"{k}.mp4", "instruction": "stack the blocks"}) + "\n"
                                for k in DRAWS))
    lines = []
    for draw in range(3):
        for item, rewards in zip(read_manifest(manifest, "full", draw), DRAWS.values(), strict=True):
            reward = rewards[draw]
            result = (ineligible_result("full", "observe: transport: timeout") if reward is None else
                      RewardResult(reward=reward, status="scored", preset="full"))
            lines.append(result_line(item, result))
    out = tmp / "scores.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_an_ineligible_draw_keeps_its_place(tmp_path):
    out = _three_draws(tmp_path)
    widest = summarize_draws(out).most_variable[0]
    assert Path(widest["path"]).name == "a.mp4"
    assert (widest["rewards"], widest["draws"], widest["ineligible_draws"]) == ([0.2, 0.9], [0, 2], [1])
    res = runner.invoke(app, ["eval", "draws", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "0.200 ⊥ 0.900" in res.output, res.output


def test_the_draws_summary_line_counts_in_good_grammar(tmp_path):
    """One clip read "1 clips, ... 1 ineligible rows left out; 1 clips with < 2 eligible draws"."""
    out = _three_draws(tmp_path)
    one = tmp_path / "one.jsonl"
    one.write_text("".join(line for line in out.read_text().splitlines(keepends=True) if "a.mp4" in line))
    res = runner.invoke(app, ["eval", "draws", str(one)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "3 rows, 1 clip, 3-3 draws per clip; 1 ineligible row left out; 0 clips with < 2 eligible draws" \
        in res.output, res.output
