"""Runs that end without a result (in flight when the batch stops: a Ctrl-C, no worker left, a full disk; or in a
worker process that died or was killed for a hang) made model calls that no row reports, and the model usage of a
run is known only from its result: the closing line's usage, "what the batch cost", left them out without saying so.
They are counted (`RowWriter.unfinished`) and the closing lines say that their calls are not in the usage."""

from __future__ import annotations

import asyncio

import pytest

from graph.batch import RowWriter


def _items(*instructions: str) -> list[dict]:
    return [{"key": f"k{i}", "line": i, "path": f"/x/c{i}.mp4", "written": f"c{i}.mp4", "instruction": text,
             "preset": "direct", "draw": 0, "manifest": {}, "error": None} for i, text in enumerate(instructions)]


def test_runs_in_flight_when_the_in_process_batch_stops_are_counted(monkeypatch, tmp_path):
    from graph import batch
    from graph.schemas import RewardResult

    async def score(agent, item, durability, claim_max_age_s):  # noqa: ANN001, ANN202
        if item["instruction"] == "hang":
            await asyncio.Event().wait()
        return RewardResult(status="scored", reward=1.0, preset="direct", run_id=item["key"], usage={"calls": 1})

    monkeypatch.setattr(batch, "score_item", score)
    writer = RowWriter(tmp_path / "o.jsonl")

    async def stopped() -> None:  # two slots: the fast run, then two hanging ones; the stop comes while they hang
        await asyncio.wait_for(batch.run_batch(None, _items("fast", "hang", "hang"), writer, 2, "exit", 60.0), 0.5)

    with pytest.raises(TimeoutError):
        asyncio.run(stopped())
    assert writer.counts["scored"] == 1 and writer.unfinished == 2


def test_runs_of_a_dead_worker_and_in_flight_at_a_stop_are_counted(monkeypatch, tmp_path):
    from graph import batch_procs
    from graph.settings import BackboneSettings
    from tests.batch_fakes import fake_worker

    monkeypatch.setattr(batch_procs, "worker_main", fake_worker)
    monkeypatch.setenv("RAA_FAKE_DELAY_S", "0.1")
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("RAA_FAKE_DIR", str(marks))  # a worker marks each item it takes (tests/batch_fakes.py)
    writer = RowWriter(tmp_path / "o.jsonl")
    real_wait = batch_procs.wait

    def wait(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - a Ctrl-C once the poisoned clip has failed twice
        # and HANG is in flight: a second worker ready only after the first died took POISON's retry first, and
        # HANG went out only to a replacement, so a Ctrl-C at the ineligible row alone found no run in flight
        if writer.counts["ineligible"] and (marks / "taken-k1").exists():
            raise KeyboardInterrupt
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(batch_procs, "wait", wait)
    with pytest.raises(KeyboardInterrupt):
        batch_procs.run_batch_processes(_items("POISON", "HANG"), writer, settings=BackboneSettings(),
                                        preset="direct", processes=2, concurrency=2, run_timeout_s=None)
    # (no run limit: with 60 s, replacement workers slow to start on a loaded machine let HANG time out first)
    # one run each: POISON's worker died twice (two runs cut short), HANG never answers (in flight at the Ctrl-C)
    assert writer.counts == {"scored": 0, "zero": 0, "ineligible": 1} and writer.unfinished == 3, writer.unfinished


def test_the_closing_lines_say_the_unfinished_runs_are_not_in_the_usage(tmp_path, capsys):
    from graph.batch_ending import closing_lines

    writer = RowWriter(tmp_path / "o.jsonl")
    writer.unfinished = 2
    closing_lines(writer, tmp_path / "o.jsonl")
    err = " ".join(capsys.readouterr().err.split())
    assert "2 run(s) ended without a result" in err and "not in the usage above" in err, err


def test_the_closing_lines_name_only_the_ways_this_batch_lost_runs(tmp_path, capsys):
    """An in-process batch has no worker process: its runs cut short were in flight as it stopped, and the line named
    a crashed or killed worker process too; a batch whose runs were lost with a dead worker alone (their clips tried
    again, every clip with its row) read as one that stopped with runs in flight."""
    from graph.batch_ending import closing_lines

    writer = RowWriter(tmp_path / "o.jsonl")
    writer.unfinished = 2  # in process, cancelled at a Ctrl-C
    closing_lines(writer, tmp_path / "o.jsonl")
    err = " ".join(capsys.readouterr().err.split())
    assert "2 run(s) ended without a result" in err and "in flight as the batch stopped" in err, err
    assert "worker" not in err, err
    writer.unfinished = writer.lost = 1  # a worker died under it; the batch then finished
    closing_lines(writer, tmp_path / "o.jsonl")
    err = " ".join(capsys.readouterr().err.split())
    assert "1 run(s) ended without a result" in err and "lost with a worker process" in err, err
    assert "as the batch stopped" not in err, err


def test_the_runs_lost_with_a_dead_worker_are_told_apart(monkeypatch, tmp_path):
    from graph import batch_procs
    from graph.settings import BackboneSettings
    from tests.batch_fakes import fake_worker

    monkeypatch.setattr(batch_procs, "worker_main", fake_worker)
    monkeypatch.setenv("RAA_FAKE_DELAY_S", "0.1")
    writer = RowWriter(tmp_path / "o.jsonl")
    batch_procs.run_batch_processes(_items("POISON", "fine"), writer, settings=BackboneSettings(),
                                    preset="direct", processes=2, concurrency=2, run_timeout_s=None)
    # (no run limit: with 60 s, a loaded machine could end "fine" as a hang) POISON's worker died on each attempt (two runs lost); "fine" finished: no run in flight as the batch ended
    assert writer.counts == {"scored": 1, "zero": 0, "ineligible": 1}, writer.counts
    assert writer.unfinished == 2 and writer.lost == 2, (writer.unfinished, writer.lost)


def test_the_in_process_batch_ends_its_other_runs_before_a_runs_error_leaves_it(monkeypatch, tmp_path):
    """A run's error (a trace database or stage cache that cannot be used, a row that cannot be written) left
    `run_batch` with the other runs still going: the command then closed the trace database under them (a run
    finishing meanwhile could not write its trace, and got an ineligible row or one counted among the traces not
    saved), and they were cancelled only after. They end, counted as in flight, before the error leaves."""
    from graph import batch
    from graph.stores import StoreError

    ended: list[str] = []

    async def score(agent, item, durability, claim_max_age_s):  # noqa: ANN001, ANN202
        if item["instruction"] == "boom":
            raise StoreError("trace database gone")
        try:
            await asyncio.Event().wait()
        finally:
            ended.append(item["key"])

    monkeypatch.setattr(batch, "score_item", score)
    writer = RowWriter(tmp_path / "o.jsonl")

    async def main() -> list[str]:
        with pytest.raises(StoreError):
            await batch.run_batch(None, _items("hang", "boom"), writer, 2, "exit", 60.0)
        return list(ended)  # as the error left run_batch (the saver closes here, in the command)

    assert asyncio.run(main()) == ["k0"] and writer.unfinished == 2, writer.unfinished
