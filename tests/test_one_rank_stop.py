"""A failure in one rank's rollouts (training/trainer.py, under training/rank_failures.py ``Tried``) with one rank,
the common single-GPU launch. ``Tried`` let the exception pass through as it was when ``world == 1``: the user read
"error: <text>" (or a traceback) without the iteration, the last checkpoint or the --resume that two ranks'
RankFailed names, and the run's writers (metrics.jsonl, TensorBoard, W&B, the reward runner) were never closed.
One rank now stops as several do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_prompt_failures import one_rank_env  # noqa: F401  (a fixture: train() in this process)
from training.config_io import load_config
from training.rank_failures import RankFailed

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


@pytest.mark.slow  # two training iterations in process (~40 s here)
@pytest.mark.usefixtures("one_rank_env")
def test_one_ranks_rollout_failure_names_the_iteration_the_checkpoint_and_resume(tmp_path, monkeypatch, capsys):
    import training.trainer as tr
    from training.train import exit_status

    decode, calls = tr.decode_group, []

    def broken(*args, **kwargs):  # the first group of iteration 2 (2 prompts an iteration, one rank)
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("VAE decode failed")
        return decode(*args, **kwargs)

    close, closed = tr.close_opened, []

    def closing(*args):
        closed.append(1)
        close(*args)

    monkeypatch.setattr(tr, "decode_group", broken)
    monkeypatch.setattr(tr, "close_opened", closing)
    out = tmp_path / "run"
    cfg = load_config(SMOKE, ["--output_dir", str(out), "--max_iterations", "3", "--checkpoint_every", "1",
                              "--num_steps", "2", "--num_frames", "5", "--progress", "false",
                              "--tensorboard", "false"])
    with pytest.raises(RankFailed) as info:
        tr.train(cfg)
    text = str(info.value)
    assert text.startswith("iteration 2: sampling the iteration's rollouts failed")
    assert "(RuntimeError: VAE decode failed)" in text and "--resume" in text
    assert f"Last checkpoint: {out / 'checkpoints' / 'iter_000001'}" in text
    assert exit_status(info.value) == (1, True) and closed  # the run's files closed before the stop
    err = capsys.readouterr().err
    assert err.count("Traceback") == 1 and "in broken" in err  # the original stack, printed once
