"""The test harness's spawned launches (tests/launches.py; tests/test_launches.py is training/launches.py's): the ranks
meet at a store whose port is held from the moment it is chosen, and a launch that fails says why, per rank (the
failure of test_prompt_failures.py::test_two_ranks_stay_in_step_when_one_ranks_only_prompt_fails in a combined run
printed neither which rank failed nor where)."""

from __future__ import annotations

import errno
import os
import re
import socket
import time
from pathlib import Path

import pytest

from tests.launches import rendezvous_store, spawn_ranks


def test_the_rendezvous_port_is_held_until_the_ranks_are_done():
    """A port picked by a probe socket (the old `free_port`) was free only until the probe closed: until rank 0
    bound it (seconds later, after importing torch) any process could take it. The store's port is bound for as long as the ranks run."""
    from torch.distributed import TCPStore

    with rendezvous_store(2) as port:
        with socket.socket() as other, pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))
        assert taken.value.errno == errno.EADDRINUSE
        client = TCPStore("127.0.0.1", port, 2, is_master=False)  # how a rank joins it
        client.set("k", "v")
        assert client.get("k") == b"v"


def _ranks(rank: int, tmp: str, mode: str) -> None:
    import time

    import torch
    import torch.distributed as dist

    print(f"rank {rank} starts", flush=True)
    dist.init_process_group("gloo")  # env://: the harness's store
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    Path(tmp, f"rank{rank}.txt").write_text(str(int(total.item())))
    if mode == "hang":  # out of step: rank 1 waits in a collective rank 0 never joins
        if rank == 1:
            dist.barrier()
        time.sleep(3600)
    if mode == "abort" and rank == 1:  # as gloo's threads aborted a rank at interpreter teardown
        os.abort()
    dist.barrier()
    dist.destroy_process_group()
    Path(tmp, f"rank{rank}.done").write_text("ok")


@pytest.mark.slow  # two spawned processes (~15 s here)
@pytest.mark.distributed
def test_spawned_ranks_meet_at_the_tests_store_and_log_apart(tmp_path):
    spawn_ranks(_ranks, (str(tmp_path), "meet"), tmp_path, deadline_s=120)
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)] == ["3", "3"]
    logs = [(tmp_path / f"rank{r}.log").read_text() for r in (0, 1)]
    assert "rank 0 starts" in logs[0] and "rank 1" not in logs[0] and "rank 1 starts" in logs[1]


@pytest.mark.slow  # two spawned processes, one deadline (~1 min here)
@pytest.mark.distributed
def test_a_hang_fails_with_every_ranks_stack_and_output(tmp_path):
    with pytest.raises(pytest.fail.Exception) as failed:
        spawn_ranks(_ranks, (str(tmp_path), "hang"), tmp_path, deadline_s=45)
    text = str(failed.value)
    assert text.startswith("the ranks hung (no end in 45 s")
    rank0, rank1 = text.split("--- rank 1: ")
    assert "--- rank 0: (no rank0.done)" in rank0 and "rank 0 starts" in rank0 and "in _ranks" in rank0
    assert rank1.startswith("(no rank1.done)") and "rank 1 starts" in rank1 and " in barrier" in rank1


@pytest.mark.slow  # two spawned processes (~15 s here)
@pytest.mark.distributed
def test_a_rank_that_dies_fails_with_the_signal_and_every_ranks_output(tmp_path):
    with pytest.raises(pytest.fail.Exception) as failed:
        spawn_ranks(_ranks, (str(tmp_path), "abort"), tmp_path, deadline_s=120)
    text = str(failed.value)
    assert text.startswith("process 1 terminated with signal SIGABRT")
    rank0, rank1 = text.split("--- rank 1: ")
    assert "--- rank 0: (no rank0.done)" in rank0 and "rank 0 starts" in rank0
    assert rank1.startswith("(no rank1.done)") and "rank 1 starts" in rank1


def _slow_start(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


class SlowStart:
    """An argument of a rank whose unpickling in the spawned process takes ``seconds``: the rank's start-up (as an
    interpreter importing torch on a loaded machine), before `spawn_ranks` has it started."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self) -> tuple:
        return _slow_start, (self.seconds,)


def _started_late(rank: int, tmp: str, _delay: float, mode: str) -> None:
    if mode == "hang":  # a real hang once started
        time.sleep(3600)
    Path(tmp, f"rank{rank}.done").write_text("ok")


@pytest.mark.slow  # two spawned processes, 15 s of start-up (~25 s here)
@pytest.mark.distributed
def test_the_deadline_counts_from_when_the_ranks_have_started(tmp_path):
    """The deadline counted the ranks' start-up too (a spawned interpreter importing torch): serially at load ~14 a
    rank of the 45 s hang test had not even started by its deadline. Start-up that takes longer than the deadline
    (here 15 s against 10) no longer fails ranks that then finish in time."""
    spawn_ranks(_started_late, (str(tmp_path), SlowStart(15), "ok"), tmp_path, deadline_s=10)
    assert [(tmp_path / f"rank{r}.done").read_text() for r in (0, 1)] == ["ok", "ok"]


@pytest.mark.slow  # two spawned processes, one deadline (~20 s here)
@pytest.mark.distributed
def test_a_hang_after_a_slow_start_still_fails_as_a_hang(tmp_path):
    with pytest.raises(pytest.fail.Exception) as failed:
        spawn_ranks(_started_late, (str(tmp_path), SlowStart(4), "hang"), tmp_path, deadline_s=3)
    text = str(failed.value)
    assert text.startswith("the ranks hung (no end in 3 s after they started"), text
    assert "--- rank 0: (no rank0.done)" in text and "--- rank 1: (no rank1.done)" in text
    assert text.count("in _started_late") == 2, text  # each rank's stack, dumped where it hung


def _spawned_children() -> set[int]:  # spawned processes still running (not the resource tracker)
    import psutil

    return {p.pid for p in psutil.Process().children() if "spawn_main" in " ".join(p.cmdline())
            and p.status() != psutil.STATUS_ZOMBIE}


@pytest.mark.slow  # two spawned processes (~10 s here)
@pytest.mark.distributed
def test_ranks_that_do_not_start_fail_as_such_not_as_a_hang(tmp_path):
    """Start-up has a bound of its own: ranks stuck before they started fail saying so, and are killed."""
    before = _spawned_children()
    with pytest.raises(pytest.fail.Exception) as failed:
        spawn_ranks(_started_late, (str(tmp_path), SlowStart(600), "ok"), tmp_path, deadline_s=600, startup_s=3)
    text = str(failed.value)
    assert text.startswith("the ranks did not start (ranks [0, 1] not started within 3 s"), text
    assert "hung" not in text.splitlines()[0], text
    assert _spawned_children() - before == set()


def _first_ends(claim: str) -> str:
    try:  # the first rank to unpickle this ends at once, exit code 0, before it has started
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return claim
    os._exit(0)


class FirstEnds:
    """An argument of a rank whose unpickling ends the first rank to unpickle it (exit code 0: as torch's rank wrapper
    ends a rank that a Ctrl-C interrupted), before `spawn_ranks` has it started."""

    def __init__(self, claim: str) -> None:
        self.claim = claim

    def __reduce__(self) -> tuple:
        return _first_ends, (self.claim,)


@pytest.mark.slow  # two spawned processes (~10 s here)
@pytest.mark.distributed
def test_a_rank_that_ends_before_it_started_fails_at_once(tmp_path):
    """A rank that ended before it started (no marker, exit code 0, which torch's join does not count as a failure)
    could never start: its partner, started and waiting for it (here asleep), was waited on for the whole start-up
    bound, then failed as 'not started within 120 s'. It fails at once, naming that rank."""
    before = _spawned_children()
    with pytest.raises(pytest.fail.Exception) as failed:
        spawn_ranks(_started_late, (str(tmp_path), FirstEnds(str(tmp_path / "claim")), "hang"), tmp_path,
                    deadline_s=600, startup_s=120)
    text = str(failed.value)
    assert re.match(r"the ranks did not start \(ranks \[[01]\] ended before they started \(exit codes \[0\]\)",
                    text), text
    assert _spawned_children() - before == set()


def _deepspeed_ranks(rank: int, tmp: str) -> None:
    import importlib

    import deepspeed
    import torch
    import torch.distributed as dist

    deepspeed.init_distributed(dist_backend="gloo")  # as training.trainer.train starts
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    deepspeed.comm.destroy_process_group()
    # the module itself: the attribute deepspeed.comm.torch is PyTorch (deepspeed.comm re-exports its names)
    patched_by = importlib.import_module("deepspeed.comm.torch").build_shm_op.__module__
    outcome = "ok" if total.item() == 3 else f"sum {total.item()}"
    Path(tmp, f"rank{rank}.done").write_text(outcome if patched_by == "sitecustomize" else f"shm op by {patched_by}")


@pytest.mark.slow  # two spawned DeepSpeed processes (~20 s here)
@pytest.mark.distributed
def test_a_deepspeed_launch_does_not_wait_on_the_machines_extension_builds(tmp_path, monkeypatch):
    """The ranks JIT-built DeepSpeed's shared-memory op at process-group start, in the machine's extensions folder:
    a rebuild after another launch's (~70 s) ran inside the test's deadline, and the lock file of a build that was
    killed (a launch past its deadline) made every later launch wait until its deadline. Here such a lock is left
    in the folder the ranks use: they start and finish all the same. The spawned ranks get `no_shm_op` from
    tests/harness_site's sitecustomize alone, as every other process a test starts."""
    lock = tmp_path / "extensions" / "deepspeed_shm_comm" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))  # the spawned ranks inherit it
    spawn_ranks(_deepspeed_ranks, (str(tmp_path),), tmp_path, deadline_s=90)
    assert lock.exists() and [p.name for p in lock.parent.iterdir()] == ["lock"]  # nothing built there


def _sleep(rank: int) -> None:
    import time

    time.sleep(600)


@pytest.mark.slow  # two spawned processes (~10 s here)
@pytest.mark.distributed
def test_ranks_are_killed_when_the_wait_for_them_is_interrupted(tmp_path, monkeypatch):
    """Anything but a rank's death or the deadline ending the wait (an interrupt: Ctrl-C, a plugin's timeout, here
    a failing stack-dump signal) left every rank running, asleep or waiting in a collective, after the test."""
    import signal

    import psutil

    def ranks() -> list[psutil.Process]:  # spawned processes still running (not the resource tracker)
        return [p for p in psutil.Process().children() if "spawn_main" in " ".join(p.cmdline())
                and p.status() != psutil.STATUS_ZOMBIE]

    before = {p.pid for p in ranks()}
    real_kill = os.kill

    def interrupted(pid: int, sig: int) -> None:
        if sig == signal.SIGUSR1:  # the stack dump `spawn_ranks` asks of a hung rank
            raise RuntimeError("interrupted")
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", interrupted)
    try:
        with pytest.raises(RuntimeError, match="interrupted"):
            spawn_ranks(_sleep, (), tmp_path, deadline_s=1)
        monkeypatch.undo()
        assert [p for p in ranks() if p.pid not in before] == []
    finally:  # what the old code left
        for p in ranks():
            if p.pid not in before:
                p.kill()
                p.wait(10)
