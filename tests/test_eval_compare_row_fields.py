"""`raa eval compare` took a hand-edited row whose instruction or path is not a string (null, a number) as a clip
named by its text: with the default `--pair-by key` its pair was counted under a made-up instruction "None" (in the
per-instruction table and as a pair naming different instructions), and with `--pair-by instruction` a number 5
paired with the text "5". `raa eval draws` skipped such a line; compare now skips and reports it the same way
(PATH:N and the reason), and the other rows are compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.compare import compare
from tests.test_eval_compare import _scores


def _edited(file: Path, index: int, **fields) -> Path:
    lines = file.read_text().splitlines()
    lines[index] = json.dumps({**json.loads(lines[index]), **fields})
    file.write_text("\n".join(lines) + "\n")
    return file


@pytest.mark.parametrize("value", [None, 5, ["stack"]])
def test_a_row_whose_instruction_is_not_text_is_skipped_and_named(tmp_path, value):
    a = _edited(_scores(tmp_path, "a", {"k0": 0.5, "k1": 0.7}), 1, instruction=value)
    b = _scores(tmp_path, "b", {"k0": 0.4, "k1": 0.6})
    c = compare(a, b)
    assert (c.pairs, c.n, c.a.rows, c.pairs_instruction_differs) == (1, 1, 1, 0)
    assert [r["instruction"] for r in c.by_instruction] == ["stack the blocks"]
    assert [s.line for s in c.a.skipped_lines] == [f"{a}:2"]
    assert "instruction" in c.a.skipped_lines[0].reason


def test_a_number_instruction_does_not_pair_with_its_text(tmp_path):
    a = _edited(_scores(tmp_path, "a", {"k0": 0.5, "k1": 0.7}), 1, instruction=5)
    b = _edited(_scores(tmp_path, "b", {"k0": 0.4, "k1": 0.6}), 1, instruction="5")
    c = compare(a, b, pair_by="instruction")
    assert (c.pairs, c.unpaired_b) == (1, 1) and [s.line for s in c.a.skipped_lines] == [f"{a}:2"]


def test_a_row_whose_path_is_not_text_is_skipped_and_named(tmp_path):
    a = _edited(_scores(tmp_path, "a", {"k0": 0.5, "k1": 0.7}), 0, path=7)
    b = _scores(tmp_path, "b", {"k0": 0.4, "k1": 0.6})
    c = compare(a, b)
    assert (c.pairs, c.a.rows) == (1, 1) and [s.line for s in c.a.skipped_lines] == [f"{a}:1"]


@pytest.mark.parametrize("value", [5, True, ["full"], {"name": "full"}])
def test_a_row_whose_preset_is_not_text_is_skipped_and_named(tmp_path, value):
    """A hand-edited preset 5 read as the preset "5" (`evals.batch_rows.row_preset`): its rows were compared, or
    refused as "held by presets 5 and full", under a name no preset has. score-batch writes presets as text; such a
    line is skipped and named as an instruction of 5 is; a row that records no preset (null) still reads as none."""
    a = _edited(_scores(tmp_path, "a", {"k0": 0.5, "k1": 0.7}), 1, preset=value)
    b = _scores(tmp_path, "b", {"k0": 0.4, "k1": 0.6})
    c = compare(a, b)
    assert (c.pairs, c.a.rows) == (1, 1) and [s.line for s in c.a.skipped_lines] == [f"{a}:2"]
    assert "preset" in c.a.skipped_lines[0].reason and repr(value) in c.a.skipped_lines[0].reason


def test_a_draws_row_whose_preset_is_not_text_is_skipped_and_named(tmp_path):
    from evals.draws import summarize_draws
    from tests.test_eval_draws import _draws

    out = _draws(tmp_path)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rows[0]["preset"] = 5
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = summarize_draws(out)
    assert (s.preset, s.rows) == ("full", 7) and [x.line for x in s.skipped_lines] == [f"{out}:1"]
