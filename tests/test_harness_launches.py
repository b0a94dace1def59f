"""The test harness's launches as a whole (tests/launches.py: `launch`, `started`, `harness_env`,
`deepspeed_launch`): nothing a launch started outlives the test, and no launcher setting of the environment
pytest runs in reaches a launch."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.launches import ROOT, deepspeed_launch, harness_env, launch, rendezvous_store, run_to_end, started

# a launcher stand-in: starts a "rank" in a session of its own (as torchrun does), which writes its pid and sleeps;
# then the launcher sleeps too ("wait") or exits at once, leaving the rank an orphan ("leave")
LAUNCHER = """
import subprocess, sys, time
rank = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
subprocess.Popen([sys.executable, "-c", rank, sys.argv[1]], start_new_session=True)
if sys.argv[2] == "wait":
    time.sleep(600)
"""


def _rank_pid(path: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while not path.is_file() or not path.read_text():
        assert time.monotonic() < deadline, f"the rank wrote no {path.name}"
        time.sleep(0.05)
    return int(path.read_text())


def _gone(pid: int, timeout: float = 10) -> bool:
    """Whether ``pid`` has exited (a zombie nobody reaped yet counts as exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_launch_past_its_deadline_is_killed_with_ranks_in_other_sessions(tmp_path, monkeypatch):
    """``subprocess.run(timeout=...)`` killed the launcher alone: its rank (a session of its own) slept on."""
    monkeypatch.setattr("tests.launches.DUMP_GAP_S", 0.05)  # the stacks are not what this test reads
    pid_file = tmp_path / "rank.pid"
    with pytest.raises(pytest.fail.Exception, match=r"^stand-in hung \(no exit in 5 s"):
        launch([sys.executable, "-c", LAUNCHER, str(pid_file), "wait"], timeout=5, what="stand-in")
    assert _gone(_rank_pid(pid_file))


def test_a_rank_its_launcher_left_behind_ends_with_the_block(tmp_path):
    """The launcher exited (killed, or failed) and its rank lives on, reparented: no longer its descendant nor in
    its process group, it is still found (its `LAUNCH_TAG`) and killed when the test is done with the launch."""
    pid_file = tmp_path / "rank.pid"
    with started([sys.executable, "-c", LAUNCHER, str(pid_file), "leave"]) as proc:
        rank = _rank_pid(pid_file)
        assert proc.wait(timeout=30) == 0 and not _gone(rank, timeout=0.5)  # the orphan runs on
    assert _gone(rank)


# a fork scenario stand-in: forks a child (its session, its output pipe) that writes its pid and sleeps; then the
# scenario sleeps too ("wait") or exits at once, leaving the child behind ("leave")
FORKER = """
import os, sys, time
if os.fork() == 0:
    open(sys.argv[1], "w").write(str(os.getpid()))
    time.sleep(600)
    os._exit(0)
if sys.argv[2] == "wait":
    time.sleep(600)
"""


@pytest.mark.parametrize("scenario", ["wait", "leave"])
def test_a_forked_child_holding_the_output_is_killed_with_its_launch(tmp_path, scenario, monkeypatch):
    """A scenario's hung forked child (``os.fork``, multiprocessing's fork) holds the launch's output pipe:
    ``subprocess.run(timeout=...)`` killed the scenario alone (nothing, when it had exited), then read that pipe to
    its end for ever."""
    monkeypatch.setattr("tests.launches.DUMP_GAP_S", 0.05)  # the stacks are not what this test reads
    pid_file = tmp_path / "child.pid"
    with pytest.raises(pytest.fail.Exception, match=r"^fork scenario hung \(no exit in 5 s"):
        launch([sys.executable, "-c", FORKER, str(pid_file), scenario], timeout=5, what="fork scenario")
    assert _gone(_rank_pid(pid_file))


def test_a_launch_reads_its_output_and_exit_status_apart():
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    proc = launch([sys.executable, "-c", code], timeout=60, what="python")
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")


LAUNCHED_HERE = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "9",
                 "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RUN_ID": "outer", "LOCAL_WORLD_SIZE": "1"}
"""What a launcher gives its rank: pytest's environment when pytest itself runs as a rank, or when a test set
up a rank in this process and left it (the store at port 9 is served by nobody)."""


def test_a_launch_inherits_no_launcher_settings_but_a_test_may_give_them(monkeypatch):
    for key, value in LAUNCHED_HERE.items():
        monkeypatch.setenv(key, value)
    env = harness_env()
    assert not set(LAUNCHED_HERE) & set(env)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT / "tests" / "harness_site")
    given = harness_env(extra={"TORCHELASTIC_USE_AGENT_STORE": "True"})
    assert given["TORCHELASTIC_USE_AGENT_STORE"] == "True" and "MASTER_PORT" not in given


PLAIN_RUN = """
from datetime import timedelta
import torch.distributed as dist
from training.train import _single_process_env
_single_process_env()  # as `python -m training.train` does before its process group starts
dist.init_process_group("gloo", timeout=timedelta(seconds=20))
print(dist.get_world_size(), dist.get_rank())
"""


@pytest.mark.slow  # imports torch in a child (~10 s here)
def test_a_plain_run_under_a_launched_pytest_is_a_run_of_its_own(monkeypatch):
    """With a launcher's settings inherited, ``python -m training.train`` took itself for a rank of that launch
    (RANK and WORLD_SIZE set) and joined, as a client (TORCHELASTIC_USE_AGENT_STORE), a store nobody served:
    the run failed at its process group's start after its timeout."""
    for key, value in LAUNCHED_HERE.items():
        monkeypatch.setenv(key, value)
    proc = launch([sys.executable, "-c", PLAIN_RUN], timeout=120, what="plain run")
    assert proc.returncode == 0 and proc.stdout.split() == ["1", "0"], proc.stderr[-3000:]


@pytest.mark.slow  # two DeepSpeed ranks (~30 s here)
@pytest.mark.distributed
def test_deepspeed_ranks_meet_at_the_store_the_test_holds(tmp_path, monkeypatch):
    """The ``deepspeed`` command has no ``--standalone``: its rank 0 bound ``--master_port``, a port from a probe
    socket that any process could take once the probe closed. Now the test holds the store there from the start
    and the ranks join it, whatever TORCHELASTIC_USE_AGENT_STORE the test's own environment had."""
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "False")
    with rendezvous_store(2) as port:
        ds = deepspeed_launch(port)
        run_to_end([*ds.cmd, "tests.torchrun_probe", str(tmp_path), "deepspeed"], timeout=180, what="deepspeed probe",
                   extra=ds.extra)
    answers = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [a["sum"] for a in answers] == [3.0, 3.0]
    assert [a["port"] for a in answers] == [port, port] and answers[0]["port_held"] is True
    assert [a["agent_store"] for a in answers] == ["True", "True"]
