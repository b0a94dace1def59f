"""What a stopped launch says (training/preemption.py `TrainingStopped`): what the stop skipped for each export
mode, and which checkpoint --resume continues from when the launch saved none (a resumed launch stopped during the
held-out evaluation it owed). Split from tests/test_preemption.py, whose runs stop with a checkpoint."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from training.preemption import StopRequest, TrainingStopped


def test_a_stop_after_the_last_iteration_names_what_each_export_mode_leaves():
    """export: none with nothing skipped said "finish the run with --resume, which ... runs what the stop skipped"
    though the stop skipped nothing (the run was complete), and no mode named a held-out evaluation it skipped."""
    ckpt = "out/checkpoints/iter_000010"
    none = str(TrainingStopped(10, signal.SIGTERM, ckpt, last=True))
    assert "the stop skipped nothing: the run is complete and nothing is left to resume" in none, none
    assert "--resume" not in none and "export" not in none
    owed = str(TrainingStopped(10, signal.SIGTERM, ckpt, last=True, evaluation=10))
    assert "finish the run with --resume, which trains no further and runs what the stop skipped (the held-out " \
           "evaluation of iteration 10)" in owed and "export" not in owed, owed
    final = str(TrainingStopped(10, signal.SIGTERM, ckpt, last=True, evaluation=10, export_to=Path("out/final")))
    assert "(the held-out evaluation of iteration 10 and the final export to out/final)" in final, final
    assert "or export alone with `python -m training.export --run out`" in final



def test_a_signal_stop_and_a_wandb_failure_at_the_end_say_what_is_left_in_one_wording():
    """The "finish the run with --resume ... runs what the stop skipped (A and B)" sentence was written twice, in
    `TrainingStopped` and `trainer.last_wandb_todo`: one helper (`finish_with_resume`) writes it for both."""
    from training.preemption import finish_with_resume, skipped_at_end
    from training.trainer import last_wandb_todo

    final = Path("out/final")
    todo = finish_with_resume(skipped_at_end(10, final))
    assert todo == ("finish the run with --resume, which trains no further and runs what the stop skipped (the "
                    "held-out evaluation of iteration 10 and the final export to out/final)"), todo
    assert todo in str(TrainingStopped(10, signal.SIGTERM, "out/checkpoints/iter_000010", last=True, evaluation=10,
                                       export_to=final))
    assert last_wandb_todo(10, final).endswith(todo)
    assert finish_with_resume([]) == "finish the run with --resume, which trains no further"
    assert last_wandb_todo(None, None).endswith(finish_with_resume([]))


def test_a_stop_before_a_resumed_runs_first_save_names_the_checkpoint_it_resumed_from():
    """A resumed run stopped before it saved anything (a signal during the evaluation it owed) said "checkpoint
    ... saved", though it wrote none: the message says which checkpoint a restart continues from."""
    err = str(TrainingStopped(5, signal.SIGTERM, "out/checkpoints/iter_000005", saved=False))
    assert "saved." not in err and "this launch saved no checkpoint" in err, err
    assert "--resume continues from out/checkpoints/iter_000005, the checkpoint this launch resumed from" in err


def _signal_in_evaluations(monkeypatch) -> None:
    """Send this process a SIGTERM as each held-out evaluation starts, once the trainer's `StopRequest` handles it."""
    import training.trainer

    real = training.trainer.evaluate_everywhere

    def evaluating(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if isinstance(getattr(signal.getsignal(signal.SIGTERM), "__self__", None), StopRequest):
            os.kill(os.getpid(), signal.SIGTERM)  # (never the default action: it ends pytest)
        return real(*args, **kwargs)

    monkeypatch.setattr(training.trainer, "evaluate_everywhere", evaluating)


@pytest.mark.slow  # two in-process launches with a model (~40 s here)
def test_a_signal_during_the_evaluation_a_resume_owes_names_the_checkpoint_it_resumed_from(
        tmp_path, one_rank_env, monkeypatch):
    """A resumed launch stopped during the held-out evaluation it owed (before it trained or saved anything) said
    "checkpoint .../iter_000001 saved": it saved nothing, and the message says --resume continues from that one."""
    import training.trainer
    from tests.test_trainer_closing import _cfg

    training.trainer.train(_cfg(tmp_path, "--tensorboard", "false", "--checkpoint_every", "1"))
    _signal_in_evaluations(monkeypatch)
    cfg = _cfg(tmp_path, "--tensorboard", "false", "--resume", "--max_iterations", "2", "--eval_every", "1",
               "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]")
    with pytest.raises(TrainingStopped) as info:
        training.trainer.train(cfg)
    text, run = str(info.value), tmp_path / "run"
    assert text.startswith("stopped by SIGTERM at iteration 1; this launch saved no checkpoint") and "saved." not in text, text
    assert f"--resume continues from {run / 'checkpoints' / 'iter_000001'}, the checkpoint this launch resumed" in text
    assert (run / "checkpoints" / "latest").read_text().strip() == "iter_000001"


def test_a_resumed_launch_stopped_after_the_last_evaluation_it_owed_does_not_send_the_user_to_resume():
    """A resume at the run's last iteration (export: none) that ran the held-out evaluation it owed and was then
    stopped said "--resume continues from <checkpoint>" and, in the same message, "nothing is left to resume"."""
    err = str(TrainingStopped(10, signal.SIGTERM, "out/checkpoints/iter_000010", saved=False, last=True))
    assert "the run is complete and nothing is left to resume" in err, err
    assert "--resume" not in err and "saved." not in err, err
    assert "out/checkpoints/iter_000010" in err, err


@pytest.mark.slow  # two in-process launches with a model (~40 s here)
def test_a_signal_during_the_evaluation_a_finished_runs_resume_owes_says_the_run_is_complete(
        tmp_path, one_rank_env, monkeypatch):
    """A resume of a run at its last iteration (export: none) that owes a held-out evaluation (here: a new
    measurement) and is stopped during it: the evaluation ran, so nothing is left, but the message said
    "--resume continues from .../iter_000001" as well as "nothing is left to resume"."""
    import training.trainer
    from tests.test_trainer_closing import _cfg

    training.trainer.train(_cfg(tmp_path, "--tensorboard", "false"))  # 1 iteration, export: none, no evaluation
    _signal_in_evaluations(monkeypatch)
    cfg = _cfg(tmp_path, "--tensorboard", "false", "--resume", "--eval_every", "1",
               "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]")
    with pytest.raises(TrainingStopped) as info:
        training.trainer.train(cfg)
    text, run = str(info.value), tmp_path / "run"
    assert "the run is complete and nothing is left to resume" in text and "--resume" not in text, text
    assert [json.loads(line)["iteration"] for line in (run / "eval.jsonl").read_text().splitlines()] == [1]
