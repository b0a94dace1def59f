"""What a training run opened (training/run_end.py ``Opened``) is closed on every way out of
training/trainer.py ``train``, and every iteration's logs are written (tests/conftest.py ``one_rank_env``: one
rank in process, its process group torn down after)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from training.config_io import load_config

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def _cfg(tmp_path: Path, *flags: str):
    return load_config(SMOKE, ["--output_dir", str(tmp_path / "run"), "--progress", "false", "--max_iterations", "1",
                               "--num_steps", "2", "--sde_window", "[0, 1]", "--export", "none", "--num_frames", "5",
                               "--decode", "preview", *flags])


@pytest.fixture
def closed_logs(monkeypatch):
    """Each `MetricsLog.close` call: its TensorBoard writer (None without one), then the real close."""
    from training.metrics_log import MetricsLog

    calls: list = []
    real_close = MetricsLog.close

    def close(self, exit_code=0):
        calls.append(self.writer)
        real_close(self, exit_code)

    monkeypatch.setattr(MetricsLog, "close", close)
    return calls


class Unloadable:
    """A world model whose VAE and transformer admit no latent shape (``latent_shape`` raises ValueError)."""

    def latent_shape(self, *_a):
        raise ValueError("num_frames 5 does not fit the VAE's temporal compression")


@pytest.mark.parametrize("case", ["model files", "latent shape"])
def test_a_run_that_fails_before_its_engine_is_built_closes_its_logs(tmp_path, one_rank_env, closed_logs,
                                                                       monkeypatch, case):
    """The metrics log (TensorBoard, W&B) is opened before the model loads, so that a W&B run that cannot start
    fails in seconds; but ``close`` was defined only after the engine was built, so a model that could not load
    or a latent-shape ConfigError left TensorBoard's writer open and the W&B run unfinished (a later run in the
    same process, a notebook's, was then handed the old W&B run)."""
    import training.run_start
    import training.trainer as tr
    from training.config import ConfigError

    def model_files(*_a):
        raise OSError("model.safetensors: No such file or directory")

    monkeypatch.setattr(training.run_start, "build_world_model",
                        model_files if case == "model files" else lambda *_a: Unloadable())
    with pytest.raises(OSError if case == "model files" else ConfigError):
        tr.train(_cfg(tmp_path, "--tensorboard", "true"))
    assert len(closed_logs) == 1 and closed_logs[0] is not None  # the writer it opened
    assert closed_logs[0].all_writers is None  # closed (torch's SummaryWriter.close)


@pytest.mark.slow  # a training iteration in process (~20 s here)
def test_an_iterations_metrics_are_written_when_failed_prompts_jsonl_could_not_be(tmp_path, one_rank_env, monkeypatch):
    """``unlogged = unlogged or attempt(write_iteration)``: when failed_prompts.jsonl could not be written in the
    same iteration, the iteration's metrics row, ineligible and rewards lines were never attempted; a checkpoint
    of that iteration then left a hole in metrics.jsonl that a resume never filled. Both writes are attempted, the
    first failure stops the run."""
    from training.metrics_log import MetricsLog
    from training.rank_failures import RankFailed
    from training.trainer import train

    def unwritable(self, iteration, failures):
        raise OSError("failed_prompts.jsonl: Permission denied")

    monkeypatch.setattr(MetricsLog, "write_failed_prompts", unwritable)
    cfg = dataclasses.replace(_cfg(tmp_path, "--tensorboard", "false"), checkpoint_every=1)
    with pytest.raises(RankFailed, match="writing failed_prompts.jsonl failed on rank 0"):
        train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [1]
    assert (tmp_path / "run" / "rewards.jsonl").is_file()
