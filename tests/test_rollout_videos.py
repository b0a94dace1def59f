"""rollout_videos_every: every N-th iteration's rollouts as mp4 files, named in rewards.jsonl with the reward
and advantage that ranked them (training/videos.py, training/trainer.py); a folder that cannot be written
costs the videos, not the run. One process of the smoke config (the 2-rank run is in tests/test_train_e2e.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.launches import launch
from tools.video import read_all_frames
from training.config import ConfigError
from training.config_io import load_config
from training.rewards import build_reward
from training.videos import rollout_video_name

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"


def _train(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--export", "none", "--checkpoint_every", "2", "--max_iterations", "2",
           *extra]
    return launch(cmd, timeout=600, what="training")


@pytest.mark.slow
def test_every_nth_iterations_rollouts_are_saved_with_what_ranked_them(tmp_path):
    out = tmp_path / "run"
    proc = _train(out, "--rollout_videos_every", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "rewards.jsonl").read_text().splitlines()]
    first, second = [r for r in rows if r["iteration"] == 1], [r for r in rows if r["iteration"] == 2]
    assert len(first) == len(second) == 8 and all("video" not in r for r in first)  # 2 prompts x G = 4
    assert [r["video"] for r in second] == [rollout_video_name(2, 0, r["group"], r["sample"]) for r in second]
    assert sorted(p.name for p in (out / "rollout_videos" / "iter_000002").iterdir()) == sorted(
        Path(r["video"]).name for r in second)
    cfg = load_config(SMOKE, [])
    reward = build_reward(cfg.reward or "", cfg.reward_options)
    frames = [read_all_frames(out / r["video"]) for r in second]
    assert all(f.shape == (cfg.num_frames, cfg.height, cfg.width, 3) for f in frames)
    rescored = reward(frames, [r["prompt"] for r in second])
    assert rescored == pytest.approx([r["reward"] for r in second], abs=0.02)  # the clip that earned it (mp4 coding)
    for group in (0, 1):  # group-relative advantages: zero mean, and the better clip the larger advantage
        members = [r for r in second if r["group"] == group]
        advantages = [r["advantage"] for r in members]
        assert abs(sum(advantages)) < 1e-4
        order = np.argsort([r["reward"] for r in members])
        assert list(order) == list(np.argsort(advantages))

    from training.report import write_training_report  # the run's page shows that iteration's groups

    html = write_training_report(out).read_text()
    assert "Training rollouts of iteration 2" in html and html.count('class="strip"') == 8


@pytest.mark.slow
def test_an_unwritable_folder_costs_the_videos_not_the_run(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "rollout_videos").write_text("a file where the folder should be")
    proc = _train(out, "--rollout_videos_every", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("could not write iteration 1's rollout videos") == 1
    rows = [json.loads(line) for line in (out / "rewards.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and all(r["video"] is None and r["reward"] is not None for r in rows)


def test_rollout_videos_every_is_validated():
    with pytest.raises(ConfigError, match="rollout_videos_every must be >= 0"):
        load_config(SMOKE, ["--rollout_videos_every", "-1"])


def test_an_encoder_failure_costs_the_videos_not_the_run(tmp_path, monkeypatch, capsys):
    """PyAV's FFmpegError is not always an OSError or ValueError (ExternalError: libx264 failing, UnknownError,
    EncoderNotFoundError): it escaped write_samples, and the trainer's videos.result() stopped the run."""
    import av

    import tools.video
    from training.videos import write_samples

    def broken(path, frames, fps=16.0):
        raise av.error.ExternalError(-542398533, "Generic error in an external library")

    monkeypatch.setattr(tools.video, "write_video", broken)
    clips = [(rollout_video_name(1, 0, 0, s), np.zeros((5, 8, 8, 3), np.uint8)) for s in range(2)]
    assert write_samples(tmp_path, clips, 16.0, "iteration 1's rollout videos") == [None, None]
    assert capsys.readouterr().err.count("could not write iteration 1's rollout videos") == 1
