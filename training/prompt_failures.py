"""A training prompt whose image cannot be read in the middle of a run (step 1 of training/trainer.py).

Prompt images are checked when the run is launched (training/train.py ``check_prompts``), but a file can go
missing or be overwritten later (a dataset folder cleaned up, a sync that is half done). Such a prompt used to
stop its rank with the bare FileNotFoundError of `training.data.load_frame`, naming no prompt line, and with
more than one rank the others then waited in a collective until the launcher killed them.

Decisions where the issue was silent:

* One bad prompt never takes down the others: its group is skipped for this iteration. Its reason names the
  prompt's place (``PATH:N`` of the prompt file, ``dataset[i]`` of the config) and the image path; it is
  printed by the rank that hit it, written to OUTPUT_DIR/failed_prompts.jsonl (rank 0, every rank's failures:
  iteration, prompt, place, image, reason), counted in the metrics row (``failed_prompts``), and each of the
  group's rollouts is ineligible of kind ``error`` with that reason (ineligible.jsonl, rewards.jsonl), as a
  failed generation is recorded in training.generate's failed.jsonl while the other prompts go on.
* The skipped group is still sampled, from a stand-in conditioning: a synthetic first frame
  (`training.data.synthetic_frame` of the prompt's ``image_seed``) and the prompt's text. Its rollouts are never
  shown to the reward, have no advantage, are left out of the diversity and mask metrics and get no video;
  they exist only so that every rank runs the same encodes, rollouts, decodes and update micro-batches, which
  ZeRO's collectives need (ZeRO-3 gathers parameters in every forward; training/update.py runs every rank's
  micro-batches in step, a group without a valid sample included).
* When every prompt of an iteration (on all ranks: the failures are gathered before the rollouts) failed, the
  run stops on every rank with `PromptImagesFailed` (exit 2) instead of sampling stand-ins with nothing to
  learn from; the last checkpoint is kept, and ``--resume`` continues once the images are back.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from training.config import PromptSpec, TrainConfig
from training.data import load_frame, synthetic_frame


@dataclass(frozen=True)
class PromptFailure:
    """A prompt of this iteration whose first frame could not be read."""

    prompt: str
    """The prompt's text."""
    place: str
    """Where it was given: ``PATH:N`` of the prompt file or ``dataset[i]`` (`training.data.load_placed_prompts`)."""
    image: str | None
    """Its image path."""
    reason: str
    """The whole reason, naming the place and the image: what every record of the failure says."""

    def record(self, iteration: int) -> dict[str, object]:
        """Its failed_prompts.jsonl line."""
        return {"iteration": iteration, **asdict(self)}


def prompt_frame(spec: PromptSpec, place: str, cfg: TrainConfig) -> tuple[np.ndarray, PromptFailure | None]:
    """The prompt's first frame at the run's size (`training.data.load_frame`), or, when it cannot be read, the
    stand-in frame (module docstring) and the failure. Any exception of the read counts (a missing file, one
    that is no image or is cut short, a refused pixel format: PIL raises many kinds); the encode that follows
    is outside, so a failure of the model is not taken for a bad image."""
    try:
        return load_frame(spec, cfg.height, cfg.width, cfg.image_fit), None
    except Exception as exc:
        reason = (f"prompt {place} (image {spec.image}) skipped: its image cannot be read "
                  f"({type(exc).__name__}: {exc})")
        return synthetic_frame(spec.image_seed, cfg.height, cfg.width), PromptFailure(spec.text, place, spec.image,
                                                                                        reason)


def first_frames(specs: Sequence[PromptSpec], places: Sequence[str], cfg: TrainConfig, iteration: int,
                 rank: int) -> tuple[list[np.ndarray], list[PromptFailure | None]]:
    """`prompt_frame` of each of a rank's prompts of ``iteration``: the frames (stand-ins for the failed ones) and,
    per prompt, its failure or None; each failure is printed to stderr with the iteration and the rank."""
    read = [prompt_frame(spec, place, cfg) for spec, place in zip(specs, places, strict=True)]
    for _, failure in read:
        if failure is not None:
            print(f"warning: iteration {iteration}, rank {rank}: {failure.reason}; the other prompts go on",
                  file=sys.stderr, flush=True)
    return [frame for frame, _ in read], [failure for _, failure in read]


class PromptImagesFailed(RuntimeError):
    """Every prompt of an iteration, on every rank, had an image that could not be read (module docstring)."""

    def __init__(self, iteration: int, failures: Sequence[PromptFailure], ckpt_dir: Path, record: Path, *,
                 recorded: bool = True) -> None:
        """``record``: failed_prompts.jsonl; ``recorded``: whether the iteration's failures were written to it (False:
        writing them failed, and the message names the ranks' warnings instead of a file that lacks them)."""
        from training.rank_failures import last_checkpoint

        last, goes_on = last_checkpoint(ckpt_dir)
        where = record if recorded else (f"the ranks' stderr, their 'warning: iteration {iteration}' lines; writing "
                                         f"{record} failed, its error is printed above")
        super().__init__(
            f"iteration {iteration}: the image of every prompt of the iteration ({len(failures)}) could not be "
            f"read, so there is nothing to train on; e.g. {failures[0].reason[:400]} (all: {where}). Restore or "
            f"fix the images (`python -m training.train --check` reads them all), then {goes_on} "
            f"(last checkpoint: {last})")
        self.iteration = iteration
