"""A failure in one rank's rollouts (training/trainer.py, under training/rank_failures.py ``Tried``) with one rank,
the common single-GPU launch. ``Tried`` let the exception pass through as it was when ``world == 1``: the user read
"error: <text>" (or a traceback) without the iteration, the last checkpoint or the --resume that two ranks'
RankFailed names, and the run's writers (metrics.jsonl, TensorBoard, W&B, the reward runner) were never closed.
One rank now stops as several do."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config_io import load_config
from training.rank_failures import RankFailed

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def stopped_run(monkeypatch, tmp_path: Path, name: str, nth: int, error: str) -> tuple[RankFailed, list, Path]:
    """A one-rank smoke run of 3 iterations whose `training.trainer.<name>` raises RuntimeError(`error`) on its
    `nth` call: the RankFailed it stops with, the closes of what it opened (training/run_end.py ``Opened``), and the run's folder."""
    import training.trainer as tr

    real, calls = getattr(tr, name), []

    def broken(*args, **kwargs):
        calls.append(1)
        if len(calls) == nth:
            raise RuntimeError(error)
        return real(*args, **kwargs)

    from training.run_end import Opened

    close, closed = Opened.close, []

    def closing(self, exit_code=0):
        if self.log is not None:  # a close with the logs still open (a second one closes nothing)
            closed.append(1)
        close(self, exit_code)

    monkeypatch.setattr(tr, name, broken)
    monkeypatch.setattr(Opened, "close", closing)
    out = tmp_path / "run"
    cfg = load_config(SMOKE, ["--output_dir", str(out), "--max_iterations", "3", "--checkpoint_every", "1",
                              "--num_steps", "2", "--num_frames", "5", "--progress", "false",
                              "--tensorboard", "false"])
    with pytest.raises(RankFailed) as info:
        tr.train(cfg)
    return info.value, closed, out


@pytest.mark.slow  # two training iterations in process (~40 s here)
@pytest.mark.usefixtures("one_rank_env")
def test_one_ranks_rollout_failure_names_the_iteration_the_checkpoint_and_resume(tmp_path, monkeypatch, capsys):
    from training.train import exit_status

    # the first group of iteration 2 (2 prompts an iteration, one rank)
    failed, closed, out = stopped_run(monkeypatch, tmp_path, "decode_group", 3, "VAE decode failed")
    text = str(failed)
    assert text.startswith("iteration 2: sampling the iteration's rollouts failed")
    assert "(RuntimeError: VAE decode failed)" in text and "--resume" in text
    assert f"Last checkpoint: {out / 'checkpoints' / 'iter_000001'}" in text
    assert exit_status(failed) == (1, True) and closed  # the run's files closed before the stop
    err = capsys.readouterr().err
    assert err.count("Traceback") == 1 and "in broken" in err  # the original stack, printed once
