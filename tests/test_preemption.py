"""Runs that stop early with a checkpoint that --resume continues from: on_signal: checkpoint
(training/preemption.py), where a scheduler's SIGTERM / SIGUSR1 ends a run after the iteration in
progress, and max_skipped_iterations, where a reward that keeps failing does."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from training.preemption import StopRequest, TrainingStopped

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"


def test_stop_request_flags_the_signal_and_restores_the_handlers():
    before = signal.getsignal(signal.SIGUSR1)
    stops = StopRequest().install()
    try:
        assert stops.agreed(torch.device("cpu")) == 0
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.05)
        assert stops.signum == signal.SIGUSR1 and stops.agreed(torch.device("cpu")) == signal.SIGUSR1
        assert signal.getsignal(signal.SIGUSR1) == stops._handle  # still installed: a later signal is ignored
    finally:
        stops.uninstall()
    assert signal.getsignal(signal.SIGUSR1) is before
    err = TrainingStopped(7, signal.SIGTERM, "out/checkpoints/iter_000007")
    assert str(err).startswith("stopped by SIGTERM after iteration 7; checkpoint out/checkpoints/iter_000007")


def test_later_signals_do_not_end_a_rank_that_is_saving():
    """A rank often gets the stop several times (scheduler, launcher, the launcher's death); the second one
    used to take the default action, ending the rank in the middle of its checkpoint."""
    code = ("import os, signal, sys, time; sys.path.insert(0, sys.argv[1]); "
            "from training.preemption import StopRequest; stops = StopRequest().install()\n"
            "for sig in (signal.SIGUSR1, signal.SIGTERM, signal.SIGTERM, signal.SIGUSR1):\n"
            "    os.kill(os.getpid(), sig); time.sleep(0.05)\n"
            "print(stops.signum)")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == str(int(signal.SIGUSR1))


def _rows(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_rows(out: Path, n: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while len(_rows(out)) < n:
        assert proc.poll() is None, proc.communicate()[1][-4000:]
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.1)


def _cmd(out: Path, *extra: str) -> list[str]:
    return ["-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress", "false",
            "--tensorboard", "false", "--export", "none", "--checkpoint_every", "1000", *extra]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return {**env, "OMP_NUM_THREADS": "1"}


HELD_OUT = ("--eval_every", "1", "--eval_samples", "1", "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]")


@pytest.mark.slow
def test_sigterm_saves_the_iteration_and_resume_continues(tmp_path):
    """With an evaluation every iteration the signal lands before one (skipped for the save, then run first by
    the resumed launch: it used to be lost for good) or during one (the run stops right after it and its save,
    not one iteration later): either way eval.jsonl has every iteration once."""
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, *_cmd(out, "--max_iterations", "500", *HELD_OUT)], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_rows(out, 2, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err[-4000:]
    done = len(_rows(out))
    tag = f"iter_{done:06d}"
    assert f"stopped: stopped by SIGTERM after iteration {done}; checkpoint" in err and "Traceback" not in err
    assert (out / "checkpoints" / "latest").read_text().strip() == tag  # checkpoint_every 1000: the signal's save
    proc = subprocess.run([sys.executable, *_cmd(out, "--max_iterations", str(done + 1), "--resume", *HELD_OUT)],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert [r["iteration"] for r in _rows(out)] == list(range(1, done + 2))
    evals = [json.loads(line)["iteration"] for line in (out / "eval.jsonl").read_text().splitlines()]
    assert evals == list(range(0, done + 2)), evals


@pytest.mark.slow
@pytest.mark.distributed
def test_a_signal_to_one_rank_stops_both_after_the_same_iteration(tmp_path):
    """SIGUSR1 to rank 1 alone: the ranks agree (all_reduce) and both save the same iteration."""
    import psutil

    out = tmp_path / "run"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    torchrun = str(Path(sys.executable).parent / "torchrun")
    proc = subprocess.Popen([torchrun, "--nproc_per_node", "2", "--master_port", str(port),
                             *_cmd(out, "--max_iterations", "500")], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_rows(out, 2, proc)
    ranks = {int(c.environ().get("RANK", -1)): c for c in psutil.Process(proc.pid).children(recursive=True)
             if "training.train" in " ".join(c.cmdline())}
    ranks[1].send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0  # the launcher reports its ranks' exit 128 + 10
    done = len(_rows(out))
    ckpt = out / "checkpoints" / f"iter_{done:06d}"
    assert (out / "checkpoints" / "latest").read_text().strip() == ckpt.name, err[-4000:]
    assert len(list(ckpt.glob("*optim_states.pt"))) == 2  # both ranks wrote it
    assert f"stopped by SIGUSR1 after iteration {done}" in err


@pytest.mark.slow
def test_a_reward_that_keeps_failing_stops_the_run_with_a_checkpoint(tmp_path):
    """The reward service is down (nothing listens): every reward is ineligible, no iteration updates, and
    with max_skipped_iterations: 2 the run saves iteration 2 and exits 3 naming the cause; a resume
    counts again from there."""
    out = tmp_path / "stalled"
    dead = ["--reward", "http", "--reward_options", '{"url": "http://127.0.0.1:9/score", "startup_wait_s": 0, '
            '"retries": 1, "backoff_s": 0}', "--max_iterations", "6", "--max_skipped_iterations", "2"]
    proc = subprocess.run([sys.executable, *_cmd(out, *dead)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 3, proc.stderr[-4000:]
    assert "iteration 2: 2 iterations in a row without an update" in proc.stderr
    assert "http reward failed" in proc.stderr and "then continue with --resume" in proc.stderr
    assert [r["update_skipped"] for r in _rows(out)] == [1, 1]
    assert (out / "checkpoints" / "iter_000002").is_dir()  # though checkpoint_every is 1000
    proc = subprocess.run([sys.executable, *_cmd(out, *dead, "--resume")], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 3 and "iteration 4: 2 iterations in a row" in proc.stderr, proc.stderr[-4000:]
