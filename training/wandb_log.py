"""Weights & Biases mirror of the training metrics (``TrainConfig.wandb_project``).

``WandbRun`` receives the rows `training.metrics_log.MetricsLog` writes: each iteration's row under ``train/``
and each held-out evaluation under ``eval/``, plotted against the iteration, with the resolved TrainConfig as the
run's config. Decisions where the issue was silent:

* One W&B run per training run: its id is kept in ``OUTPUT_DIR/wandb.json``, so ``--resume`` continues
  the same W&B run and a fresh run in that folder starts a new one. The run is named after the output
  folder and its files go to ``OUTPUT_DIR/wandb``.
* W&B's step is the training iteration (rows of one iteration, its ``train/`` and ``eval/`` values and
  videos, share it), also logged as the ``iteration`` value, the declared x axis of ``train/*`` and
  ``eval/*``. A resume from the checkpoint of iteration N (``resume_step``) rewinds the W&B run with
  ``resume_from="ID?_step=N-1"`` (wandb >= 0.17.1; wandb starts the rewound run at step N): the crashed
  attempt's points past the checkpoint leave the run's history (W&B archives them), as they leave
  ``metrics.jsonl`` (`MetricsLog.trim_after`), and `MetricsLog.trim_after` logs iteration N's kept rows
  again, so that an evaluation of N the resume still owes (a stop skipped it) joins them at step N. Before,
  wandb's step counted calls and both attempts' points of the repeated iterations were plotted side by
  side at the same iteration.
* Rewind is a preview feature of the W&B server: one without it (or an account not let in) refuses
  ``resume_from``, and then the run continues with ``resume="allow"`` and a note on stderr. W&B then keeps
  the crashed attempt's points past the checkpoint and drops this launch's rows for those iterations (a
  step below the run's last one); ``metrics.jsonl`` and TensorBoard hold this launch's. Offline
  (``WANDB_MODE=offline``) wandb accepts ``resume_from`` without asking the server, and ``wandb sync``
  asks it later.
* It gets the scalars TensorBoard gets (`MetricsLog`): non-finite values are left out (metrics.jsonl
  records them as null). With ``eval_videos: save`` it also gets the held-out sample videos rank 0 can
  read (``eval/video/pPPP_sSS``, captioned with the prompt), which TensorBoard does not (moviepy).
* wandb is optional; `require_wandb` says how to install it before any model loads. Whether it logs
  online or offline, and to which entity, are wandb's own settings (``wandb login``, ``WANDB_MODE``,
  ``WANDB_ENTITY``), which this module leaves to wandb.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import sys
from pathlib import Path
from typing import Any

from tools.jsonl import parsed_file, write_text_atomic
from training.config import ConfigError

ID_FILE = "wandb.json"
"""``OUTPUT_DIR/wandb.json``: the W&B project and run id of this training run."""
STEP_METRIC = "iteration"
"""The W&B x axis of every ``train/*`` and ``eval/*`` value: the training iteration."""


def require_wandb(project: str | None) -> None:
    """ConfigError when ``project`` is set and wandb is not installed."""
    if project is not None and importlib.util.find_spec("wandb") is None:
        raise ConfigError(f"wandb_project is {project!r} but wandb is not installed: `pip install wandb` "
                          "(or `pip install -e \".[wandb]\"`), or leave wandb_project unset")


def check_resume_step(resume_step: int | None) -> None:
    """ValueError unless ``resume_step`` is None or a checkpoint's iteration (an int >= 1: a checkpoint is saved
    after an iteration, and the rewind point is the step before it)."""
    if resume_step is not None and (isinstance(resume_step, bool) or not isinstance(resume_step, int)
                                    or resume_step < 1):
        raise ValueError(f"resume_step must be an integer >= 1, got {resume_step!r}")


def saved_run_id(id_path: Path, project: str) -> str | None:
    """The run id ``wandb.json`` keeps for ``project``; None when the file is missing, unreadable, not JSON (or
    not UTF-8), of another project or without a string id: a new run, as for a fresh start."""
    try:
        saved = parsed_file(id_path)
    except (OSError, ValueError):
        return None
    if isinstance(saved, dict) and saved.get("project") == project and isinstance(saved.get("id"), str):
        return saved["id"] or None
    return None


def no_rewind_note(run_id: str, resume_step: int, exc: BaseException) -> str:
    """What a resume tells when W&B refused to rewind run ``run_id`` (module docstring)."""
    return (f"note: W&B could not rewind run {run_id} to the checkpoint of iteration {resume_step} "
            f"({str(exc).rstrip('.')}); it continues the run as it is: its points after iteration {resume_step} "
            "stay the crashed attempt's, and W&B drops this launch's rows for those iterations (metrics.jsonl "
            "and TensorBoard hold this launch's)")


class WandbError(RuntimeError):
    """wandb could not start the run (not logged in, no network while online)."""


class WandbRun:
    """The W&B run of a training run (rank 0 only)."""

    def __init__(self, output_dir: Path, project: str, config: dict[str, Any], *, resume: bool,
                 resume_step: int | None = None) -> None:
        """``resume``: continue the run ``wandb.json`` names (a new one without it); ``resume_step``: the
        iteration of the checkpoint the launch resumes from, to which the run is rewound (module docstring)."""
        import wandb

        check_resume_step(resume_step)
        id_path = output_dir / ID_FILE
        saved_id = saved_run_id(id_path, project) if resume else None
        run_id = saved_id or secrets.token_hex(4)
        # through a temporary file renamed over it: written in place, a full disk left it empty and the next
        # resume started a second W&B run
        write_text_atomic(id_path, json.dumps({"project": project, "id": run_id}) + "\n")
        common: dict[str, Any] = {"project": project, "name": output_dir.resolve().name, "id": run_id,
                                  "dir": str(output_dir), "config": config}
        self.rewound = False
        """Whether the run was rewound to just before ``resume_step`` (its rows are then logged again)."""
        note = None  # why the rewind was refused, said once the run is up
        try:
            if saved_id is not None and resume_step is not None:
                try:
                    self.run = wandb.init(**common, resume_from=f"{run_id}?_step={resume_step - 1}")
                    self.rewound = True
                except wandb.errors.Error as exc:  # no rewind on this server: continue the run as it is
                    note = no_rewind_note(run_id, resume_step, exc)
            if not self.rewound:
                self.run = wandb.init(**common, resume="allow")
                if note is not None:  # said once the run is up: when neither starts, the error below says why
                    print(note, file=sys.stderr, flush=True)
        except wandb.errors.Error as exc:  # not logged in, no network: say what to do, not wandb's traceback
            raise WandbError(f"W&B could not start run {run_id} in project {project!r}: {str(exc).rstrip('.')}. Log in with "
                             "`wandb login`, or log offline with WANDB_MODE=offline and `wandb sync` later, or "
                             "leave wandb_project unset") from None

        self.run.define_metric(STEP_METRIC)
        for section in ("train/*", "eval/*"):
            self.run.define_metric(section, step_metric=STEP_METRIC)

    def log(self, scalars: dict[str, float | int], step: int) -> None:
        """One row's scalars (``train/...`` or ``eval/...``, the same TensorBoard gets) at iteration ``step``,
        which is also wandb's step (rows of one iteration merge into one history row)."""
        self.run.log({**scalars, STEP_METRIC: step}, step=step)

    def log_videos(self, videos: dict[str, tuple[Path, str]], step: int) -> None:
        """mp4 files (``key -> (path, caption)``, keys under ``eval/``) at iteration ``step``; wandb uploads the
        files as they are (no moviepy needed for a path)."""
        import wandb

        self.run.log({**{key: wandb.Video(str(path), caption=caption, format="mp4")
                         for key, (path, caption) in videos.items()}, STEP_METRIC: step}, step=step)

    def finish(self, exit_code: int = 0) -> None:
        """End the run; a nonzero ``exit_code`` (the run's own, when it stopped with an exception) marks it failed
        in W&B, 0 finished."""
        self.run.finish(exit_code=exit_code)
