"""Rows of a scorer chunk that crashed recorded usage {}, which the usage means of `raa eval reward` (table.md,
table.csv, the console, `raa eval report`) counted as a free run: the calls the chunk spent before it crashed
lowered the preset's cost per clip, unsaid. Now such a row's usage is null with `usage_unknown` saying why, and
the means cover the rows that recorded usage, naming how many did not."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

import pytest

from evals.eval_views import usage_lines
from evals.reliability import run_reward_eval
from evals.table import preset_metrics, render_csv
from tests.test_eval_reliability import FakeScorer, _clips, _judge


class CrashingScorer(FakeScorer):
    """FakeScorer whose chunk holding c3 dies (a worker lost mid-chunk)."""

    async def score(self, preset, clips):
        if any(Path(c.path).stem == "c3" for c in clips):
            raise RuntimeError("worker died")
        return await super().score(preset, clips)


def test_a_crashed_chunk_records_unknown_usage_and_the_means_leave_it_out(tmp_path):
    out = asyncio.run(run_reward_eval(_clips(tmp_path), ["full"], tmp_path / "ev", CrashingScorer(), _judge(),
                                      concurrency=1))  # chunks of 2: c1 c2 | c3 c4 | c5 c6
    rows = {Path(r["path"]).stem: r for r in map(json.loads, (tmp_path / "ev" / "results.jsonl").read_text().splitlines())}
    for name in ("c3", "c4"):
        assert rows[name]["status"] == "ineligible" and rows[name]["reward"] is None
        assert rows[name]["usage"] is None and "crashed" in rows[name]["usage_unknown"]
    assert rows["c1"]["usage"] == {"calls": 4, "images": 40, "input_tokens": 1000, "output_tokens": 100}
    full = out.metrics[0]
    assert full.usage_unknown == 2
    assert full.usage_per_clip["calls"] == pytest.approx(4.0)  # not 4 * 4 / 6: the crashed rows were no free run
    assert "| full | 2 (2 outage) | 0 | 2 | 4.0 | 40.0 | 1000 | 100 | 0.0 | - | 2 |" in (tmp_path / "ev" / "table.md").read_text()
    assert usage_lines(out.metrics)[0].endswith("(usage unknown for 2 rows: not recorded, as when a scorer chunk "
                                                "crashed; means over the other 4)")


def test_rows_without_recorded_usage_are_counted_not_averaged_as_zero():
    rows = [{"reward": 0.5, "usage": {"calls": 3}}, {"reward": None, "usage": None}]
    m = preset_metrics("full", rows)
    assert (m.usage_per_clip["calls"], m.usage_unknown) == (3.0, 1)
    none = preset_metrics("full", [{"reward": None, "usage": None}])
    assert none.usage_per_clip["calls"] is None and none.usage_cell("calls", 1) == "-"
    (row,) = csv.DictReader(io.StringIO(render_csv([none])))
    assert (row["calls_per_clip"], row["input_tokens_per_clip"], row["usage_unknown"]) == ("", "", "1")
