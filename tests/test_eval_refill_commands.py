"""The retry hints of `raa eval compare` and `raa eval draws` named "score-batch --retry-ineligible [--draw K]" and no
--preset: score-batch's --preset defaults to "full", so the command a user pieced together for rows of another preset
scored every clip of the manifest again under "full" into the same output (a batch other than the one that wrote
them) and left the outage rows as they were. The hints now print the batch's command (`graph.batch_resume.rerun_command`:
--out, --preset and --draw as the rows record them), with a placeholder for the manifest, which rows do not record and
the line says so; a side's outage rows without a partner in the other file are named too (the side's table counts
them, and its mean leaves them out)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.compare import compare
from graph.cli import app

OUTAGE = {"stage": "observe", "kind": "timeout", "message": "no reply in 120 s"}


def _row(key: str, draw: int, reward: float | None, preset: str | None = "fast") -> dict:
    result = ({"status": "ineligible", "reward": None, "reasons": ["x"], "faults": [OUTAGE]}
              if reward is None else {"status": "scored", "reward": reward, "reasons": [], "faults": []})
    row = {"key": f"{key}-{draw}", "path": f"/v/{key}.mp4", "instruction": "stack", "draw": draw,
           "manifest": {"key": key}, "result": result}
    return row if preset is None else {**row, "preset": preset}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _lines(output: str) -> list[str]:
    return [" ".join(line.split()) for line in output.splitlines()]


def _commands(output: str) -> list[str]:
    return [line for line in _lines(output) if line.startswith("raa score-batch")]


def _draws_of_two_draws(tmp_path: Path) -> tuple[list[str], list[str], str]:
    path = _write(tmp_path / "scores.jsonl", [_row("a", 0, 0.2), _row("a", 1, None), _row("a", 3, None),
                                              _row("b", 0, 0.6), _row("b", 1, 0.4), _row("b", 3, None)])
    return (["draws", str(path)], [f"raa score-batch MANIFEST --out {path} --preset fast --draw 1 --retry-ineligible",
                                   f"raa score-batch MANIFEST --out {path} --preset fast --draw 3 --retry-ineligible"],
            "MANIFEST: the manifest")


def _draws_of_draw_0(tmp_path: Path) -> tuple[list[str], list[str], str]:
    """Draw 0 names no --draw, but the preset."""
    path = _write(tmp_path / "scores.jsonl", [_row("a", 0, None), _row("a", 1, 0.4), _row("b", 0, 0.3),
                                              _row("b", 1, 0.6)])
    return (["draws", str(path)], [f"raa score-batch MANIFEST --out {path} --preset fast --retry-ineligible"],
            "MANIFEST: the manifest")


def _draws_without_a_preset(tmp_path: Path) -> tuple[list[str], list[str], str]:
    """score-batch's default preset is no guess for rows that do not record theirs: PRESET, said as unknown."""
    path = _write(tmp_path / "scores.jsonl", [_row("a", 0, None, None), _row("a", 1, 0.4, None)])
    return (["draws", str(path)], [f"raa score-batch MANIFEST --out {path} --preset PRESET --retry-ineligible"],
            "PRESET: the preset")


def _compare_of_two_batches(tmp_path: Path) -> tuple[list[str], list[str], str]:
    a = _write(tmp_path / "a.jsonl", [_row("1", 2, 0.9), _row("2", 2, None)])
    b = _write(tmp_path / "b.jsonl", [_row("1", 2, None, "full"), _row("2", 2, 0.3, "full")])
    return (["compare", str(a), str(b)],
            [f"raa score-batch MANIFEST_A --out {a} --preset fast --draw 2 --retry-ineligible",
             f"raa score-batch MANIFEST_B --out {b} --preset full --draw 2 --retry-ineligible"],
            "MANIFEST_A, MANIFEST_B: the manifests")


@pytest.mark.parametrize("case", [_draws_of_two_draws, _draws_of_draw_0, _draws_without_a_preset,
                                  _compare_of_two_batches])
def test_hint_names_the_batch_of_each_outage(tmp_path, case):
    """Each outage batch's own command (--out, --preset, --draw as its rows record them), and what its
    placeholders stand for."""
    argv, commands, note = case(tmp_path)
    res = CliRunner().invoke(app, ["eval", *argv], terminal_width=300)
    assert res.exit_code == 0, res.output
    assert _commands(res.output) == commands, res.output
    assert note in " ".join(_lines(res.output)), res.output


def test_compare_names_an_unpaired_outage_row(tmp_path):
    """A's outage row 3 has no partner in B: no pair was left out for an outage, and no command was named, though
    the table counted it ("1 (1 outage)") and A's mean left it out."""
    a = _write(tmp_path / "a.jsonl", [_row("1", 0, 0.9), _row("2", 0, 0.5), _row("3", 1, None)])
    b = _write(tmp_path / "b.jsonl", [_row("1", 0, 0.4), _row("2", 0, 0.3)])
    c = compare(a, b)
    assert (c.pairs_outage, c.unpaired_a, c.a.outage) == (0, 1, 1)
    assert c.a.outage_batches == [{"preset": "fast", "draw": 1}] and c.b.outage_batches == []
    assert c.outage_draws_a == [1]
    res = CliRunner().invoke(app, ["eval", "compare", str(a), str(b)], terminal_width=300)
    assert res.exit_code == 0, res.output
    assert _commands(res.output) == [f"raa score-batch MANIFEST_A --out {a} --preset fast --draw 1 --retry-ineligible"]
