"""The GRPO update (training/update.py ``update_policy``: forwards, backward, optimizer step) under
training/rank_failures.py ``Tried``, and a stop whose ``close()`` raised.

The update ran under neither ``Tried`` nor ``attempt``: an out-of-memory backward ended the run with the bare
exception, no iteration, no last checkpoint or --resume, and the run's files (metrics, TensorBoard, W&B, the
reward runner, the video writer) never closed. And a ``close()`` that raised (W&B's finish, say) before a stop
replaced the stop's message with its own error."""

from __future__ import annotations

import pytest

from tests.test_one_rank_stop import stopped_run
from training.rank_failures import RankFailed, RankFailure, Tried, stop_on


def _wandb_finish_fails(exit_code: int) -> None:  # the stop's exit code: unused
    raise OSError("wandb finish: connection refused")


def test_a_stop_survives_a_close_that_raises(tmp_path, capsys):
    failure = RankFailure(0, "the held-out evaluation", "RuntimeError: boom", 1)
    with pytest.raises(RankFailed) as info:
        stop_on([failure], 3, tmp_path, _wandb_finish_fails)
    assert str(info.value).startswith("iteration 3: the held-out evaluation failed on rank 0 (RuntimeError: boom)")
    err = capsys.readouterr().err
    assert "OSError: wandb finish: connection refused" in err  # the close error is still told


def test_a_rank_exiting_alone_raises_its_own_error_when_close_raises(capsys):
    with pytest.raises(RuntimeError, match="CUDA out of memory"), \
            Tried(1, 2, "updating the policy", exit_alone=_wandb_finish_fails):
        raise RuntimeError("CUDA out of memory")
    assert "OSError: wandb finish: connection refused" in capsys.readouterr().err


@pytest.mark.slow  # two training iterations in process (~40 s here)
@pytest.mark.usefixtures("one_rank_env")
def test_one_ranks_update_failure_names_the_iteration_the_checkpoint_and_resume(tmp_path, monkeypatch, capsys):
    from training.train import exit_status

    # iteration 2's update: its backward ran out of memory
    failed, closed, out = stopped_run(monkeypatch, tmp_path, "update_policy", 2, "CUDA out of memory in backward")
    text = str(failed)
    assert text.startswith("iteration 2: updating the policy failed on rank 0")
    assert "(RuntimeError: CUDA out of memory in backward)" in text and "--resume" in text
    assert f"Last checkpoint: {out / 'checkpoints' / 'iter_000001'}" in text
    assert exit_status(failed) == (1, True) and closed  # the run's files closed before the stop
    err = capsys.readouterr().err
    assert err.count("Traceback") == 1 and "in broken" in err  # the original stack, printed once
