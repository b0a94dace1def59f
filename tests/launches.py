"""Test launches that may hang (a rank out of step waits in a collective forever): past its deadline a launch
is killed whole and fails the test, so nothing of it outlives the test.

* `run_to_end`: a command (torchrun, ``python -m ...``) in its own process group, killed as a group (a plain
  ``subprocess.run(timeout=...)`` killed torchrun alone, and ranks stuck in a collective lived on);
* `spawn_ranks`: ``fn(rank, *args)`` in spawned processes that write ``DIR/rank{r}.done`` ("ok" or the error).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A port the OS has just handed out. Not `random.randint`: the autouse seeding (conftest) made every test
    draw the same port, and a run starting while the previous run's socket was still held failed with
    EADDRINUSE."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_to_end(cmd: Sequence[str], *, timeout: float, what: str, env: Mapping[str, str] | None = None) -> str:
    """Run ``cmd`` in the repository root with ``env`` (default: this environment) and OMP_NUM_THREADS=1; its
    output (stdout and stderr). Fails the test naming ``what`` when it exits non-zero or runs past ``timeout``
    seconds (then its whole process group is killed first)."""
    full_env = {**(os.environ if env is None else env), "OMP_NUM_THREADS": "1"}
    with subprocess.Popen(list(cmd), cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            pytest.fail(f"{what} hung (no exit in {timeout} s):\n{output[-6000:]}")
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{output[-8000:]}"
    return output


def spawn_ranks(fn: Callable[..., None], args: tuple[Any, ...], folder: Path, *, deadline_s: float,
                world: int = 2) -> None:
    """Start ``fn(rank, *args)`` on ``world`` spawned ranks and wait; each writes ``folder/rank{r}.done``. Fails
    the test when they run past ``deadline_s`` (out of step: a rank waits in a collective the other never
    joins; every rank is killed) or when a rank did not write "ok"."""
    import torch.multiprocessing as mp

    ctx = mp.start_processes(fn, args=args, nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + deadline_s
    while not ctx.join(timeout=5):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            pytest.fail(f"the ranks hung; finished: {sorted(p.name for p in folder.glob('rank*.done'))}")
    assert [(folder / f"rank{r}.done").read_text() for r in range(world)] == ["ok"] * world


def release_after(exc: Exception) -> None:
    """In a spawned rank that called ``train()`` directly and caught ``exc``: release the process group as
    ``training.train.main`` does (only for a failure every rank raised). Left to interpreter teardown, gloo's
    threads now and then aborted the process after it had written its outcome (SIGABRT, "terminate called
    without an active exception"), and the spawn failed the test."""
    from training.train import exit_status, release_process_group

    status = exit_status(exc)
    release_process_group(status is not None and status[1])
