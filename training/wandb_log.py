"""Weights & Biases mirror of the training metrics (``TrainConfig.wandb_project``).

``WandbRun`` receives the rows `training.metrics.MetricsLog` writes: each iteration's row under ``train/``
and each held-out evaluation under ``eval/``, plotted against the iteration, with the resolved TrainConfig as the
run's config. Decisions where the issue was silent:

* One W&B run per training run: its id is kept in ``OUTPUT_DIR/wandb.json``, so ``--resume`` continues
  the same W&B run (``resume="allow"``) and a fresh run in that folder starts a new one. The run is
  named after the output folder and its files go to ``OUTPUT_DIR/wandb``.
* The x axis is the training iteration, logged as the ``iteration`` value of each row and declared
  with ``define_metric`` as the step of ``train/*`` and ``eval/*``; wandb's own step only counts
  calls. So iterations a resume repeats (after a crash past its last checkpoint) are logged again
  and plotted at their iteration beside the crashed attempt's, as ``metrics.jsonl`` keeps both; a
  W&B step must increase, and logging at ``step=iteration`` would drop them with a warning.
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
from pathlib import Path
from typing import Any

from tools.jsonl import write_text_atomic
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


class WandbError(RuntimeError):
    """wandb could not start the run (not logged in, no network while online)."""


class WandbRun:
    """The W&B run of a training run (rank 0 only)."""

    def __init__(self, output_dir: Path, project: str, config: dict[str, Any], *, resume: bool) -> None:
        import wandb

        id_path = output_dir / ID_FILE
        run_id = None
        if resume and id_path.is_file():
            try:
                saved = json.loads(id_path.read_text())
                if isinstance(saved, dict) and saved.get("project") == project and isinstance(saved.get("id"), str):
                    run_id = saved["id"] or None
            except (OSError, ValueError):  # unreadable, not JSON (or not UTF-8): a new run, as for other content
                run_id = None
        run_id = run_id or secrets.token_hex(4)
        # through a temporary file renamed over it: written in place, a full disk left it empty and the next
        # resume started a second W&B run
        write_text_atomic(id_path, json.dumps({"project": project, "id": run_id}) + "\n")
        try:
            self.run = wandb.init(project=project, name=output_dir.resolve().name, id=run_id, resume="allow",
                                  dir=str(output_dir), config=config)
        except wandb.errors.Error as exc:  # not logged in, no network: say what to do, not wandb's traceback
            raise WandbError(f"W&B could not start run {run_id} in project {project!r}: {str(exc).rstrip('.')}. Log in with "
                             "`wandb login`, or log offline with WANDB_MODE=offline and `wandb sync` later, or "
                             "leave wandb_project unset") from None

        self.run.define_metric(STEP_METRIC)
        for section in ("train/*", "eval/*"):
            self.run.define_metric(section, step_metric=STEP_METRIC)

    def log(self, scalars: dict[str, float | int], step: int) -> None:
        """One row's scalars (``train/...`` or ``eval/...``, the same TensorBoard gets) at iteration
        ``step`` (the row's x value; wandb's own step is left to count calls, see the module docstring)."""
        self.run.log({**scalars, STEP_METRIC: step})

    def log_videos(self, videos: dict[str, tuple[Path, str]], step: int) -> None:
        """mp4 files (``key -> (path, caption)``, keys under ``eval/``) at iteration ``step``; wandb uploads the
        files as they are (no moviepy needed for a path)."""
        import wandb

        self.run.log({**{key: wandb.Video(str(path), caption=caption, format="mp4")
                         for key, (path, caption) in videos.items()}, STEP_METRIC: step})

    def finish(self) -> None:
        self.run.finish()
