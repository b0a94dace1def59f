"""No checkpoint is saved past an iteration whose logs rank 0 could not write (training/checkpointing.py): rank 0
kept that failure for the next iteration's first gather, but the iteration's checkpoint was saved first (a stop
signal's, a stall's, ``checkpoint_every``'s, the last iteration's), and ``--resume`` from it left the iteration
out of metrics.jsonl for good. A signal or a stall even dropped the failure: the run stopped on TrainingStopped or
RewardsStalled, the unwritten logs named nowhere but in a traceback."""

from __future__ import annotations

import dataclasses

import pytest

from tests.test_trainer_closing import _cfg


def test_a_checkpoint_past_unwritten_logs_is_not_saved_and_the_run_stops_on_them(tmp_path, monkeypatch):
    import training.checkpointing
    from training.engine import latest_tag
    from training.rank_failures import RankFailed, RankFailure
    from training.resume import StateLayout

    saved: list[int] = []
    monkeypatch.setattr(training.checkpointing.ds_engine, "save", lambda engine, ckpt_dir, iteration, *a, **k:
                        saved.append(iteration))
    closed: list[int] = []
    unlogged = RankFailure(0, "writing the iteration's logs", "OSError: [Errno 28] No space left on device", 1)
    with pytest.raises(RankFailed, match=r"iteration 4: writing the iteration's logs failed on rank 0 .*Last "
                                         r"checkpoint: none yet"):
        training.checkpointing.checkpoint(None, tmp_path, 4, 0, skipped=0, rank=0, local_rank=0, world=1,
                                          layout=StateLayout(zero_stage=0, dtype="fp32"), stamp={}, keep=None,
                                          evals=(tmp_path / "eval.jsonl", None), close=closed.append,
                                          unlogged=unlogged)
    assert saved == [] and latest_tag(tmp_path) is None and closed == [1]


@pytest.mark.slow  # a training iteration in process (~20 s here)
def test_a_signal_stop_after_unwritten_logs_stops_on_them_without_a_checkpoint(tmp_path, one_rank_env, monkeypatch):
    """The iteration's metrics.jsonl row could not be written, then a stop signal arrived: the run stopped on
    TrainingStopped with the iteration's checkpoint saved, the failure never reported. It stops on the unwritten
    logs now, its last checkpoint the one before (none here), so --resume redoes the iteration and logs it."""
    from training.engine import latest_tag
    from training.metrics_log import MetricsLog
    from training.preemption import StopRequest
    from training.rank_failures import RankFailed
    from training.trainer import train

    def unwritable(self, row, parts):  # noqa: ANN001, ANN202
        raise OSError("[Errno 28] No space left on device")

    monkeypatch.setattr(MetricsLog, "write_iteration", unwritable)
    monkeypatch.setattr(StopRequest, "agreed", lambda self, device: 15)  # SIGTERM, on every rank
    cfg = dataclasses.replace(_cfg(tmp_path, "--tensorboard", "false", "--max_iterations", "2"), checkpoint_every=5)
    with pytest.raises(RankFailed, match="iteration 1: writing the iteration's logs failed on rank 0"):
        train(cfg)
    assert latest_tag(tmp_path / "run" / "checkpoints") is None


def test_a_divergence_stop_names_the_logs_rank_0_could_not_write(tmp_path):
    """``nonfinite_loss: stop`` raised TrainingDiverged with rank 0's unwritten logs of the iteration dropped: the
    message named the divergence alone, and the missing metrics.jsonl row was explained nowhere but in a traceback.
    It names the failure as RankFailed does."""
    from training.preemption import TrainingDiverged
    from training.rank_failures import RankFailure

    unlogged = RankFailure(0, "writing the iteration's logs", "OSError: [Errno 28] No space left on device", 1)
    message = str(TrainingDiverged(4, 1, tmp_path, unlogged=unlogged))
    assert message.startswith("iteration 4: 1 update loss(es) were NaN or inf, so the policy has diverged")
    assert "writing the iteration's logs failed on rank 0 (OSError: [Errno 28] No space left on device)" in message
    assert "writing the iteration's logs" not in str(TrainingDiverged(4, 1, tmp_path))


@pytest.mark.slow  # a training iteration in process (~20 s here)
def test_a_divergence_stop_after_unwritten_logs_names_them(tmp_path, one_rank_env, monkeypatch):
    """The iteration's metrics.jsonl row could not be written and its loss was NaN: the run stopped on
    TrainingDiverged, whose message left the unwritten logs out (no checkpoint, so they were never agreed)."""
    import training.trainer
    from training.metrics import summarize
    from training.metrics_log import MetricsLog
    from training.preemption import TrainingDiverged

    def unwritable(self, row, parts):  # noqa: ANN001, ANN202
        raise OSError("[Errno 28] No space left on device")

    monkeypatch.setattr(MetricsLog, "write_iteration", unwritable)
    monkeypatch.setattr(training.trainer, "summarize",
                        lambda it, parts: {**summarize(it, parts), "nonfinite_losses": 1})  # a NaN loss
    with pytest.raises(TrainingDiverged, match=r"iteration 1: 1 update loss\(es\) were NaN .*writing the "
                                               r"iteration's logs failed on rank 0 \(OSError: \[Errno 28\]"):
        training.trainer.train(_cfg(tmp_path, "--tensorboard", "false"))
