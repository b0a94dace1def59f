"""The GRPO update (training/update.py ``update_policy``: forwards, backward, optimizer step) under
training/rank_failures.py ``Tried``, and a stop whose ``close()`` raised.

The update ran under neither ``Tried`` nor ``attempt``: an out-of-memory backward ended the run with the bare
exception, no iteration, no last checkpoint or --resume, and the run's files (metrics, TensorBoard, W&B, the
reward runner, the video writer) never closed. And a ``close()`` that raised (W&B's finish, say) before a stop
replaced the stop's message with its own error."""

from __future__ import annotations

import pytest

from training.rank_failures import RankFailed, RankFailure, Tried, stop_on


def _wandb_finish_fails() -> None:
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
