"""`raa score-batch --processes N`: runs spread over spawned worker processes (graph.batch_procs).

The workers build the real `ChatOpenAI` client, so every test here runs against the local
OpenAI-compatible stub server (`tests/openai_stub.py`) answering like the scripted model would.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal

import pytest
from typer.testing import CliRunner

from graph.cli import app
from tests.openai_stub import OpenAIStub, StubReply, script_responder
from tests.test_cli_agent import _env

runner = CliRunner()
INSTRUCTION = "push the red block to the right"


def _manifest(tmp_path, rows: list[dict], tail: str = "") -> object:
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n" + tail)
    return manifest


def _rows(out) -> dict[int, dict]:
    return {r["line"]: r for r in (json.loads(line) for line in out.read_text().splitlines())}


def test_processes_score_every_item_into_one_output_and_trace_db(monkeypatch, tmp_path) -> None:
    from graph.tracing import open_saver, read_trace
    from tests.graph_scripts import full_script, garbage_file, moving_square

    for i in range(4):
        moving_square(tmp_path / f"c{i}.mp4", seed=i)
    garbage_file(tmp_path / "bad.mp4")
    rows = [{"path": f"c{i}.mp4", "instruction": INSTRUCTION, "n": i} for i in range(4)]
    extra = [{"path": "c0.mp4", "instruction": INSTRUCTION, "n": 0},  # a repeated line is scored once
             {"path": "bad.mp4", "instruction": INSTRUCTION}]
    manifest = _manifest(tmp_path, rows + extra, "{broken\n")
    out = tmp_path / "out" / "results.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--concurrency", "3", "--preset", "visual_verify",
            "--processes", "2"]
    with OpenAIStub(responder=script_responder(full_script())) as stub:
        _env(monkeypatch, tmp_path, stub.base_url)
        # _env's 5 s request timeout (one retry) is for failing fast: here a reply that the stub, in this process
        # beside the batch's parent, took over 5 s to serve twice on a loaded machine made a row ineligible
        monkeypatch.setenv("RAA_TIMEOUT_S", "300")
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        got = _rows(out)
        assert sorted(got) == [1, 2, 3, 4, 6, 7]  # line 5 repeats line 1: one row per key
        assert "1 manifest line(s) repeat an earlier one and are scored once: line 5 = line 1" in res.output
        for line in (1, 2, 3, 4):
            result = got[line]["result"]
            assert result["status"] == "scored" and result["reward"] is not None, result
            assert got[line]["manifest"] == {"n": line - 1}
            trace = read_trace(open_saver(tmp_path / "traces.sqlite"), result["run_id"])
            assert [s["node"] for s in trace.steps][-1] == "gate"  # both workers wrote to the one trace DB
        assert got[6]["result"]["reward"] is None and "bad.mp4" in " ".join(got[6]["result"]["reasons"])
        assert got[7]["result"]["reward"] is None and got[7]["result"]["reasons"][0].startswith("manifest: input:")
        assert "scored=4 zero=0 ineligible=2" in res.output
        observes = [b for b in stub.requests if "# stage: observe" in json.dumps(b["messages"][0])]
        assert len(observes) >= 4  # every clip's frames went to the model server (the repeat may hit the cache)
        res = runner.invoke(app, args)  # resume: nothing left
        assert res.exit_code == 0 and "0 to score" in res.output and len(out.read_text().splitlines()) == 6
        before = len(stub.requests)
        res = runner.invoke(app, [*args[:2], "--out", str(tmp_path / "draw1.jsonl"), *args[4:], "--draw", "1"])
        assert res.exit_code == 0 and "scored=4" in res.output, res.output
        observes = [b for b in stub.requests[before:] if "# stage: observe" in json.dumps(b["messages"][0])]
        assert len(observes) >= 4  # the workers scored draw 1 anew, not from draw 0's cache entries


@pytest.mark.slow
def test_a_clip_that_kills_its_worker_gets_an_ineligible_row_and_the_batch_goes_on(monkeypatch, tmp_path) -> None:
    from tests.graph_scripts import full_script, moving_square

    for i in range(3):
        moving_square(tmp_path / f"c{i}.mp4", seed=i)
    rows = [{"path": "c0.mp4", "instruction": INSTRUCTION}, {"path": "c1.mp4", "instruction": "POISON " + INSTRUCTION},
            {"path": "c2.mp4", "instruction": INSTRUCTION}]
    manifest = _manifest(tmp_path, rows)
    out = tmp_path / "results.jsonl"
    answer = script_responder(full_script())
    poisoned: list[int] = []

    def responder(body: dict) -> StubReply:
        if "POISON" in json.dumps(body):  # crash the worker like a decoder segfault would (one run in flight)
            for child in mp.active_children():
                poisoned.append(child.pid)
                os.kill(child.pid, signal.SIGKILL)
            return StubReply(status=500)
        return answer(body)

    with OpenAIStub(responder=responder) as stub:
        _env(monkeypatch, tmp_path, stub.base_url)
        res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--concurrency", "1",
                                  "--preset", "visual_verify", "--processes", "2"])
    assert res.exit_code == 0, res.output
    got = _rows(out)
    assert sorted(got) == [1, 2, 3]
    assert got[1]["result"]["status"] == got[3]["result"]["status"] == "scored"
    bad = got[2]["result"]
    assert bad["reward"] is None and bad["status"] == "ineligible"
    assert "worker process" in bad["reasons"][0] and "signal 9" in bad["reasons"][0] and "2 attempts" in bad["reasons"][0]
    assert len(poisoned) >= 2  # killed on the first attempt and again on the retry
    assert "died (signal 9) with 1 run(s) in flight: 1 to retry alone, 0 requeued, 0 ineligible" in res.output
    assert "died (signal 9) with 1 run(s) in flight: 0 to retry alone, 0 requeued, 1 ineligible" in res.output


def test_no_worker_can_start_raises_and_leaves_items_for_resume(tmp_path) -> None:
    from graph.batch import RowWriter
    from graph.batch_procs import BatchError, run_batch_processes
    from graph.settings import BackboneSettings

    (tmp_path / "a_file").write_text("not a folder")
    settings = BackboneSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="EMPTY", cache_path=None,
                                traces_path=str(tmp_path / "a_file" / "traces.sqlite"))
    items = [{"key": "k1", "line": 1, "path": str(tmp_path / "c.mp4"), "instruction": "x", "preset": "direct", "draw": 0,
              "manifest": {}, "error": None},
             {"key": "k2", "line": 2, "path": "<line 2>", "instruction": "", "preset": "direct", "draw": 0, "manifest": {},
              "error": "manifest line 2: bad"}]
    writer = RowWriter(tmp_path / "out.jsonl")
    with pytest.raises(BatchError, match="no batch worker process could start: .*a_file"):
        run_batch_processes(items, writer, settings=settings, preset="direct", processes=2, concurrency=2)
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert [json.loads(x)["key"] for x in lines] == ["k2"]  # the bad line's row; k1 stays for the resume


def test_invalid_arguments_are_rejected(tmp_path) -> None:
    from graph.batch import RowWriter
    from graph.batch_deaths import exit_text
    from graph.batch_procs import run_batch_processes
    from graph.settings import BackboneSettings

    with pytest.raises(ValueError, match="processes and concurrency"):
        run_batch_processes([], RowWriter(tmp_path / "o.jsonl"), settings=BackboneSettings(), preset="full",
                            processes=0, concurrency=1)
    assert exit_text(-9) == "signal 9" and exit_text(1) == "exit code 1" and exit_text(None) == "no exit status"


def test_an_error_in_the_parent_stops_every_worker(monkeypatch, tmp_path) -> None:
    """The stand-in workers (tests/batch_fakes.py) score as the real ones would, without each importing and building
    the real agent: the stop is the parent's (graph.batch_procs), whatever its workers run."""
    from graph import batch_procs
    from graph.batch import RowWriter
    from graph.settings import BackboneSettings
    from tests.batch_fakes import fake_worker

    class FullDisk(RowWriter):
        def write(self, line: str, status: str) -> None:
            raise OSError("no space left on device")

    monkeypatch.setattr(batch_procs, "worker_main", fake_worker)
    items = [{"key": f"k{i}", "line": i, "path": f"/x/c{i}.mp4", "written": f"c{i}.mp4", "instruction": INSTRUCTION,
              "preset": "direct", "draw": 0, "manifest": {}, "error": None} for i in range(3)]
    with pytest.raises(OSError, match="no space left"):
        batch_procs.run_batch_processes(items, FullDisk(tmp_path / "out.jsonl"), settings=BackboneSettings(),
                                        preset="direct", processes=2, concurrency=2)
    assert mp.active_children() == []  # terminated and reaped, none left running


def test_a_worker_whose_parent_is_gone_cancels_its_runs_and_exits(tmp_path) -> None:
    """The run's model call is answered only when the test ends and the client would wait an hour: the worker exits
    while it is unanswered (before: a 60 s call and an exit within 30 s, which a loaded machine could miss)."""
    import threading
    import time

    from graph.batch_procs import worker_main
    from graph.settings import BackboneSettings
    from tests.graph_scripts import moving_square

    clip = moving_square(tmp_path / "c.mp4")
    item = {"key": "k", "line": 1, "path": str(clip), "instruction": INSTRUCTION, "preset": "visual_verify",
            "draw": 0, "manifest": {}, "error": None}
    answer = threading.Event()

    def responder(body: dict) -> StubReply:  # the run hangs in a call until the test is done
        answer.wait(3600)
        return StubReply(status=500)

    with OpenAIStub(responder=responder) as stub:
        settings = BackboneSettings(base_url=stub.base_url, model="m", api_key="EMPTY", cache_path=None,
                                    traces_path=str(tmp_path / "traces.sqlite"), timeout_s=3600, max_retries=1)
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker_main, args=(child, settings, "visual_verify", "exit"))
        proc.start()
        child.close()
        try:
            assert parent.poll(300) and parent.recv()[0] == "ready"
            parent.send(("item", 0, item))
            deadline = time.monotonic() + 300
            while not stub.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert stub.requests  # the run is waiting on the model server
            parent.close()  # the parent is gone
            proc.join(300)
            assert not proc.is_alive() and not answer.is_set()  # gone before its call could end
        finally:
            answer.set()
            if proc.is_alive():
                proc.kill()
                proc.join()


@pytest.mark.slow
def test_a_tool_model_that_cannot_load_stops_the_batch_at_start(tmp_path, monkeypatch) -> None:
    """V-JEPA 2 weights missing, preset wmreward: every worker stops before it is ready, so the batch stops
    with the reason and scores nothing (before: each clip ran and got an ineligible row, as the
    one-process batch never did)."""
    from graph.batch import RowWriter, read_manifest
    from graph.batch_procs import BatchError, run_batch_processes
    from graph.settings import BackboneSettings
    from tests.graph_scripts import moving_square

    monkeypatch.setenv("RAA_VJEPA_MODEL", str(tmp_path / "no-such-vjepa"))  # the spawned workers inherit it
    moving_square(tmp_path / "c.mp4")
    items = read_manifest(_manifest(tmp_path, [{"path": "c.mp4", "instruction": INSTRUCTION}]), "wmreward")
    settings = BackboneSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="EMPTY", cache_path=None,
                                traces_path=str(tmp_path / "traces.sqlite"))
    with pytest.raises(BatchError, match="no batch worker process could start: .*surprise tool load .*no-such-vjepa"):
        run_batch_processes(items, RowWriter(tmp_path / "out.jsonl"), settings=settings, preset="wmreward",
                            processes=2, concurrency=2)
    assert not (tmp_path / "out.jsonl").exists() or (tmp_path / "out.jsonl").read_text() == ""


# ------------------------------------------------ the parent's bookkeeping, with stand-in workers (tests/batch_fakes.py)
def _fake_batch(monkeypatch, tmp_path, instructions: list[str], logged: list[str] | None = None,
                **kw) -> tuple[dict, dict[int, dict], list[str]]:
    from graph import batch_procs
    from graph.batch import RowWriter
    from graph.settings import BackboneSettings
    from tests.batch_fakes import fake_worker

    monkeypatch.setattr(batch_procs, "worker_main", fake_worker)
    items = [{"key": f"k{i}", "line": i, "path": f"/x/c{i}.mp4", "written": f"c{i}.mp4", "instruction": text,
              "preset": "direct", "draw": 0, "manifest": {}, "error": None} for i, text in enumerate(instructions)]
    out, logged = tmp_path / "out.jsonl", [] if logged is None else logged
    counts = batch_procs.run_batch_processes(items, RowWriter(out), settings=BackboneSettings(), preset="direct",
                                             log=logged.append, **kw)
    return counts, _rows(out), logged


# (2, 6, 8) is the same blame over two workers and twice the clips: slow (`make test-slow`); the default run keeps
# (1, 4, 4), and the spread over two workers stays in test_runs_are_spread_over_the_workers_instead_of_all_going_to_the_first_ready
@pytest.mark.parametrize(("processes", "concurrency", "n", "share"),
                         [(1, 4, 4, 4), pytest.param(2, 6, 8, 3, marks=pytest.mark.slow)])
def test_a_crash_blames_only_the_clip_that_crashes_alone(monkeypatch, tmp_path, processes, concurrency, n, share):
    """Its neighbours in the crash (the worker's `share`) are retried alone and scored; only the clip that kills a
    worker with nothing else in flight gets the ineligible row. Ordered by `poison_after_dispatch`, not by sleeps."""
    from tests.batch_fakes import poison_after_dispatch

    monkeypatch.setenv("RAA_FAKE_DELAY_S", "0")
    poison_after_dispatch(monkeypatch, tmp_path, "k0")
    instructions = ["POISON push"] + ["push"] * (n - 1)
    counts, rows, logged = _fake_batch(monkeypatch, tmp_path, instructions, processes=processes,
                                       concurrency=concurrency)
    assert any(f"died (signal 9) with {share} run(s) in flight: {share} to retry alone" in x for x in logged), logged
    assert counts == {"scored": n - 1, "zero": 0, "ineligible": 1}, logged
    assert sorted(rows) == list(range(n))
    bad = rows[0]["result"]
    assert bad["status"] == "ineligible" and "signal 9" in bad["reasons"][0]
    assert "the last with no other run in flight" in bad["reasons"][0]
    assert all(rows[i]["result"]["status"] == "scored" for i in range(1, n))
    assert any("to retry alone" in line for line in logged)


def test_runs_are_spread_over_the_workers_instead_of_all_going_to_the_first_ready(monkeypatch, tmp_path) -> None:
    """The rows are held until all four items are taken (tests/batch_fakes.py `HOLD`): a worker ready a run's length
    before the other (a loaded machine) could otherwise score all four in turn within its share."""
    from tests.batch_fakes import rows_held_until_taken

    monkeypatch.setenv("RAA_FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("RAA_FAKE_DELAY_S", "0")
    rows_held_until_taken(monkeypatch, tmp_path, 4)
    counts, rows, _ = _fake_batch(monkeypatch, tmp_path, ["push"] * 4, processes=2, concurrency=4)
    assert counts["scored"] == 4
    assert len({row["result"]["run_id"] for row in rows.values()}) == 2  # both worker pids scored clips


def test_a_hung_run_gets_its_worker_killed_and_an_ineligible_row(monkeypatch, tmp_path) -> None:
    """The parent's clock (`batch_procs.time.monotonic`, which its run deadlines read) stands still until the three
    other runs have sent their rows (`sent-<key>`, tests/batch_fakes.py): on a loaded machine one of them took over
    3 s and was killed as a hang too, failing the counts; the hung run's deadline still passes, as soon as they are
    in."""
    from tests.batch_fakes import parent_clock

    monkeypatch.setenv("RAA_FAKE_DIR", str(tmp_path))
    clock = parent_clock(monkeypatch, lambda: len(list(tmp_path.glob("sent-*"))) == 3)
    counts, rows, logged = _fake_batch(monkeypatch, tmp_path, ["HANG push", "push", "push", "push"], processes=2,
                                       concurrency=4, run_timeout_s=3)
    clock.check(rows, logged)
    assert counts == {"scored": 3, "zero": 0, "ineligible": 1}, logged
    reason = rows[0]["result"]["reasons"][0]
    assert "did not finish within 3 s" in reason and "2 attempts" in reason
    assert any("was killed: a run took over 3 s" in line for line in logged)
    with pytest.raises(ValueError, match="run_timeout_s"):
        _fake_batch(monkeypatch, tmp_path, ["push"], processes=1, concurrency=1, run_timeout_s=0)


def test_an_ineligible_row_names_the_cause_of_each_death_when_they_differ(monkeypatch, tmp_path) -> None:
    """Attempt 1 hangs (its worker is killed), attempt 2 raises: the reason names both, in order (before: only
    the last death's cause, "died (exit code 1: ...) on each of 2 attempts"). The parent's clock stands still once
    attempt 1's worker was killed: attempt 2 had 1.5 s to fail, and a parent that a loaded machine let see it only
    later killed it as a hang too ("attempt 2: did not finish within 1.5 s")."""
    from tests.batch_fakes import parent_clock

    monkeypatch.setenv("RAA_FAKE_DIR", str(tmp_path))
    logged: list[str] = []
    clock = parent_clock(monkeypatch, lambda: not any("was killed" in line for line in logged))
    counts, rows, logged = _fake_batch(monkeypatch, tmp_path, ["FLAKY push"], logged, processes=1, concurrency=1,
                                       run_timeout_s=1.5)
    clock.check(rows, logged)  # attempt 2 hanging: fails here within tests/batch_fakes.STILL_BOUND_S
    assert counts == {"scored": 0, "zero": 0, "ineligible": 1}, logged
    assert rows[0]["result"]["reasons"][0] == (
        "batch: internal: the worker process scoring this clip ended on each of 2 attempts, the last with no other run in "
        "flight: attempt 1: did not finish within 1.5 s (its worker process was killed); attempt 2: died (exit code 1: "
        "RuntimeError: decoder state corrupt)")


def test_a_death_reason_names_a_repeated_cause_once_and_stays_short() -> None:
    from graph.batch_deaths import CAUSE_CHARS, MAX_CAUSES, death_fault

    def death_reason(causes: list[str]) -> str:
        return death_fault(causes).reason()

    assert death_reason(["died (signal 9)"] * 2) == (
        "batch: internal: the worker process scoring this clip died (signal 9) on each of 2 attempts, the last with "
        "no other run in flight")
    assert len(death_reason(["died (exit code 1: " + "x" * 5000 + ")"] * 2)) < CAUSE_CHARS + 160
    assert death_reason(["did not finish within 3 s (its worker process was killed)"] * 2).startswith(
        "batch: timeout: this clip's run did not finish within 3 s")
    long = death_reason([f"died (exit code 1: ValueError: {i} {'x' * 5000})" for i in range(9)])
    assert "attempt 4:" in long and "attempt 5:" not in long and long.endswith("; 5 more")
    assert len(long) < 200 + MAX_CAUSES * (CAUSE_CHARS + 20)



def test_workers_that_fail_to_start_are_named_while_the_others_score(monkeypatch, tmp_path) -> None:
    """One of two workers fails before it is ready: the batch goes on with the other and says so (before:
    nothing was said, and the batch ran at half the processes asked for)."""
    monkeypatch.setenv("RAA_FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("RAA_FAKE_START_FAILURES", "1")
    counts, rows, logged = _fake_batch(monkeypatch, tmp_path, ["push"] * 3, processes=2, concurrency=2)
    assert counts == {"scored": 3, "zero": 0, "ineligible": 0}, logged
    assert len({row["result"]["run_id"] for row in rows.values()}) == 1  # the one worker that started
    warnings = [line for line in logged if "failed to start" in line]
    assert len(warnings) == 1, logged
    assert "1 of 2 batch worker processes failed to start" in warnings[0], warnings
    assert "OSError: tool model weights missing: /models/vjepa2" in warnings[0], warnings


def test_workers_dying_with_nothing_in_flight_end_the_batch_saying_why(monkeypatch, tmp_path) -> None:
    """Workers that die after they are ready with no run in flight use up the replacements the batch may start;
    when none is left, BatchError said "no batch worker process could start: " and nothing more (the deaths were no
    start failures), leaving nothing to fix. It names the last death's exit status and error."""
    from graph.batch_procs import BatchError

    monkeypatch.setenv("RAA_FAKE_IDLE_DEATH", "1")
    with pytest.raises(BatchError) as err:
        _fake_batch(monkeypatch, tmp_path, ["push"], processes=1, concurrency=1)
    text = str(err.value)
    assert "exit code 1" in text and "CUDA error: an illegal memory access" in text, text
    assert "3 worker process(es) started" in text and "no run in flight" in text, text
    assert not (tmp_path / "out.jsonl").exists()  # the item stays unscored, for the resume


def test_a_worker_that_cannot_start_leaves_no_pipe_open(monkeypatch, tmp_path) -> None:
    """`Process.start` raising (out of processes or file descriptors) left both ends of the worker's pipe open: a
    leak on each try, in a parent that lives on (a notebook, an eval loop)."""
    from graph import batch_procs
    from graph.batch import RowWriter
    from graph.settings import BackboneSettings

    ctx = mp.get_context("spawn")
    made = []

    def pipe(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - Pipe's
        ends = mp.Pipe(*args, **kwargs)
        made.extend(ends)
        return ends

    def start(self) -> None:  # noqa: ANN001
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(ctx, "Pipe", pipe)
    monkeypatch.setattr(mp.context.SpawnProcess, "start", start)
    items = [{"key": "k0", "line": 0, "path": "/x/c0.mp4", "written": "c0.mp4", "instruction": "push",
              "preset": "direct", "draw": 0, "manifest": {}, "error": None}]
    with pytest.raises(OSError, match="Too many open files"):
        batch_procs.run_batch_processes(items, RowWriter(tmp_path / "out.jsonl"), settings=BackboneSettings(),
                                        preset="direct", processes=1, concurrency=1)
    assert len(made) == 2 and all(end.closed for end in made)
