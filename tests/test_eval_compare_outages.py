"""`raa eval compare` left out every pair with an ineligible reward under one count, whether the reward
machinery failed on it (an endpoint down: a `--retry-ineligible` rerun fills it) or the video itself could not
be scored (an undecodable clip the policy made, which the paired statistics then never see). Each side now
counts its ineligible rows an outage caused (`graph.schemas.Fault.outage`), and the comparison the pairs left
out for an outage."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from evals.compare import compare
from evals.eval_views import sides_table
from graph.batch import read_manifest, result_line
from graph.cli import app
from graph.run_results import ineligible_result
from graph.schemas import Fault, RewardResult

OUTAGE = Fault(stage="observe", kind="transport", message="endpoint down")
OWN = Fault(stage="video", kind="video", message="invalid data found when processing input")


def _scores(tmp: Path, name: str, rewards: dict[str, object]) -> Path:
    """A score-batch output; a reward that is a Fault makes the row ineligible with that fault."""
    folder = tmp / name
    folder.mkdir()
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"videos/{k}.mp4", "instruction": "stack", "key": k}) + "\n"
                                for k in rewards))
    lines = []
    for item, reward in zip(read_manifest(manifest, "full"), rewards.values(), strict=True):
        if isinstance(reward, Fault):
            result = ineligible_result("full", reward.reason(), faults=[reward])
        else:
            result = RewardResult(reward=reward, status="zero" if reward == 0 else "scored", preset="full")
        lines.append(result_line(item, result))
    out = folder / "scores.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_outages_are_counted_per_side_and_per_left_out_pair(tmp_path):
    a = _scores(tmp_path, "a", {"1": 0.9, "2": OUTAGE, "3": OWN, "4": OUTAGE, "5": 0.5})
    b = _scores(tmp_path, "b", {"1": 0.4, "2": 0.3, "3": 0.2, "4": OWN, "5": OUTAGE})
    c = compare(a, b)
    assert (c.a.ineligible, c.a.outage, c.b.ineligible, c.b.outage) == (3, 2, 2, 1)
    assert (c.n, c.pairs_ineligible, c.pairs_outage) == (1, 4, 3)  # pair 3: the videos' own faults only
    result = CliRunner().invoke(app, ["eval", "compare", str(a), str(b)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "4 left out: an ineligible reward, 3 of them for an outage" in result.output
    console = Console(width=400, file=io.StringIO())
    console.print(sides_table(c))
    assert "3 (2 outage)" in console.file.getvalue() and "2 (1 outage)" in console.file.getvalue()


def test_the_refill_hint_names_the_draw_of_the_outage_pairs(tmp_path):
    """Outputs of one draw other than 0 (`score-batch --draw 2`) compared without --draw: the hint said a plain
    `score-batch --retry-ineligible`, which retries draw 0's rows (none: it scores every clip again at draw 0) and
    leaves draw 2's outage rows as they are."""
    a = _scores(tmp_path, "a", {"1": 0.9, "2": OUTAGE})
    b = _scores(tmp_path, "b", {"1": 0.4, "2": 0.3})
    for out in (a, b):
        out.write_text("".join(json.dumps({**json.loads(line), "draw": 2}) + "\n" for line in out.read_text().splitlines()))
    assert compare(a, b).outage_draws == [2]
    result = CliRunner().invoke(app, ["eval", "compare", str(a), str(b)], terminal_width=300)
    assert result.exit_code == 0, result.output
    assert f"raa score-batch MANIFEST_A --out {a} --preset full --draw 2 --retry-ineligible" in \
        " ".join(result.output.split())


def test_the_refill_hint_says_which_file_holds_each_draw(tmp_path):
    """A's outage rows in draw 2, B's in draw 0: the hint listed "K = 0, 2" for both files together, so a user ran
    `--retry-ineligible --draw 2` on B (nothing to retry there) and a plain one on A (draw 0: none either). Each
    file is now named with the draws of its own outage rows."""
    a = _scores(tmp_path, "a", {"1": 0.9, "2": OUTAGE})
    b = _scores(tmp_path, "b", {"1": OUTAGE, "2": 0.3})
    a.write_text("".join(json.dumps({**json.loads(line), "draw": 2}) + "\n" for line in a.read_text().splitlines()))
    b_rows = [json.loads(line) for line in b.read_text().splitlines()]  # B: video 1 (its outage) in draw 0, 2 in 2
    b.write_text("".join(json.dumps({**r, "draw": 0 if r["manifest"]["key"] == "1" else 2}) + "\n" for r in b_rows))
    c = compare(a, b)
    assert (c.pairs_outage, c.outage_draws, c.outage_draws_a, c.outage_draws_b) == (2, [0, 2], [2], [0])
    result = CliRunner().invoke(app, ["eval", "compare", str(a), str(b)], terminal_width=400)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"raa score-batch MANIFEST_A --out {a} --preset full --draw 2 --retry-ineligible" in text, text
    assert f"raa score-batch MANIFEST_B --out {b} --preset full --retry-ineligible" in text, text  # draw 0: no --draw
    assert "--draw 0" not in text
    assert c.as_dict()["outage_draws_b"] == [0]
