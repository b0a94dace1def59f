"""No checkpoint is saved past an iteration whose logs rank 0 could not write (training/checkpointing.py): rank 0
kept that failure for the next iteration's first gather, but the iteration's checkpoint was saved first (a stop
signal's, a stall's, ``checkpoint_every``'s, the last iteration's), and ``--resume`` from it left the iteration
out of metrics.jsonl for good. A signal or a stall even dropped the failure: the run stopped on TrainingStopped or
RewardsStalled, the unwritten logs named nowhere but in a traceback."""

from __future__ import annotations

import dataclasses
from importlib.machinery import ModuleSpec

import pytest

from tests.test_trainer_closing import _cfg
from tests.test_wandb_log import fake_wandb  # noqa: F401 (a fixture)


def test_a_checkpoint_past_unwritten_logs_is_not_saved_and_the_run_stops_on_them(tmp_path):
    from training.checkpointing import logs_agreed
    from training.engine import latest_tag
    from training.rank_failures import RankFailed, RankFailure

    closed: list[int] = []
    unlogged = RankFailure(0, "writing the iteration's logs", "OSError: [Errno 28] No space left on device", 1)
    with pytest.raises(RankFailed, match=r"iteration 4: writing the iteration's logs failed on rank 0 .*Last "
                                         r"checkpoint: none yet"):
        logs_agreed(unlogged, None, 4, tmp_path, closed.append)  # before the checkpoint (training/trainer.py)
    assert latest_tag(tmp_path) is None and closed == [1]


def test_a_wandb_failure_alone_is_handed_back_for_the_checkpoint_to_be_saved_first(tmp_path):
    """W&B alone failing left the files --resume keeps written: no reason to refuse the checkpoint."""
    from training.checkpointing import logs_agreed
    from training.rank_failures import RankFailure

    closed: list[int] = []
    unsynced = RankFailure(0, "logging the iteration to W&B", "ConnectionResetError: service gone", 1)
    assert logs_agreed(None, unsynced, 4, tmp_path, closed.append) == unsynced and closed == []
    assert logs_agreed(None, None, 4, tmp_path, closed.append) is None


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


def _eval_cfg(tmp_path, *flags: str):  # noqa: ANN202
    """Two iterations, a checkpoint and a held-out evaluation after each (and a baseline one)."""
    return dataclasses.replace(_cfg(tmp_path, "--tensorboard", "false", "--max_iterations", "2", "--eval_every", "1",
                                    "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]", *flags),
                               checkpoint_every=1)


def _iterations(path):  # noqa: ANN001, ANN202
    import json

    return [json.loads(line)["iteration"] for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.mark.slow  # a training iteration in process (~20 s here)
def test_a_wandb_failure_between_checkpoints_saves_its_iteration(tmp_path, one_rank_env, fake_wandb,  # noqa: F811
                                                                 monkeypatch):
    """W&B failed on iteration 1 of a run checkpointing every 5: the run stopped at iteration 2's first gather,
    its last checkpoint an older one (none here), and up to ``checkpoint_every - 1`` iterations were trained
    again after a W&B hiccup. With W&B on, rank 0's logs are agreed after every iteration (one small gather), and
    the failing iteration is saved."""
    import training.run_start
    from tests.test_wandb_log import _Run
    from training.engine import latest_tag
    from training.rank_failures import RankFailed
    from training.trainer import train

    def log(self, data, step=None):  # noqa: ANN001, ANN202
        raise ConnectionResetError("the wandb service process is gone")

    monkeypatch.setattr(_Run, "log", log)
    monkeypatch.setattr(training.run_start, "require_wandb", lambda project: None)
    monkeypatch.setattr(fake_wandb[0], "__spec__", ModuleSpec("wandb", None), raising=False)
    cfg = dataclasses.replace(_cfg(tmp_path, "--tensorboard", "false", "--max_iterations", "2", "--wandb_project",
                                   "grpo"), checkpoint_every=5)
    with pytest.raises(RankFailed, match=r"iteration 1: logging the iteration to W&B failed .*iter_000001; fix"):
        train(cfg)
    assert latest_tag(tmp_path / "run" / "checkpoints") == "iter_000001"


@pytest.mark.slow  # a training iteration and two evaluations in process (~30 s here)
def test_a_wandb_failure_keeps_the_checkpoint_whose_logs_were_written(tmp_path, one_rank_env, fake_wandb,  # noqa: F811
                                                                      monkeypatch):
    """W&B's ``run.log`` raised (its service process gone) for iteration 1, whose metrics.jsonl row was written:
    the iteration's checkpoint was refused as for unwritten logs, and the W&B error also cut the iteration's
    ineligible.jsonl and rewards.jsonl lines short. metrics.jsonl, not W&B, is what ``--resume`` keeps (a W&B run
    rewound to the checkpoint is sent its rows again): the logs are written, the checkpoint saved, the held-out
    evaluation (whose rows go to W&B too) left to the resumed run, and the run stops on the W&B failure there; after
    the last iteration, saying that the resume only runs what the stop skipped."""
    import training.run_start
    from tests.test_wandb_log import _Run
    from training.engine import latest_tag
    from training.rank_failures import RankFailed
    from training.trainer import train

    def log(self, data, step=None):  # noqa: ANN001, ANN202
        if any(key.startswith("train/") for key in data):
            raise ConnectionResetError("the wandb service process is gone")
        self.calls.append(("log", data, step))

    monkeypatch.setattr(_Run, "log", log)
    monkeypatch.setattr(training.run_start, "require_wandb", lambda project: None)  # the stand-in is no package,
    monkeypatch.setattr(fake_wandb[0], "__spec__", ModuleSpec("wandb", None), raising=False)  # which diffusers probes
    with pytest.raises(RankFailed, match=r"iteration 1: logging the iteration to W&B failed on rank 0 "
                                         r"\(ConnectionResetError: .*Last checkpoint: .*iter_000001; that was the "
                                         r"run's last iteration: once W&B is back, finish the run with --resume") as info:
        train(dataclasses.replace(_eval_cfg(tmp_path, "--wandb_project", "grpo"), max_iterations=1))
    assert str(info.value).endswith("runs what the stop skipped (the held-out evaluation of iteration 1)")
    run = tmp_path / "run"
    assert latest_tag(run / "checkpoints") == "iter_000001"
    assert _iterations(run / "metrics.jsonl") == [1]
    assert set(_iterations(run / "rewards.jsonl")) == {1}
    assert _iterations(run / "eval.jsonl") == [0]  # the resumed run evaluates iteration 1 first (pending_eval)


@pytest.mark.slow  # a training iteration and an evaluation in process (~25 s here)
def test_no_evaluation_is_spent_on_an_iteration_whose_logs_were_not_written(tmp_path, one_rank_env, monkeypatch):
    """The held-out evaluation ran before the checkpoint's agreement on rank 0's unwritten logs: a whole evaluation
    was spent, and its row written to eval.jsonl, for an iteration the run then stopped on without saving."""
    from training.engine import latest_tag
    from training.metrics_log import MetricsLog
    from training.rank_failures import RankFailed
    from training.trainer import train

    def unwritable(self, row, parts):  # noqa: ANN001, ANN202
        raise OSError("[Errno 28] No space left on device")

    monkeypatch.setattr(MetricsLog, "write_iteration", unwritable)
    with pytest.raises(RankFailed, match="iteration 1: writing the iteration's logs failed on rank 0"):
        train(_eval_cfg(tmp_path))
    assert latest_tag(tmp_path / "run" / "checkpoints") is None
    assert _iterations(tmp_path / "run" / "eval.jsonl") == [0]


@pytest.mark.slow  # two launches: a training iteration and three evaluations in process (~45 s here)
def test_the_resume_after_a_wandb_failure_on_an_evaluation_iteration_evaluates_it_once(tmp_path, one_rank_env,
                                                                                        fake_wandb,  # noqa: F811
                                                                                        monkeypatch):
    """W&B failed on the last iteration, an evaluation due: the checkpoint was saved, the evaluation left to the
    resumed run. Resumed with W&B back, the run trains no further, evaluates that iteration (once: eval.jsonl,
    eval_rewards.jsonl and W&B get its rows one time) and keeps the first launch's training rows."""
    from training.rank_failures import RankFailed
    from training.trainer import train

    down = [True]
    _wandb_log_fails(monkeypatch, fake_wandb, lambda data, step: down[0] and any(k.startswith("train/") for k in data))
    cfg = dataclasses.replace(_eval_cfg(tmp_path, "--wandb_project", "grpo"), max_iterations=1)
    with pytest.raises(RankFailed, match="logging the iteration to W&B failed"):
        train(cfg)
    run = tmp_path / "run"
    rewards = (run / "rewards.jsonl").read_text()
    down[0] = False
    del fake_wandb[1][:]
    train(dataclasses.replace(cfg, resume=True))
    assert _iterations(run / "metrics.jsonl") == [1]
    assert (run / "rewards.jsonl").read_text() == rewards  # no iteration trained again
    assert _iterations(run / "eval.jsonl") == [0, 1]
    assert set(_iterations(run / "eval_rewards.jsonl")) == {0, 1}
    logged = [(sorted({key.split("/")[0] for key in data if "/" in key}), step) for _, data, step in
              (call for call in fake_wandb[1] if call[0] == "log")]
    assert logged == [(["train"], 1), (["eval"], 1)]  # the kept row sent again (trim_after), then the evaluation


def test_a_wandb_failure_in_an_evaluation_leaves_its_files_whole(tmp_path, fake_wandb, monkeypatch):  # noqa: F811
    """W&B's ``run.log`` raised on the held-out row, which went to W&B between eval.jsonl and eval_rewards.jsonl:
    the evaluation's samples were never written. For the evaluation a resumed run owes (a stop, or W&B failing,
    skipped it), the next resume found its eval.jsonl row and did not evaluate again: eval_rewards.jsonl lacked
    that evaluation for good. The files are written first, then W&B (as an iteration's: `write_iteration`)."""
    import training.evaluate as ev
    from tests.test_eval_forward_failure import HELD_OUT, SMOKE
    from tests.test_wandb_log import _Run
    from training.config_io import load_config
    from training.metrics_log import MetricsLog
    from training.models import build_world_model

    def log(self, data, step=None):  # noqa: ANN001, ANN202
        raise ConnectionResetError("the wandb service process is gone")

    monkeypatch.setattr(_Run, "log", log)
    monkeypatch.setattr(fake_wandb[0], "__spec__", ModuleSpec("wandb", None), raising=False)  # diffusers probes it
    cfg = load_config(SMOKE, ["--eval_samples", "1", "--num_steps", "2", "--output_dir", str(tmp_path)])
    model = build_world_model(cfg, "cpu").eval()
    metrics = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False, wandb_project="grpo")
    try:  # W&B alone is handed back, for the caller to save the iteration's checkpoint before it stops
        row, unsynced = ev.evaluate_everywhere(model, cfg, HELD_OUT[:1], lambda videos, prompts, **meta: [0.5] * len(
            videos), metrics, tmp_path / "checkpoints", iteration=2, rank=0, world=1, places=None, key=None,
            close=lambda code: None)
    finally:
        metrics.close()
    assert row["iteration"] == 2 and unsynced is not None
    assert (unsynced.rank, unsynced.what) == (0, "logging the held-out evaluation to W&B")
    assert _iterations(tmp_path / "eval.jsonl") == [2]
    assert _iterations(tmp_path / "eval_rewards.jsonl") == [2]


@pytest.mark.slow  # a training iteration and two evaluations in process (~30 s here)
def test_a_wandb_failure_on_an_evaluation_keeps_the_iterations_checkpoint(tmp_path, one_rank_env, fake_wandb,  # noqa: F811
                                                                          monkeypatch):
    """W&B failed on iteration 1's held-out row (checkpoint_every 5): the evaluation's agreement stopped every rank
    before the iteration's checkpoint, so a W&B hiccup cost the iteration's training, which the training row's
    W&B failure no longer does. Its files written, the checkpoint is saved, then the run stops on the failure; the
    resumed run finds the evaluation in eval.jsonl (not evaluated again) and sends W&B its rows (trim_after)."""
    from training.engine import latest_tag
    from training.rank_failures import RankFailed
    from training.trainer import train

    _wandb_log_fails(monkeypatch, fake_wandb, lambda data, step: step == 1 and any(k.startswith("eval/") for k in data))
    cfg = dataclasses.replace(_eval_cfg(tmp_path, "--wandb_project", "grpo"), checkpoint_every=5)
    with pytest.raises(RankFailed, match=r"iteration 1: logging the held-out evaluation to W&B failed on rank 0 "
                                         r".*Last checkpoint: .*iter_000001; fix the cause"):
        train(cfg)
    run = tmp_path / "run"
    assert latest_tag(run / "checkpoints") == "iter_000001"
    assert _iterations(run / "eval.jsonl") == [0, 1]
    assert set(_iterations(run / "eval_rewards.jsonl")) == {0, 1}


def test_the_last_iterations_wandb_stop_names_only_what_is_left():
    """W&B failing after the last iteration's checkpoint said the resume runs "the held-out evaluation, the final
    export" whatever the stop had skipped: after W&B failed on the evaluation's rows, whose files were written,
    only the export was left (and with ``export: none`` nothing but the W&B rows)."""
    from pathlib import Path

    from training.trainer import last_wandb_todo

    both = last_wandb_todo(3, Path("out/final"))
    assert both.endswith("trains no further and runs what the stop skipped (the held-out evaluation of iteration 3 "
                         "and the final export to out/final)"), both
    assert last_wandb_todo(None, Path("out/final")).endswith("(the final export to out/final)")
    assert "evaluation" not in last_wandb_todo(None, Path("out/final"))
    alone = last_wandb_todo(None, None)
    assert alone.endswith("finish the run with --resume, which trains no further") and "skipped" not in alone


@pytest.mark.slow  # a training iteration and two evaluations in process (~30 s here)
def test_a_wandb_failure_on_the_last_evaluation_leaves_only_the_export(tmp_path, one_rank_env, fake_wandb,  # noqa: F811
                                                                       monkeypatch):
    """W&B failed on the last iteration's held-out row: the evaluation's files are written (the resume does not
    evaluate again), so the stop names the final export alone as what the resume runs."""
    from training.engine import latest_tag
    from training.rank_failures import RankFailed
    from training.trainer import train

    _wandb_log_fails(monkeypatch, fake_wandb, lambda data, step: step == 1 and any(k.startswith("eval/") for k in data))
    cfg = dataclasses.replace(_eval_cfg(tmp_path, "--wandb_project", "grpo", "--export", "final"), max_iterations=1)
    with pytest.raises(RankFailed, match=r"iteration 1: logging the held-out evaluation to W&B failed") as info:
        train(cfg)
    run = tmp_path / "run"
    assert str(info.value).endswith(f"runs what the stop skipped (the final export to {run / 'final'})"), info.value
    assert latest_tag(run / "checkpoints") == "iter_000001" and _iterations(run / "eval.jsonl") == [0, 1]


def _wandb_log_fails(monkeypatch, fake_wandb, fails) -> None:  # noqa: F811
    """W&B on (the fake run of tests/test_wandb_log.py), its ``run.log`` raising the service's error where
    ``fails(data, step)`` says so and logging as usual elsewhere."""
    import training.run_start
    from tests.test_wandb_log import _Run

    real_log = _Run.log

    def log(self, data, step=None):  # noqa: ANN001, ANN202
        if fails(data, step):
            raise ConnectionResetError("the wandb service process is gone")
        real_log(self, data, step)

    monkeypatch.setattr(_Run, "log", log)
    monkeypatch.setattr(training.run_start, "require_wandb", lambda project: None)
    monkeypatch.setattr(fake_wandb[0], "__spec__", ModuleSpec("wandb", None), raising=False)
