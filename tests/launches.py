"""Test launches that may hang (a rank out of step waits in a collective forever): past its deadline a launch
is killed whole and fails the test, so nothing of it outlives the test.

* `run_to_end`: a command (`torchrun`, ``python -m ...``) that must succeed; `launch`: one whose exit status and
  output the test reads; `started`: one the test signals or watches. Each runs in its own session with the
  harness's environment (tests/harness_site, no launcher settings inherited: `harness_env`), and every process
  of it (`launch_members`: marked by `LAUNCH_TAG`, whichever session or parent it has) is killed when the test
  is done with it (a plain ``subprocess.run(timeout=...)`` killed torchrun alone, and ranks stuck in a collective
  lived on); past its deadline a launch fails the test quoting the end of its output, with every process's
  Python stacks;
* `torchrun`: the launch command, ``--standalone``: torchrun binds its rendezvous port itself and holds it;
  `deepspeed_launch`: the ``deepspeed`` command's, whose ranks meet at a store the test holds (`rendezvous_store`);
* `spawn_ranks`: ``fn(rank, *args)`` in spawned processes that write ``DIR/rank{r}.done`` ("ok" or the error);
  they meet at a store this process serves (`rendezvous_store`), each rank's output goes to ``DIR/rank{r}.log``,
  and a failure (a hang, ranks that did not start, a rank that died or did not write "ok") quotes the ranks'
  outcomes and logs, with every thread's Python stack of a hung rank. Its deadline counts from when every rank
  has started (``DIR/rank{r}.started``); start-up has a bound of its own (`STARTUP_S`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]


HARNESS_SITE = ROOT / "tests" / "harness_site"  # its sitecustomize: stack dumps on SIGUSR2, no DeepSpeed shm op
DUMP_SIGNAL = signal.SIGUSR2
OUTPUT_TAIL = 8000  # characters of a failed launch's output quoted


def torchrun(nproc: int = 2) -> list[str]:
    """The torchrun launch of ``nproc`` ranks on this machine, then the script or ``-m module`` and its arguments.
    ``--standalone``: torchrun binds its rendezvous store to a port the OS picks (``localhost:0``) and the ranks
    meet at a store it serves on another such port (TORCHELASTIC_USE_AGENT_STORE), both held from the moment
    they are bound. ``--master_port`` with a port from a probe socket (bound, read, closed) was free only until the
    probe closed: any process on the machine (another session's ranks, gloo's listeners) could take it before
    torchrun bound it, seconds later, and the launch failed (EADDRINUSE) or waited."""
    return [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc_per_node", str(nproc)]


LAUNCHER_VARIABLES = frozenset({
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
    "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"})
"""What torchrun and DeepSpeed's launcher set for a rank (with every ``TORCHELASTIC_*``: `launcher_variable`)."""


def launcher_variable(name: str) -> bool:
    """Whether ``name`` is a launcher's setting for a rank (`LAUNCHER_VARIABLES`, ``TORCHELASTIC_*``)."""
    return name in LAUNCHER_VARIABLES or name.startswith("TORCHELASTIC_")


class DeepSpeedLaunch(NamedTuple):
    """The ``deepspeed`` command for ranks on this machine (`deepspeed_launch`), then ``--module`` and its
    arguments; ``extra``: the environment the launch needs (for `launch`, `started`, `run_to_end`)."""

    cmd: list[str]
    extra: dict[str, str]


def deepspeed_launch(port: int, nproc: int = 2) -> DeepSpeedLaunch:
    """DeepSpeed's launcher for ``nproc`` ranks meeting at the store the test holds on ``port``
    (`rendezvous_store`): it has no ``--standalone``, and its rank 0 binds ``--master_port`` itself, so a port
    from a probe socket was free only until the probe closed and the launch failed (EADDRINUSE) or waited when
    another process took it first. Its ranks join the test's store as clients (TORCHELASTIC_USE_AGENT_STORE,
    which the launcher passes on to them), as torchrun's ranks join its agent's."""
    cmd = [str(Path(sys.executable).parent / "deepspeed"), "--num_gpus", str(nproc), "--master_addr", "127.0.0.1",
           "--master_port", str(port), "--module"]
    return DeepSpeedLaunch(cmd, {"TORCHELASTIC_USE_AGENT_STORE": "True"})


def harness_env(env: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this environment) for a launch, without any launcher's settings for a rank
    (`launcher_variable`: every launch a test starts is a launch of its own), then ``extra`` (which may set
    them: a test-held store, `deepspeed_launch`): one CPU thread, Python's fatal-signal tracebacks
    (PYTHONFAULTHANDLER) and tests/harness_site first on PYTHONPATH (its sitecustomize runs in every Python
    process of the launch: `DUMP_SIGNAL` dumps the stacks, no DeepSpeed shared-memory op: `no_shm_op`).
    Inherited, TORCHELASTIC_USE_AGENT_STORE=True (pytest itself run by torchrun, or a test that set up a rank
    in this process) made the ranks of a ``deepspeed`` launch join as clients a store nobody served (rank 0
    serves it only when it is unset), and they waited until the deadline; an inherited RANK / WORLD_SIZE made
    ``python -m training.train`` a rank of that other launch instead of a plain run."""
    base = {k: v for k, v in (os.environ if env is None else env).items() if not launcher_variable(k)}
    base.update(extra or {})
    rest = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(HARNESS_SITE)]
    path = os.pathsep.join([str(HARNESS_SITE), *rest])
    return {**base, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1", "PYTHONPATH": path}


def run_to_end(cmd: Sequence[str], *, timeout: float, what: str, env: Mapping[str, str] | None = None,
               extra: Mapping[str, str] | None = None) -> str:
    """Run ``cmd`` in the repository root with `harness_env` (``env``, default this environment, and ``extra``);
    its output (stdout and stderr). Fails the test naming ``what``, with the end of the output, when it exits
    non-zero or runs past ``timeout`` seconds: then every process of the launch first writes its threads'
    stacks into the output, and all are killed (`end_launch`)."""
    proc = launch(cmd, timeout=timeout, what=what, env=env, extra=extra, merged=True)
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}):\n{output_tail(proc.stdout)}")
    return proc.stdout


def launch(cmd: Sequence[str], *, timeout: float, what: str, env: Mapping[str, str] | None = None,
           extra: Mapping[str, str] | None = None, cwd: Path = ROOT,
           merged: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in ``cwd`` (`started`: ``env``, ``extra``) to its end, whatever its exit status (the test
    reads it): stdout and stderr apart (``merged``: both in stdout). Past ``timeout`` seconds every process of
    the launch writes its stacks and is killed (`end_launch`), and the test fails naming ``what`` with the end of
    its stderr. ``subprocess.run(timeout=...)`` killed the command alone: the ranks of a launcher, or a plain
    run's children, lived on holding ports, files and the output pipe (which ``run`` then waited on for ever)."""
    with started(cmd, env=env, extra=extra, cwd=cwd, merged=merged) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            end_launch(proc)
            out, err = proc.communicate()
            pytest.fail(f"{what} hung (no exit in {timeout:g} s; the stacks of its processes at the end):\n"
                        f"{output_tail(out if merged else err)}")
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, "" if merged else err)


LAUNCH_TAG = "HARNESS_LAUNCH"
"""The environment variable that marks every process of one launch (`started`): a value of its own per launch,
inherited by every descendant, whichever session it is in and whoever it was reparented to."""


class Launched(subprocess.Popen):
    """A launch `started` began: the process it ran, and the `LAUNCH_TAG` value every process of it carries."""

    def __init__(self, cmd: Sequence[str], *, tag: str, cwd: Path, env: dict[str, str], merged: bool) -> None:
        super().__init__(list(cmd), cwd=cwd, env={**env, LAUNCH_TAG: tag}, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT if merged else subprocess.PIPE, text=True, start_new_session=True)
        self.tag = tag


@contextmanager
def started(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None,
            cwd: Path = ROOT, merged: bool = False) -> Iterator[Launched]:
    """``cmd`` started in ``cwd`` with `harness_env` (``env``, ``extra``) and a `LAUNCH_TAG` of its own, in a
    session of its own, stdout and stderr piped (``merged``: stderr into stdout), for a test to wait on, signal
    or watch. When the block ends every process of the launch still running is killed (`launch_members`), so
    a failed assertion leaves no rank training, nor one whose launcher died before it."""
    import psutil

    proc = Launched(cmd, tag=uuid.uuid4().hex, cwd=cwd, env=harness_env(env, extra), merged=merged)
    try:
        yield proc
    finally:
        for member in launch_members(proc):
            with suppress(psutil.Error):  # it has exited meanwhile
                member.kill()
        with proc:  # closes the pipes and reaps it
            pass


def launch_members(proc: Launched) -> list[Any]:
    """The processes (psutil) of the launch `started` began as ``proc`` that still run: ``proc`` while it has not
    been reaped, then every process carrying its `LAUNCH_TAG` (torchrun starts each rank in a session of its
    own, so its process group missed them; a rank whose launcher died is no longer its descendant)."""
    import psutil

    members = []
    if proc.poll() is None:
        with suppress(psutil.Error):
            members.append(psutil.Process(proc.pid))
    for other in psutil.process_iter():
        with suppress(psutil.Error):
            if other.pid != proc.pid and other.environ().get(LAUNCH_TAG) == proc.tag:
                members.append(other)
    return members


DUMP_GAP_S = 0.5
"""Seconds between two processes' stack dumps (`end_launch`)."""


def end_launch(proc: Launched) -> None:
    """Every process of the launch `started` began as ``proc`` (`launch_members`) writes its stacks
    (`DUMP_SIGNAL`), then is killed. The processes are asked one at a time, `DUMP_GAP_S` apart: they share the
    output pipe, and dumps written at once interleaved mid-line."""
    import psutil

    members = launch_members(proc)
    for member in members:
        with suppress(psutil.Error):
            member.send_signal(DUMP_SIGNAL)
        time.sleep(DUMP_GAP_S)
    time.sleep(1)
    for member in members:
        with suppress(psutil.Error):
            member.kill()


PR_GET_PDEATHSIG = 2
"""prctl option: the signal the kernel sends this process when its parent exits (linux/prctl.h)."""


def death_signal() -> int:
    """This process's parent-death signal (``prctl(PR_GET_PDEATHSIG)``; 0: none, or not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    value = ctypes.c_int(0)
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0) == 0
    return value.value


def output_tail(text: str, chars: int = OUTPUT_TAIL) -> str:
    """The last ``chars`` characters of ``text``, saying how many came before."""
    return text if len(text) <= chars else f"[... {len(text) - chars} characters before]\n{text[-chars:]}"


@contextmanager
def rendezvous_store(world: int) -> Iterator[int]:
    """The port of a TCPStore served by this process for ``world`` ranks, held until the block ends (the ranks,
    spawned or this process itself, join it as clients with TORCHELASTIC_USE_AGENT_STORE=True: `_rank_main`).
    The OS picks the port when the store binds it. A port from a probe socket (bound, read, closed) was free only
    until the probe closed: the ranks bound it seconds later (after importing torch), and any process on the
    machine could take it meanwhile (another session's ranks, whose gloo listeners bind ports the same way),
    leaving rank 0 unable to start the store and rank 1 waiting."""
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False)
    try:
        yield store.port
    finally:
        del store  # closes the port; the ranks have exited


def _rank_main(rank: int, fn: Callable[..., None], args: tuple[Any, ...], folder: str, port: int,
               world: int) -> None:
    """A spawned rank: its output to ``folder/rank{rank}.log``, ``folder/rank{rank}.started`` once torch is imported
    (`started_marker`), SIGUSR1 dumps every thread's stack there
    (`spawn_ranks` sends it to a hung rank), the launcher's environment variables (the store at ``port``
    served by the test: TORCHELASTIC_USE_AGENT_STORE, as torchrun's agent serves it), one CPU thread; then
    ``fn(rank, *args)``. No DeepSpeed shared-memory op: the spawned interpreter runs tests/harness_site's
    sitecustomize (on PYTHONPATH since tests/conftest.py) like every process a test starts."""
    import faulthandler

    log = open(Path(folder) / f"rank{rank}.log", "w", buffering=1)  # open until the rank exits
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True", OMP_NUM_THREADS="1")
    import torch

    torch.set_num_threads(1)
    started_marker(Path(folder), rank).touch()  # start-up done: `spawn_ranks`' deadline counts from here
    fn(rank, *args)


def no_shm_op() -> None:
    """DeepSpeed's CPU backend JIT-builds its shared-memory op (``deepspeed_shm_comm``) at process-group start in
    every rank, though it uses it only for ``inference_all_reduce`` of ranks that ``LOCAL_SIZE`` says share a
    machine (never in a spawned test launch). The build is shared by the whole machine (torch's extensions folder,
    training/build_locks.py): a rank rebuilt it (~70 s here) whenever another launch had built it with another
    command, within its test's deadline, and waited without limit on a lock file a killed build left behind.
    None: the backend goes on without it, as on a machine where it cannot be built. Every process a test starts
    gets it from tests/harness_site's sitecustomize; a test that starts a rank in its own process (the pytest
    process runs no sitecustomize of the harness's) sets it itself."""
    return None


def tail(path: Path, chars: int = 4000) -> str:
    """The last ``chars`` characters of a text file, or a line saying it is missing."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"({path.name}: {type(exc).__name__})"
    return output_tail(text, chars)


def ranks_report(folder: Path, world: int) -> str:
    """Each rank's outcome (``rank{r}.done``) and the end of its log (``rank{r}.log``), for a failure message."""
    parts = []
    for rank in range(world):
        done = folder / f"rank{rank}.done"
        outcome = done.read_text() if done.exists() else f"(no rank{rank}.done)"
        parts.append(f"--- rank {rank}: {outcome}\n{tail(folder / f'rank{rank}.log')}")
    return "\n".join(parts)


STARTUP_S = 300.0
"""Seconds `spawn_ranks` waits for its ranks to start (spawned interpreters unpickling their function, which imports
its module, and importing torch) before any deadline of the test counts. Serially on a loaded 2-core machine (load
12-17) start-up took up to tens of seconds; on two pytest-xdist workers at load ~14 a rank had not started after 45 s."""
POLL_S = 1.0
"""Seconds between two looks at the ranks (`spawn_ranks`)."""


def started_marker(folder: Path, rank: int) -> Path:
    """The file rank ``rank`` creates once it has started (`_rank_main`: before ``fn``)."""
    return folder / f"rank{rank}.started"


def spawn_ranks(fn: Callable[..., None], args: tuple[Any, ...], folder: Path, *, deadline_s: float,
                world: int = 2, startup_s: float = STARTUP_S) -> None:
    """Start ``fn(rank, *args)`` on ``world`` spawned ranks (`_rank_main`: RANK, WORLD_SIZE, MASTER_* set) and
    wait; each writes ``folder/rank{r}.done``. Fails the test, quoting every rank's outcome and log
    (`ranks_report`), when not every rank has started within ``startup_s`` (`STARTUP_S`: "the ranks did not
    start"; at once for a rank that ended before it started, which join lets pass with exit code 0), when they run past ``deadline_s`` counted from when the last of them started (out of step: a rank
    waits in a collective the other never joins; each rank's stacks are dumped into its log, then every rank is
    killed), when a rank exits with an error or a signal, or when a rank did not write "ok". The deadline once
    counted start-up too, and a loaded machine failed ranks as hung that had not yet started. Whatever else ends
    the wait (an interrupt) kills the ranks still running: they were left asleep or waiting in a collective."""
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessException

    with rendezvous_store(world) as port:
        ctx = mp.start_processes(_rank_main, args=(fn, args, str(folder), port, world), nprocs=world, join=False,
                                 start_method="spawn")
        startup_end = time.monotonic() + startup_s
        deadline = None  # set once every rank has started
        try:
            while not ctx.join(timeout=POLL_S):
                now = time.monotonic()
                if deadline is None:
                    # ended with no marker (exit code 0, which join lets pass: torch's wrapper on a Ctrl-C): it never
                    # will start (ended before its marker is looked for: the marker is made before fn runs)
                    ended = [r for r, p in enumerate(ctx.processes)
                             if not p.is_alive() and not started_marker(folder, r).exists()]
                    waiting = [r for r in range(world) if not started_marker(folder, r).exists()]
                    if not waiting:
                        deadline = now + deadline_s
                    elif ended or now > startup_end:
                        codes = [ctx.processes[r].exitcode for r in ended]
                        _kill_ranks(ctx.processes)
                        why = (f"ranks {ended} ended before they started (exit codes {codes})" if ended
                               else f"ranks {waiting} not started within {startup_s:g} s")
                        pytest.fail(f"the ranks did not start ({why}; no deadline counted yet):\n"
                                    f"{ranks_report(folder, world)}")
                elif now > deadline:
                    hung = [p for p in ctx.processes if p.is_alive()]
                    for proc in hung:
                        os.kill(proc.pid, signal.SIGUSR1)  # every thread's stack into its log
                    time.sleep(3)
                    _kill_ranks(ctx.processes)
                    pytest.fail(f"the ranks hung (no end in {deadline_s:g} s after they started; stacks of the ranks "
                                f"still running at the end of their logs):\n{ranks_report(folder, world)}")
        except ProcessException as exc:  # a rank died (a signal, an exit code): the others were stopped
            pytest.fail(f"{exc}\n{ranks_report(folder, world)}")
        finally:  # whatever ended the wait (an interrupt, a plugin's timeout too), no rank outlives it
            _kill_ranks(ctx.processes)
    outcomes = [(folder / f"rank{r}.done").read_text() if (folder / f"rank{r}.done").exists() else None
                for r in range(world)]
    assert outcomes == ["ok"] * world, ranks_report(folder, world)


def _kill_ranks(processes: Sequence[Any]) -> None:
    """Kill every spawned rank still running and reap them all."""
    for proc in processes:
        if proc.is_alive():
            proc.kill()
        proc.join()


def destroy_process_group() -> None:
    """Destroy this process's group (a test's teardown), as training/train.py does once DeepSpeed has taken it
    up (an engine was built on it): DeepSpeed's destroy also drops the groups it caches, which torch's left
    naming the destroyed group, so the next ``deepspeed.initialize`` in this process failed ("Group ... is not
    registered"). torch's when DeepSpeed never took it up (DeepSpeed's then has no backend to destroy)."""
    import torch.distributed as dist

    comm = sys.modules.get("deepspeed.comm")
    if comm is not None and comm.is_initialized():
        comm.destroy_process_group()
    else:
        dist.destroy_process_group()


def release_after(exc: Exception) -> None:
    """In a spawned rank that called ``train()`` directly and caught ``exc``: release the process group as
    ``training.train.main`` does (only for a failure every rank raised). Left to interpreter teardown, gloo's
    threads now and then aborted the process after it had written its outcome (SIGABRT, "terminate called
    without an active exception"), and the spawn failed the test."""
    from training.train import exit_status, release_process_group

    status = exit_status(exc)
    release_process_group(status is not None and status[1])
