"""Runs that stop early with a checkpoint that --resume continues from: on_signal: checkpoint
(training/preemption.py), where a scheduler's SIGTERM / SIGUSR1 ends a run after the iteration in
progress, and max_skipped_iterations, where a reward that keeps failing does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.launches import deepspeed_launch, launch, rendezvous_store, started, torchrun
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


def test_a_stop_after_the_last_iteration_says_how_to_finish_the_run():
    """Before: a signal during the last iteration's save said "Continue the run with --resume", the same as
    mid-run, though nothing is left to train, and never that the final export had not run."""
    err = str(TrainingStopped(10, signal.SIGTERM, "out/checkpoints/iter_000010", last=True,
                              export_to=Path("out/final")))
    assert "That was the run's last iteration: finish the run with --resume, which trains no further" in err
    assert "the final export to out/final" in err and "python -m training.export --run out`" in err
    err = str(TrainingStopped(10, signal.SIGTERM, "out/checkpoints/iter_000010", last=True))  # export: none
    assert "last iteration" in err and "export" not in err
    assert "last iteration" not in str(TrainingStopped(9, signal.SIGTERM, "out/checkpoints/iter_000009"))


def test_later_signals_do_not_end_a_rank_that_is_saving():
    """A rank often gets the stop several times (scheduler, launcher, the launcher's death); the second one
    used to take the default action, ending the rank in the middle of its checkpoint."""
    code = ("import os, signal, sys, time; sys.path.insert(0, sys.argv[1]); "
            "from training.preemption import StopRequest; stops = StopRequest().install()\n"
            "for sig in (signal.SIGUSR1, signal.SIGTERM, signal.SIGTERM, signal.SIGUSR1):\n"
            "    os.kill(os.getpid(), sig); time.sleep(0.05)\n"
            "print(stops.signum)")
    proc = launch([sys.executable, "-c", code, str(ROOT)], timeout=120, what="signalled process")
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == str(int(signal.SIGUSR1))


LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux-only")
CHAIN = ROOT / "tests" / "launch_chain.py"


def _wait_file(path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert time.monotonic() < deadline, f"no {path.name}"
        time.sleep(0.05)
    return path.read_text()


@LINUX
@pytest.mark.parametrize(("launcher", "signum"), [("launcher", signal.SIGUSR1), ("runner", signal.SIGTERM)])
def test_a_rank_gets_sigterm_when_its_launcher_dies(tmp_path, launcher, signum):
    """launcher: torchrun, which SIGUSR1 ends; runner: the `deepspeed` command, which SIGTERM ends while its
    per-node launcher lives on. Their ranks used to train on as orphans."""
    with started([sys.executable, str(CHAIN), str(tmp_path), launcher]) as proc:  # what is left: killed at the end
        _wait_file(tmp_path / "ready")
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == -signum
        assert int(_wait_file(tmp_path / "signum", timeout=30)) == signal.SIGTERM


@LINUX
def test_a_rank_whose_launcher_died_before_it_looked_stops_at_once(tmp_path):
    """The launcher exited before prctl: the death signal would never come; the parent pid read at start says so."""
    proc = launch([sys.executable, str(CHAIN), str(tmp_path), "rank"], timeout=120, what="rank",
                  extra={"LAUNCH_CHAIN_PARENT": "0"})  # not its parent
    assert proc.returncode == 0 and int((tmp_path / "signum").read_text()) == signal.SIGTERM


def _rows(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_rows(out: Path, n: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while len(_rows(out)) < n:
        assert proc.poll() is None, proc.communicate(timeout=120)[1][-4000:]  # (orphaned ranks may hold the pipe)
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.1)


def _cmd(out: Path, *extra: str) -> list[str]:
    return ["-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress", "false",
            "--tensorboard", "false", "--export", "none", "--checkpoint_every", "1000", *extra]


def _train(out: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return launch([sys.executable, *_cmd(out, *extra)], timeout=timeout, what="training")


@pytest.mark.slow
def test_a_resume_of_a_run_stopped_after_its_last_iteration_only_exports(tmp_path):
    """What `TrainingStopped` tells a run stopped during its last save: --resume trains no further and exports."""
    out = tmp_path / "run"
    proc = _train(out, "--max_iterations", "1")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not (out / "final").exists()
    proc = _train(out, "--max_iterations", "1", "--resume", "--export", "final")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert [r["iteration"] for r in _rows(out)] == [1] and (out / "final" / "export.json").is_file()
    assert json.loads((out / "final" / "export.json").read_text())["iteration"] == 1


HELD_OUT = ("--eval_every", "1", "--eval_samples", "1", "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]")


@pytest.mark.slow
def test_sigterm_saves_the_iteration_and_resume_continues(tmp_path):
    """With an evaluation every iteration the signal lands before one (skipped for the save, then run first by
    the resumed launch: it used to be lost for good) or during one (the run stops right after it and its save,
    not one iteration later): either way eval.jsonl has every iteration once."""
    out = tmp_path / "run"
    with started([sys.executable, *_cmd(out, "--max_iterations", "500", *HELD_OUT)]) as proc:
        _wait_rows(out, 2, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err[-4000:]
    done = len(_rows(out))
    tag = f"iter_{done:06d}"
    assert f"stopped: stopped by SIGTERM after iteration {done}; checkpoint" in err and "Traceback" not in err
    assert (out / "checkpoints" / "latest").read_text().strip() == tag  # checkpoint_every 1000: the signal's save
    proc = _train(out, "--max_iterations", str(done + 1), "--resume", *HELD_OUT)
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
    with started([*torchrun(), *_cmd(out, "--max_iterations", "500")]) as proc:
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
@pytest.mark.distributed
@pytest.mark.parametrize(("launcher", "signum"), [("torchrun", signal.SIGUSR1), ("deepspeed", signal.SIGTERM)])
def test_a_signal_that_ends_the_launcher_stops_its_ranks_with_a_checkpoint(tmp_path, launcher, signum):
    """SIGUSR1 ends torchrun, SIGTERM the `deepspeed` command (its per-node launcher lives on): the ranks used to
    train on to max_iterations, saving nothing at the signal. Now they save the iteration in progress and exit;
    --resume continues from it."""
    import psutil

    out = tmp_path / "run"
    run = _cmd(out, "--max_iterations", "500")[1:]  # without "-m"
    # the deepspeed command has no --standalone: its ranks meet at a store this test holds (a probed port was
    # free only until the probe closed)
    with rendezvous_store(2) as port:
        ds = deepspeed_launch(port)
        cmd, extra = ([*torchrun(), "-m", *run], None) if launcher == "torchrun" else ([*ds.cmd, *run], ds.extra)
        with started(cmd, extra=extra) as proc:
            _wait_rows(out, 2, proc)
            ranks = [c for c in psutil.Process(proc.pid).children(recursive=True)
                     if "training.train" in c.cmdline() and "deepspeed.launcher.launch" not in c.cmdline()]
            assert len(ranks) == 2
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=240)  # the ranks hold its pipes: returns once they have exited too
            assert proc.returncode == -signum  # the launcher itself was ended by the signal
            assert not psutil.wait_procs(ranks, timeout=60)[1]  # (orphaned ranks of a failed run: killed by `started`)
    done = len(_rows(out))
    ckpt = out / "checkpoints" / f"iter_{done:06d}"
    assert done < 500 and (out / "checkpoints" / "latest").read_text().strip() == ckpt.name, err[-4000:]
    assert len(list(ckpt.glob("*optim_states.pt"))) == 2 and f"stopped by SIGTERM after iteration {done}" in err
    if launcher == "deepspeed":
        return
    resume = [*torchrun(), *_cmd(out, "--max_iterations", str(done + 1), "--resume")]
    proc2 = launch(resume, timeout=600, what="the resume")
    assert proc2.returncode == 0, proc2.stderr[-4000:]
    assert [r["iteration"] for r in _rows(out)] == list(range(1, done + 2))


class _ClientStateEngine:
    """Keeps the client state a save hands DeepSpeed and gives it back on load, as DeepSpeed does."""

    def __init__(self) -> None:
        self.client: dict = {}
        self.lr_scheduler = None
        self.global_steps = self.skipped_steps = 0  # DeepSpeed's step counters
        self.optimizer = type("Optimizer", (), {"param_groups": [{"lr": 1.0, "weight_decay": 0.0}]})()

    def save_checkpoint(self, save_dir, tag, client_state, save_latest):  # noqa: ANN001, ANN201
        (Path(save_dir) / tag).mkdir(parents=True, exist_ok=True)
        self.client = client_state

    def load_checkpoint(self, load_dir, tag, load_lr_scheduler_states):  # noqa: ANN001, ANN201
        return str(Path(load_dir) / tag), self.client


def test_the_count_of_iterations_without_an_update_survives_a_resume(tmp_path):
    """max_skipped_iterations counted from 0 again after every resume: a run preempted (or requeued) more often
    than every N iterations trained on without ever updating and never stopped."""
    from training.engine import load, save

    engine = _ClientStateEngine()
    save(engine, tmp_path, 7, data_position=14, local_rank=0, skipped=3)
    assert load(engine, tmp_path, "iter_000007", learning_rate=0.1, weight_decay=0.0, max_iterations=10) == (7, 14, 3)
    del engine.client["skipped_iterations"]  # a checkpoint saved before the count was kept: counts from 0
    assert load(engine, tmp_path, "iter_000007", learning_rate=0.1, weight_decay=0.0, max_iterations=10) == (7, 14, 0)


@pytest.mark.slow
def test_a_reward_that_keeps_failing_stops_the_run_with_a_checkpoint(tmp_path):
    """The reward service is down (nothing listens): every reward is ineligible, no iteration updates, and
    with max_skipped_iterations: 2 the run saves iteration 2 and exits 3 naming the cause; a resume
    counts on from there (the checkpoint keeps the count), so it stops after its first iteration."""
    out = tmp_path / "stalled"
    dead = ["--reward", "http", "--reward_options", '{"url": "http://127.0.0.1:9/score", "startup_wait_s": 0, '
            '"retries": 1, "backoff_s": 0}', "--max_iterations", "6", "--max_skipped_iterations", "2"]
    proc = _train(out, *dead, timeout=600)
    assert proc.returncode == 3, proc.stderr[-4000:]
    assert "iteration 2: 2 iterations in a row without an update" in proc.stderr
    assert "http reward failed" in proc.stderr and "then continue with --resume" in proc.stderr
    assert [r["update_skipped"] for r in _rows(out)] == [1, 1]
    assert (out / "checkpoints" / "iter_000002").is_dir()  # though checkpoint_every is 1000
    proc = _train(out, *dead, "--resume", timeout=600)
    assert proc.returncode == 3 and "iteration 3: 3 iterations in a row" in proc.stderr, proc.stderr[-4000:]
    assert [r["update_skipped"] for r in _rows(out)] == [1, 1, 1]


@pytest.mark.slow  # a model and a held-out evaluation in process (~20 s here)
def test_a_signal_during_the_baseline_evaluation_stops_the_run_after_it(tmp_path, one_rank_env, monkeypatch):
    """The signal handlers were installed after a fresh run's opening (baseline) evaluation: a scheduler's SIGTERM
    during it took the default action and killed the rank, its W&B run and logs left open. The handler is there
    now; the evaluation ends, then the run stops with nothing trained and no checkpoint, and says to start again
    (not to --resume, which has nothing to load)."""
    import training.trainer
    from tests.test_trainer_closing import _cfg
    from training.train import exit_status

    real = training.trainer.evaluate_everywhere
    handlers: list = []

    def evaluating(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        handler = signal.getsignal(signal.SIGTERM)
        handlers.append(handler)
        if isinstance(getattr(handler, "__self__", None), StopRequest):  # never the default action: it ends pytest
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(training.trainer, "evaluate_everywhere", evaluating)
    cfg = _cfg(tmp_path, "--tensorboard", "false", "--eval_every", "1", "--eval_dataset",
               "[{text: 'open the drawer', image_seed: 3}]")
    with pytest.raises(TrainingStopped) as info:
        training.trainer.train(cfg)
    assert isinstance(getattr(handlers[0], "__self__", None), StopRequest), handlers
    text = str(info.value)
    assert text.startswith("stopped by SIGTERM before the first iteration") and "without --resume" in text, text
    assert exit_status(info.value)[0] == 128 + signal.SIGTERM
    run = tmp_path / "run"
    assert _rows(run) == [] and not (run / "checkpoints" / "latest").exists()
    assert [json.loads(line)["iteration"] for line in (run / "eval.jsonl").read_text().splitlines()] == [0]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


def _signalled_rank_run(rank: int, tmp: str, flags: list[str]) -> None:
    """A spawned rank's run; rank 1 alone gets SIGUSR1 at the start of the opening (baseline) evaluation."""
    import training.trainer
    from tests.test_rank_failures import train_and_record

    if rank == 1:
        real = training.trainer.evaluate_everywhere

        def evaluating(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            if isinstance(getattr(signal.getsignal(signal.SIGUSR1), "__self__", None), StopRequest):
                os.kill(os.getpid(), signal.SIGUSR1)  # (never the default action: it would end the rank)
            return real(*args, **kwargs)

        training.trainer.evaluate_everywhere = evaluating
    train_and_record(rank, tmp, flags)


@pytest.mark.slow  # two training processes (~40 s here)
@pytest.mark.distributed
@pytest.mark.parametrize("ds_config", ["ds_zero2.json", "ds_zero3.json"])
def test_a_signal_to_one_rank_during_the_baseline_stops_both_after_it(tmp_path, ds_config):
    """The agreement after the opening evaluation is a collective: rank 1 alone got the signal, and both ranks
    must reach it (else one waits in it while the other trains into the first iteration's collectives) and stop
    there, with nothing trained, under ZeRO-3 (every parameter partitioned) too."""
    from tests.launches import spawn_ranks

    flags = ["--output_dir", str(tmp_path / "run"), "--progress", "false", "--tensorboard", "false",
             "--max_iterations", "2", "--num_steps", "2", "--sde_window", "[0, 1]", "--export", "none",
             "--num_frames", "5", "--ds_config", ds_config, *HELD_OUT]
    spawn_ranks(_signalled_rank_run, (str(tmp_path), flags), tmp_path, deadline_s=150)
    outcomes = [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert outcomes[0] == outcomes[1], outcomes  # the same stop on every rank
    assert outcomes[0].startswith("TrainingStopped: stopped by SIGUSR1 before the first iteration"), outcomes
    run = tmp_path / "run"
    assert _rows(run) == [] and not (run / "checkpoints" / "latest").exists()
    assert [json.loads(line)["iteration"] for line in (run / "eval.jsonl").read_text().splitlines()] == [0]
