"""A row that appears twice is refused naming both its lines ("first at PATH:N"), as `raa eval world-model` names a
question asked twice: `raa eval reward` named neither line of a clip listed twice, and `raa eval compare` / `draws`
only the second, so in a long file (two outputs concatenated) the first had to be hunted down by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.compare import CompareError, compare
from evals.draws import DrawsError, summarize_draws
from evals.reliability import ManifestError
from evals.reward_scorer import load_eval_manifest


def _row(key: str, reward: float) -> dict:
    return {"key": f"h-{key}", "path": f"/v/{key}.mp4", "instruction": "stack", "preset": "full",
            "manifest": {"key": key}, "result": {"status": "scored", "reward": reward, "reasons": [], "faults": []}}


def _write(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_reward_manifest_names_both_lines_of_a_clip_listed_twice(tmp_path):
    row = {"path": "a.mp4", "instruction": "x", "label": "ordinary"}
    m = _write(tmp_path / "m.jsonl", [row, {**row, "path": "b.mp4"}, "", {**row, "path": "./a.mp4"}])
    with pytest.raises(ManifestError, match=rf"{m}:4: clip .*a\.mp4 appears twice \(first at {m}:1;"):
        load_eval_manifest(m)


def test_compare_names_both_lines_of_a_key_twice(tmp_path):
    a = _write(tmp_path / "a.jsonl", [_row("0", 0.2), _row("1", 0.3), _row("0", 0.5)])
    b = _write(tmp_path / "b.jsonl", [_row("0", 0.2)])
    with pytest.raises(CompareError, match=rf"{a}:3: key '0' appears twice \(first at {a}:1\)"):
        compare(a, b)


def test_draws_names_both_lines_of_a_draw_twice(tmp_path):
    path = _write(tmp_path / "s.jsonl", [_row("0", 0.2), _row("1", 0.3), "", _row("0", 0.5)])
    with pytest.raises(DrawsError, match=rf"{path}:4: draw 0 of /v/0\.mp4 \(full\) appears twice \(first at "
                                         rf"{path}:1\)"):
        summarize_draws(path)
