"""fp16's dynamic loss scale at its minimum (DeepSpeed raises a bare ``Exception("Current loss scale already at
minimum ...")`` from ``engine.step()``). The overflow that decides it is all-reduced, so every rank raises it in the
same step, with every collective of the update run. The update runs under training/rank_failures.py ``Tried`` with
``exit_alone`` (a failure on one rank leaves the others in the gradients' reduction), so each of N ranks printed
"this rank stops alone (the other ranks ... stop on its closed connections)" and its own traceback of an exception
that named neither the iteration, the last checkpoint nor what to do. It is now `LossScaleAtMinimum`, which every
rank raises at once: kept and stopped on as RankFailed (the iteration, the checkpoint, --resume) on every rank,
its traceback printed by rank 0 alone."""

from __future__ import annotations

import pytest
from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler

from training.rank_failures import RankFailed, Tried, stop_on
from training.update import LossScaleAtMinimum, optimizer_step


class _Engine:
    """An engine whose step() is DeepSpeed's loss scaler at its minimum seeing an overflow (the real class)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.scaler = DynamicLossScaler(init_scale=1, scale_window=1000, min_scale=1, delayed_shift=1,
                                        consecutive_hysteresis=False)
        self.error = error

    def step(self) -> None:
        if self.error is not None:
            raise self.error
        self.scaler.update_scale(True)


def test_deepspeeds_minimum_loss_scale_is_named_with_what_to_do():
    with pytest.raises(LossScaleAtMinimum, match=r"^fp16 gradients overflowed at DeepSpeed's minimum loss scale "
                                                 r"\(the fp16 section's min_loss_scale\).*bf16") as info:
        optimizer_step(_Engine())
    assert str(info.value.__cause__).startswith("Current loss scale already at minimum")
    with pytest.raises(RuntimeError, match="CUDA out of memory"):  # any other error is left as it is
        optimizer_step(_Engine(RuntimeError("CUDA out of memory")))


def test_every_rank_keeps_it_and_stops_on_rankfailed_rank_0_printing_the_traceback(tmp_path, capsys):
    from training.train import exit_status

    closed: list[int] = []
    failures = []
    for rank in (0, 1):
        with Tried(rank, 2, "updating the policy", exit_alone=lambda code: closed.append(1)) as updating:
            optimizer_step(_Engine())
        failures.append(updating.failure)
    err = capsys.readouterr().err
    assert "stops alone" not in err and closed == []  # closed by stop_on, before RankFailed
    assert err.startswith("rank 0: updating the policy failed:\nTraceback") and "rank 1" not in err, err
    assert [f.rank for f in failures if f is not None] == [0, 1]
    with pytest.raises(RankFailed, match=r"iteration 4: updating the policy failed on rank 0 \(LossScaleAtMinimum"):
        stop_on(failures, 4, tmp_path, closed.append)  # closed with its exit code, 1
    assert closed == [1]
    assert exit_status(LossScaleAtMinimum()) == (1, True)


def test_a_failure_of_one_rank_in_the_update_still_stops_that_rank_alone(capsys):
    with pytest.raises(RuntimeError, match="out of memory"), \
            Tried(1, 2, "updating the policy", exit_alone=lambda code: None):
        optimizer_step(_Engine(RuntimeError("CUDA out of memory")))
    assert "this rank stops alone" in capsys.readouterr().err


def test_another_failure_reported_on_every_rank_elsewhere_still_stops_one_rank_alone_in_the_update(capsys):
    """exit_status's "raised on every rank" (ConfigError, say) holds where the same checks run on every rank; in a
    block whose collectives a failed rank leaves, one rank's error (a check of its own data) kept it and sent it on
    to the next collective while the others waited in the update's: only LossScaleAtMinimum is known to be raised by
    every rank at once there."""
    from training.config import ConfigError

    with pytest.raises(ConfigError), Tried(1, 2, "updating the policy", exit_alone=lambda code: None):
        raise ConfigError("a value only this rank's samples have")
    assert "this rank stops alone" in capsys.readouterr().err


def test_a_single_gpu_runs_stop_on_it_names_no_other_rank(tmp_path):
    """Its text said "... minimum loss scale on every rank", inside RankFailed's one-rank message ("the run stopped
    (its traceback is printed above)"), which was worded so as not to name ranks a single-GPU run does not have."""
    with Tried(0, 1, "updating the policy", exit_alone=lambda code: None) as updating:
        optimizer_step(_Engine())
    with pytest.raises(RankFailed, match=r"LossScaleAtMinimum: fp16 gradients overflowed") as info:
        stop_on([updating.failure], 4, tmp_path)
    assert "every rank" not in str(info.value), info.value
