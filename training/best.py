"""The checkpoint with the best held-out reward (``OUTPUT_DIR/eval.jsonl``): ``keep_checkpoints`` keeps it,
``python -m training.export --run DIR --tag best`` exports it.

A policy trained against a learned reward can peak and then drift (reward hacking), so the last
checkpoint is not always the one to keep. Decisions where the issues were silent:

- "Best" is the highest ``eval_reward_mean`` among iterations that have both a held-out row and a
  complete checkpoint; a tie goes to the later iteration; a row whose mean is null (every
  held-out reward ineligible) never counts, nor does an incomplete one (``eval_complete`` false: an outage took
  some of its rewards, training/evaluate.py), whose mean averages an accidental subset of the held-out set
  (`counted_mean`). When a resume repeats an iteration, its last row counts.
  ``--tag best`` names on stderr every row it left aside that could have mattered (`passed_over`): a higher
  mean without a complete checkpoint, an earlier higher row of a repeated iteration, a null mean, rows of
  other measurements, lines that are not JSON.
- A checkpoint is complete when its folder holds ``layout.json`` (training/resume.py; written after every
  rank saved) and it is not past ``latest``: a save that crashed leaves a folder without it, or one
  ``latest`` never reached (the resume starts before it), which neither pruning nor ``--tag best`` may
  take. A folder from before ``layout.json`` existed is not a candidate (export it by its tag); when no
  evaluated iteration has a complete checkpoint, ``--tag best``'s error names the folders it left aside and why.
- Means are compared only among rows of one measurement (``eval_key``, training/evaluate.py): a resume
  that changes the reward, the held-out prompts, eval_samples, the seed or the sampler starts a new
  series. Which key counts: the trainer's own (``key``); without one (the report, ``--tag best``, a
  launch that does not evaluate) the key of the file's last row, i.e. the run's latest measurement, so
  every reader picks the same best. Rows without a key (runs from before it) match only each other: a
  run of them alone compares as it always did, and a launch that writes keyed rows leaves them behind,
  since what they measured is unknown.
- A resumed launch whose measurement is not the file's latest one evaluates its starting checkpoint
  first (`pending_eval`), as a fresh run evaluates iteration 0: its new series needs a baseline, and that
  checkpoint (complete: it was just loaded) is its first candidate.
- A held-out evaluation at an iteration without a checkpoint cannot be exported, so it is not a
  candidate. The trainer therefore also checkpoints an evaluation between ``checkpoint_every``
  iterations when it raises the best mean of the trained iterations so far (`is_new_best`; the baseline
  at iteration 0 is the base model and has no checkpoint), so the best is always exportable. With
  ``eval_every`` a multiple of ``checkpoint_every`` every evaluation is a checkpoint anyway and nothing
  extra is written; otherwise ``--check`` notes that more checkpoints than the schedule's may be written.
- Pruning keeps the best checkpoint besides the newest ``keep_checkpoints``. Rank 0 decides which
  one it is (it writes eval.jsonl) and tells the other ranks, so every node keeps the same one.
- ``eval_patience: P`` stops a run once P held-out evaluations in a row have not beaten the best mean
  so far, strictly (`evals_since_best`; the baseline at iteration 0 is the first best). An evaluation whose
  rewards were all ineligible (mean null), or that an outage made incomplete, counts neither way: an unreachable
  reward is ``max_skipped_iterations``'s business, not a plateau (nor a new best). A resume counts on from eval.jsonl: when the
  patience has already run out at the checkpoint it starts from, it stops there at once, as the run
  without a stop signal did (a signal during the evaluation that ran it out, or during its save, stopped
  the run before its early stop, and the resumed run trained on to its next evaluation). So does a resume
  of a run ``eval_patience`` ended; raise ``eval_patience`` to train on.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tools.jsonl import json_objects
from training.collectives import as_rank0_sees
from training.config import TrainConfig
from training.engine import iteration_tag, latest_tag
from training.finite import finite_number
from training.resume import LAYOUT_FILE


def best_needs_aligned_evals(cfg: TrainConfig) -> str | None:
    """A note for ``--check`` when some held-out evaluations fall between checkpoints (each one that
    raises the best mean is checkpointed too: more checkpoints than ``checkpoint_every`` says); None
    otherwise."""
    if not cfg.eval_every or cfg.eval_every % cfg.checkpoint_every == 0:
        return None
    return (f"note: eval_every {cfg.eval_every} is not a multiple of checkpoint_every {cfg.checkpoint_every}: "
            "a held-out evaluation between checkpoints that raises the best mean is checkpointed too "
            "(more checkpoints on disk; keep_checkpoints prunes them)")


def is_new_best(means: dict[int, float], iteration: int) -> bool:
    """Whether the held-out mean at ``iteration`` (> 0) is above every earlier one of a trained iteration
    (``iteration -> eval_reward_mean``, finite means): the trainer checkpoints such an evaluation so that the
    best stays exportable. A tie is not (the earlier equal already is a checkpoint); the first trained
    evaluation is; False without a mean at ``iteration``."""
    if iteration <= 0 or iteration not in means:
        return False
    return all(means[iteration] > m for it, m in means.items() if 0 < it < iteration)


def on_eval_schedule(cfg: TrainConfig, iteration: int) -> bool:
    """Whether the trainer evaluates after ``iteration`` (every ``eval_every`` iterations, and the last)."""
    return bool(cfg.eval_every) and (iteration % cfg.eval_every == 0 or iteration == cfg.max_iterations)


def has_iteration(row: dict[str, Any]) -> bool:
    """Whether ``row["iteration"]`` is a JSON integer, as the trainer writes it: ``"3"``, 2.7, ``true`` and
    ``Infinity`` read as iterations 3, 2, 1 (and an OverflowError) through ``int()``, so a hand-edited row
    could name a checkpoint its mean was never measured on."""
    value = row.get("iteration")
    return isinstance(value, int) and not isinstance(value, bool)


def eval_rows(eval_path: Path) -> list[dict[str, Any]]:
    """The held-out rows in ``eval_path`` in file order whose iteration `has_iteration` (unreadable lines and
    other rows left out); [] without the file."""
    return [row for row in json_objects(eval_path)[0] if has_iteration(row)]


def latest_key(rows: list[dict[str, Any]]) -> str | None:
    """The ``eval_key`` of the last row: the run's latest measurement (None for a row without a key, or none)."""
    return rows[-1].get("eval_key") if rows else None


def rows_of_key(rows: list[dict[str, Any]], key: str | None = None) -> list[dict[str, Any]]:
    """The rows of the measurement ``key``, or of the latest one for None (module docstring); the report
    shows these too."""
    want = key if key is not None else latest_key(rows)
    return [row for row in rows if row.get("eval_key") == want]


def pending_eval(cfg: TrainConfig, start: int, eval_path: Path, key: str | None = None) -> bool:
    """Whether a run resumed at ``start`` owes the held-out evaluation of that iteration (no row of its
    measurement ``key`` there): on the schedule (a stop signal skips the evaluation to save within the
    grace period), or whatever the schedule when the file's latest measurement is not ``key`` (a baseline
    for the changed measurement, module docstring). Rank 0's answer on every rank (it writes eval.jsonl; a
    collective: call on all ranks)."""
    if start <= 0:
        return False

    def owed() -> bool:
        rows = eval_rows(eval_path)
        if any(row["iteration"] == start for row in rows_of_key(rows, key)) and latest_key(rows) == key:
            return False
        return on_eval_schedule(cfg, start) or latest_key(rows) != key

    return bool(as_rank0_sees(owed))


def eval_means(eval_path: Path, key: str | None = None) -> dict[int, float]:
    """``iteration -> eval_reward_mean`` of the held-out rows in ``eval_path`` of the measurement ``key`` (None:
    the latest one; module docstring); the last row of an iteration counts (rows without a finite mean, and
    unreadable lines, left out); {} without the file."""
    return means_of(rows_of_key(eval_rows(eval_path), key))


def counted_mean(row: dict[str, Any]) -> float | None:
    """A held-out row's ``eval_reward_mean`` when it counts for the best checkpoint and ``eval_patience``: a finite
    mean of a complete evaluation (``eval_complete`` not false: no outage took any of its rewards; a row from before
    the field is complete); None otherwise (module docstring). The trainer and every reader of eval.jsonl use it."""
    mean = row.get("eval_reward_mean")
    if row.get("eval_complete") is False or not finite_number(mean, bools=True):
        return None
    return float(mean)


def uncounted_why(row: dict[str, Any]) -> str:
    """Why a held-out row's mean does not count (`counted_mean` gave None), for the notes of ``--tag best``."""
    mean = row.get("eval_reward_mean")
    if row.get("eval_complete") is False and finite_number(mean, bools=True):
        lost = row.get("eval_outages")
        return (f"incomplete ({lost if isinstance(lost, int) else 'some'} held-out rewards lost to an outage), its "
                f"eval_reward_mean {float(mean):.4f} not compared")
    return "no eval_reward_mean (every held-out reward ineligible)"


def means_of(rows: list[dict[str, Any]]) -> dict[int, float]:
    """`eval_means` of one measurement's rows (`rows_of_key`) already read: the last row of an iteration counts,
    rows whose mean does not count (`counted_mean`) drop it."""
    means: dict[int, float] = {}
    for row in rows:
        if (mean := counted_mean(row)) is not None:
            means[row["iteration"]] = mean
        else:
            means.pop(row["iteration"], None)
    return means


def complete_checkpoint(ckpt_dir: Path, iteration: int) -> bool:
    """Whether ``ckpt_dir`` holds the whole checkpoint of ``iteration`` (`checkpoint_gap` finds nothing missing)."""
    return checkpoint_gap(ckpt_dir, iteration) is None


def checkpoint_gap(ckpt_dir: Path, iteration: int) -> str | None:
    """Why ``ckpt_dir`` does not hold the whole checkpoint of ``iteration``, or None when it does: its folder has
    ``layout.json`` (written after every rank saved) and ``latest`` names it or a later one (module docstring)."""
    folder = ckpt_dir / iteration_tag(iteration)
    if not folder.is_dir():
        return "no folder: pruned, or never saved"
    if not (folder / LAYOUT_FILE).is_file():
        return f"no {LAYOUT_FILE}: its save did not finish, or it predates the file"
    latest = latest_tag(ckpt_dir)
    latest_it = _tag_iteration(latest) if latest else None
    if latest_it is None or iteration > latest_it:
        return f"past latest ({latest or 'no latest file'}): a save the run never completed"
    return None


def _tag_iteration(tag: str) -> int | None:
    """The iteration of a tag ``iter_NNNNNN`` (None for another name)."""
    digits = tag.removeprefix("iter_")
    return int(digits) if tag.startswith("iter_") and digits.isdigit() else None


def best_checkpoint(ckpt_dir: Path, eval_path: Path, key: str | None = None) -> tuple[str, int, float] | None:
    """(tag, iteration, eval_reward_mean) of the best held-out checkpoint in ``ckpt_dir`` among the rows of the
    measurement ``key`` (None: the latest; module docstring), or None when no such row has a complete
    checkpoint."""
    candidates = [(mean, it) for it, mean in eval_means(eval_path, key).items() if complete_checkpoint(ckpt_dir, it)]
    if not candidates:
        return None
    mean, it = max(candidates)
    return iteration_tag(it), it, mean


def no_best_reason(ckpt_dir: Path, eval_path: Path) -> str:
    """Why ``--tag best`` found nothing to export (`best_checkpoint` gave None), and what to do: a run without
    held-out evaluation has no ``eval.jsonl`` at all; otherwise no evaluated iteration has a complete checkpoint, or
    the evaluations at complete checkpoints have no mean that counts (`uncounted_why`: incomplete, or no mean)."""
    latest = latest_tag(ckpt_dir)
    instead = f"export a checkpoint by its tag instead, e.g. --tag {latest}" if latest else "no checkpoint to export"
    if not eval_path.is_file():
        return (f"--tag best: {eval_path} does not exist: the run had no held-out evaluation (train with eval_every "
                f"and eval_dataset / eval_dataset_file to have one); {instead}")
    # evaluated iterations whose checkpoint folder is there but not taken (no layout.json, past latest): named,
    # since the schedule is not what left them aside (a run from before layout.json has no candidate at all)
    there = [f"{iteration_tag(it)} ({gap})" for it in sorted(eval_means(eval_path)) if it > 0
             and (ckpt_dir / iteration_tag(it)).is_dir() and (gap := checkpoint_gap(ckpt_dir, it))]
    if there:
        return (f"--tag best: the held-out evaluations in {eval_path} (of its latest measurement) have checkpoint "
                f"folders, but none is complete: {', '.join(there[:6])}{' ...' if len(there) > 6 else ''}; {instead}")
    # evaluations at complete checkpoints whose mean does not count (`counted_mean`): the schedule is not the cause
    last = {row["iteration"]: row for row in rows_of_key(eval_rows(eval_path))}
    uncounted = [f"{iteration_tag(it)}: {uncounted_why(row)}" for it, row in sorted(last.items())
                 if it > 0 and counted_mean(row) is None and complete_checkpoint(ckpt_dir, it)]
    if uncounted:
        return (f"--tag best: the held-out evaluations in {eval_path} (of its latest measurement) at complete "
                f"checkpoints have no mean that counts: {'; '.join(uncounted[:6])}{' ...' if len(uncounted) > 6 else ''}"
                f"; {instead}")
    return (f"--tag best: no held-out evaluation in {eval_path} (of its latest measurement) is at a complete saved "
            f"checkpoint (eval_every / eval_dataset; a multiple of checkpoint_every); {instead}")


def passed_over(ckpt_dir: Path, eval_path: Path, found: tuple[str, int, float], key: str | None = None) -> list[str]:
    """What `best_checkpoint` left aside in choosing ``found`` among the rows of the measurement ``key`` (None: the
    latest), one line each, for ``--tag best`` to print: a higher mean (or a later equal one, which a tie would
    have chosen) without a complete checkpoint (the baseline at iteration 0 is the base model), an earlier row of a
    repeated iteration that was higher than its last, an evaluation without a mean, rows of other measurements,
    lines that are not JSON, rows without an integer iteration; [] when nothing was."""
    objects, torn = json_objects(eval_path)
    rows = [row for row in objects if has_iteration(row)]
    mine = rows_of_key(rows, key)
    means, best = means_of(mine), found[2]
    notes = []
    for it, mean in sorted(means.items()):
        if mean > best and it == 0:
            notes.append(f"the base model scored higher before training (iteration 0: {mean:.4f}); no saved "
                         "checkpoint beats it")
        elif (mean > best or (mean == best and it > found[1])) and (gap := checkpoint_gap(ckpt_dir, it)):
            notes.append(f"iteration {it} scored {'higher' if mean > best else 'as high'} ({mean:.4f}) but "
                         f"{iteration_tag(it)} is not a complete checkpoint ({gap})")
    last = {row["iteration"]: k for k, row in enumerate(mine)}
    for k, row in enumerate(mine):  # an earlier attempt's row of an iteration a resume repeated, higher than its last
        earlier, final = row.get("eval_reward_mean"), means.get(row["iteration"])
        above = max(best, -math.inf if final is None else final)  # a last mean of 0.0 is a mean, not none
        if k != last[row["iteration"]] and finite_number(earlier, bools=True) and earlier > above:
            notes.append(f"iteration {row['iteration']}'s earlier row ({float(earlier):.4f}) was replaced by its last "
                         f"({'no mean' if final is None else f'{final:.4f}'}): a resume repeated it")
    notes += [f"iteration {it}: {uncounted_why(mine[last[it]])}" for it in sorted({r["iteration"] for r in mine} - set(means))]
    if other := len(rows) - len(mine):
        notes.append(f"{other} row{'s' if other != 1 else ''} of another measurement (eval_key) not compared")
    if torn:
        notes.append(f"{torn} line{'s' if torn != 1 else ''} of {eval_path.name} {'is' if torn == 1 else 'are'} not JSON")
    if odd := len(objects) - len(rows):
        notes.append(f"{odd} row{'s' if odd != 1 else ''} of {eval_path.name} without an integer iteration")
    return notes


def agreed_best_tag(ckpt_dir: Path, eval_path: Path, key: str | None = None) -> str | None:
    """`best_checkpoint`'s tag as rank 0 sees it, on every rank (a collective when torch.distributed is
    initialised: call it on all ranks)."""
    def tag() -> str | None:
        found = best_checkpoint(ckpt_dir, eval_path, key)
        return None if found is None else found[0]

    return as_rank0_sees(tag)


def evals_since_best(means: dict[int, float]) -> int:
    """How many held-out evaluations (``iteration -> eval_reward_mean``, finite means only) came after the
    first one to reach the best mean: only a strictly higher mean resets the count (a tie is no progress,
    unlike the checkpoint choice, where the later of equals is kept). 0 without evaluations."""
    if not means:
        return 0
    best = max(means, key=lambda it: (means[it], -it))
    return sum(it > best for it in means)


def agreed_eval_means(eval_path: Path, key: str | None = None) -> dict[int, float]:
    """`eval_means` (of the measurement ``key``) as rank 0 reads them, on every rank (a collective when
    torch.distributed is initialised): what a resumed run's ``eval_patience`` counts on from."""
    return as_rank0_sees(lambda: eval_means(eval_path, key))


def early_stop_message(cfg: TrainConfig, iteration: int, ckpt_dir: Path, eval_path: Path, key: str | None) -> str:
    """What a run that `eval_patience` ends at `iteration` prints: why, and the checkpoint
    `training.export --tag best` would take."""
    found = best_checkpoint(ckpt_dir, eval_path, key)
    kept = (f"best held-out checkpoint {found[0]} (eval_reward_mean {found[2]:.4f}): "
            f"`python -m training.export --run {Path(cfg.output_dir)} --tag best`" if found else
            "no held-out evaluation fell on a checkpoint")
    return (f"stopping early at iteration {iteration}: {cfg.eval_patience} held-out evaluations without a "
            f"higher eval_reward_mean; {kept}")
