"""training.train's entry point: a clip size the model cannot generate, a failed run's exit status and
message, and the CPU threads of ranks sharing a machine (split from test_train_config.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from training.config import ConfigError


@pytest.mark.parametrize(("args", "message"), [
    (["--num_frames", "4"], "error: num_frames must be 1 + 4 k with k >= 1 (the conditioning frame plus at least "
                            "one generated latent frame; the smallest is 5), got 4 (the cosmos model's"),
    # one latent frame is all conditioning: this failed at prompt encoding ("need 0 <= num_cond_frames < ...")
    (["--num_frames", "1"], "the smallest is 5), got 1"),
    # 40 px -> 5 latent px, which the VAE takes but the transformer's 2x2 patches do not (a reshape error in
    # diffusers' Cosmos patch embedding at the first rollout)
    (["--height", "40", "--width", "40"], "error: height must be a multiple of 16 (the VAE's 8x spatial compression "
                                          "times the transformer's patch 2), got 40; width must be a multiple of 16"),
])
@pytest.mark.slow
def test_a_clip_size_the_model_cannot_generate_stops_before_the_first_rollout(tmp_path, args, message):
    """A traceback from the first rollout (or prompt encoding) before; now exit 2 right after the model is built."""
    import sys

    from tests.launches import launch

    root = Path(__file__).resolve().parents[1]
    proc = launch([sys.executable, "-m", "training.train", "--config", str(root / "training/configs/smoke.yaml"),
                   "--output_dir", str(tmp_path / "run"), *args, "--progress", "false", "--tensorboard", "false"],
                  timeout=300, what="training", cwd=root)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_failed_run_exits_with_its_status_and_rank_0_says_a_failure_every_rank_raises(tmp_path, capsys,
                                                                                       monkeypatch, followed_launchers):
    """training.train's exit codes (exit_status) and who prints: every rank raises a config error, a stop or a
    divergence, so only rank 0 says it; a trace-store error may hit one rank, so that rank says it; a bug
    keeps its traceback."""
    import training.trainer
    from graph.stores import StoreError
    from training.preemption import TrainingStopped
    from training.train import main

    smoke = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")
    args = ["--config", smoke, "--output_dir", str(tmp_path / "run")]
    cases = [(ConfigError("bad"), 2, True, "error: bad"),
             (StoreError("db locked"), 2, False, "error: db locked"),
             (TrainingStopped(3, 15, "iter_000003"), 128 + 15, True, "stopped: "),
             (training.trainer.TrainingDiverged(4, 3, tmp_path), 1, True, "error: "),
             (training.trainer.RewardsStalled(5, 2, "iter_000005", "endpoint down", tmp_path / "r.jsonl"), 3, True,
              "error: ")]
    for exc, code, every_rank, said in cases:
        def failing(*_a, exc=exc, **_k):
            raise exc
        monkeypatch.setattr(training.trainer, "train", failing)
        for rank in ("0", "1"):
            monkeypatch.setenv("RANK", rank)
            monkeypatch.setenv("WORLD_SIZE", "2")
            assert main(args) == code, exc
            err = capsys.readouterr().err
            assert (said in err) == (rank == "0" or not every_rank), (exc, rank, err)
    assert followed_launchers == [os.getppid()] * 2 * len(cases)  # each launched rank followed the launcher it was given
    monkeypatch.setattr(training.trainer, "train", lambda *_a, **_k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(args)


def test_ranks_sharing_a_machine_split_its_cpus_unless_the_launcher_said():
    """DeepSpeed's launcher sets no OMP_NUM_THREADS: two CPU ranks each using every core ran ~15x slower."""
    from training.train import share_cpu_threads

    assert share_cpu_threads({"LOCAL_SIZE": "2"}, 16) == 8  # deepspeed
    assert share_cpu_threads({"LOCAL_WORLD_SIZE": "3"}, 2) == 1  # never 0
    assert share_cpu_threads({"LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}, 16) is None  # torchrun's choice
    assert share_cpu_threads({}, 16) is None  # one rank: torch's default


def test_a_reward_returning_the_wrong_number_of_rewards_is_a_reported_failure_of_its_rank(tmp_path, capsys,
                                                                                         monkeypatch, followed_launchers):
    """A user's reward function error, raised on the rank(s) whose reward misbehaved (each scores its own clips):
    exit 2 with one line naming the reward, said by the rank that raised it, as a StoreError; was a traceback."""
    import training.trainer
    from training.reward_outcome import RewardLengthError
    from training.train import exit_status, main

    assert exit_status(RewardLengthError("reward 'mine' returned 3 values for 4 videos")) == (2, False)
    smoke = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")

    def failing(*_a, **_k):
        raise RewardLengthError("reward 'mine' returned 3 values for 4 videos")

    monkeypatch.setattr(training.trainer, "train", failing)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["--config", smoke, "--output_dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "error: reward 'mine' returned 3 values for 4 videos"
    assert "Traceback" not in err
    assert followed_launchers == [os.getppid()]
