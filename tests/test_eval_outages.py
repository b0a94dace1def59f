"""`raa eval reward` rows dropped `RewardResult.faults`, so its tables counted a preset whose backbone endpoint
went down like one whose agent could not score the clips: "ineligible 3" either way, and a rerun's reader could
not tell a broken setup from the preset's own ineligibility. Rows now keep their faults, a scorer chunk that
crashed records an internal fault of the harness, and the table counts the ineligible rows an outage caused
(`graph.schemas.Fault.outage`) in table.md, table.csv and summary.json."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

import pytest

from evals.reliability import run_reward_eval
from evals.result_rows import damaged
from evals.table import preset_metrics, render_csv, render_markdown
from evals.table_rows import TableRowError
from graph.schemas import Fault, RewardResult
from tests.test_eval_crashed_usage import CrashingScorer
from tests.test_eval_reliability import FakeScorer, _clips, _judge

OUTAGE = {"stage": "observe", "kind": "transport", "message": "endpoint down"}
OWN = {"stage": "observe", "kind": "invalid_reply", "message": "no JSON in the reply"}


class FaultScorer(FakeScorer):
    """c6 of `full` is ineligible through an outage of the endpoint, c5 through the model's own reply."""

    async def score(self, preset, clips):
        results = await super().score(preset, clips)
        faults = {"c5": Fault(**OWN), "c6": Fault(**OUTAGE)}
        out = []
        for clip, result in zip(clips, results, strict=True):
            name = Path(clip.path).stem
            if name in faults:
                result = RewardResult(reward=None, status="ineligible", reasons=[faults[name].reason()],
                                      preset=preset, faults=[faults[name]])
            out.append(result)
        return out


def _row(reward, faults=None, **extra):
    return {"reward": reward, "status": "ineligible" if reward is None else "scored", "faults": faults, **extra}


def test_rows_keep_their_faults_and_the_table_counts_outages_apart(tmp_path):
    out = asyncio.run(run_reward_eval(_clips(tmp_path), ["full"], tmp_path / "ev", FaultScorer(), _judge(),
                                      concurrency=1))
    rows = {Path(r["path"]).stem: r for r in map(json.loads, (tmp_path / "ev" / "results.jsonl").read_text().splitlines())}
    assert rows["c6"]["faults"] == [OUTAGE] and rows["c5"]["faults"] == [OWN] and rows["c1"]["faults"] == []
    full = out.metrics[0]
    assert (full.ineligible, full.outage) == (2, 1)
    assert "| full | 2 (1 outage) |" in (tmp_path / "ev" / "table.md").read_text()
    (line,) = csv.DictReader(io.StringIO((tmp_path / "ev" / "table.csv").read_text()))
    assert (line["ineligible"], line["ineligible_outage"]) == ("2", "1")
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["metrics"][0]["outage"] == 1


def test_a_crashed_scorer_chunk_is_an_outage_of_the_harness(tmp_path):
    out = asyncio.run(run_reward_eval(_clips(tmp_path), ["full"], tmp_path / "ev", CrashingScorer(), _judge(),
                                      concurrency=1))  # chunks of 2: c3 c4 crash
    rows = {Path(r["path"]).stem: r for r in map(json.loads, (tmp_path / "ev" / "results.jsonl").read_text().splitlines())}
    assert rows["c3"]["faults"][0]["kind"] == "internal" and "worker died" in rows["c3"]["faults"][0]["message"]
    assert out.metrics[0].outage == 2
    # its reason is its fault's, as every other fault's result reads (`graph.run_results.fault_result`): it read
    # "harness: scorer failed: ...", a stage without the kind the batch tools group and retry by
    fault = Fault.model_validate(rows["c3"]["faults"][0])
    assert rows["c3"]["reasons"] == [fault.reason()], rows["c3"]["reasons"]


def test_outages_by_hand():
    rows = [_row(0.5, []), _row(None, [OUTAGE]), _row(None, [OWN]), _row(None, [OWN, OUTAGE]), _row(None)]
    m = preset_metrics("full", rows)
    assert (m.ineligible, m.outage) == (4, 2)  # a row written before faults were recorded is no known outage
    assert "| full | 4 (2 outage) |" in render_markdown([m])
    assert "| full | 0 |" in render_markdown([preset_metrics("full", [_row(0.5, [])])])
    (line,) = csv.DictReader(io.StringIO(render_csv([m])))
    assert line["ineligible_outage"] == "2"


@pytest.mark.parametrize("faults", ["transport", [1], [{"stage": "x"}], {"kind": "transport"}])
def test_faults_that_are_no_fault_records_are_refused_or_rescored(faults):
    with pytest.raises(TableRowError, match="faults"):
        preset_metrics("full", [_row(None, faults, path="/c.mp4")])
    assert damaged({**_row(None, faults), "reasons": ["x"]})
    assert not damaged({**_row(None, [OUTAGE]), "reasons": ["x"]})


@pytest.mark.parametrize("faults", [None, "transport", [1], [{"stage": "x"}]])
def test_the_table_and_retry_ineligible_read_one_faults_field_apart_only_where_it_is_missing_or_bad(faults):
    """One reader of a row's ``faults`` (`graph.schemas.stored_faults`) for the table's outage count and for
    `--retry-ineligible` (`graph.batch_retry.recorded_faults`). Only where it records no fault records do they
    part: the retry reads the reasons, while the table counts no outage (a row written before rows recorded faults
    is no known outage: read from its reasons, old transport rows would move from the agent's ineligible rows to
    the outages) and refuses a bad record."""
    from evals.table_rows import outage, row_faults
    from graph.batch_retry import recorded_faults

    good = _row(None, [OUTAGE])
    assert row_faults(good) == recorded_faults(good) == [Fault.model_validate(OUTAGE)] and outage(good)
    row = {**_row(None, faults), "reasons": ["observe: transport: gave up after 4 attempts"]}
    assert [f.kind for f in recorded_faults(row)] == ["transport"]
    if faults is None:
        assert row_faults(row) == [] and not outage(row)
    else:
        with pytest.raises(ValueError):
            row_faults(row)
