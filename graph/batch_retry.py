"""Whether another run could turn a `raa score-batch` row's ineligible result into a reward: the one rule
`--retry-ineligible` applies per fault (`graph.batch_resume` decides which rows go before a resume, `evals.reliability`
which rows of `raa eval reward` are scored again). Split from graph/batch_resume.py (its size).

- Whether a row's ineligibility is retried is decided per fault (`fault_retryable`, one rule) from the row's
  recorded faults (`RewardResult.faults`: stage, kind, message); only a row that records none (written before results
  carried them, or before a bad manifest line's and a dead worker's rows did) is read from its reason text
  (`recorded_faults`), where a process note of a row written before "notes" existed read as a fault a rerun could fix.
- A row of a clip whose worker died or hung on each of its attempts (`graph.batch_deaths.death_fault`, `--processes`)
  stays retryable, though a hung clip costs up to 2 x `--run-timeout` at each --retry-ineligible: the batch cannot
  tell a clip that crashes or hangs the decoder from a machine or service that did (the OOM killer, a tool service
  that stopped answering, a driver fault), and made final, every clip of such an outage would need its row deleted
  by hand. Making it final after N such runs would need the count carried from the dropped row into the next run;
  these rows are counted among those --retry-ineligible scores again (`graph.batch_resume.fixable_lines`).
- A video fault (an undecodable or cut clip) is final while the clip is as its run found it, and retried once
  it differs: a clip scored while it was still being written (a renderer or a copy not done) failed as a cut
  file and was never scored again. A row records its clip's size and modification time (ns) when its run
  started ("clip", `graph.batch.clip_stamp`); the clip is changed when its size or modification time now
  differ (looked up once per run). A row without "clip" (written before it existed, or whose clip could not be
  read) keeps its video fault final, as before; a clip that is gone now is not retried for it.
- A video fault that says the clip could not be reached (`tools.video_errors.unreached`: "video file not found", a
  folder at the clip's path, or a PermissionError: no permission to the clip or its folder; the module that words the
  faults reads them back) is about the environment, not the clip's bytes: it is retried once the
  clip can be read (`clip_readable`: a file this process may read), whatever its size and modification time.
  A permission error was final as any video fault, and fixing it (chmod) changes neither size nor mtime, so
  --retry-ineligible never scored the clip again. While it still cannot be read it stays final (a rerun would
  fail the same way, and a plain resume would keep offering it).
- A video fault whose read failed for the machine, not the clip (`tools.video_errors.environmental`: `MACHINE_ERRNOS` or
  a MemoryError, whichever error class `tools.video` names) is retried the same way, once the clip can be read: it was
  final, so a clip read while a network disk dropped out (EIO), while the process had too many files open
  (EMFILE/ENFILE) or while memory ran short was never scored again. Errors of the clip's own bytes (invalid data,
  a cut file, an invalid argument, an unsupported codec: ENOSYS is this FFmpeg build, which a rerun keeps) stay
  final while the clip is unchanged, as is FFmpeg's out-of-memory on a size in the clip's corrupt bytes while the machine
  has memory to spare (`tools.video_errors.ffmpeg_refused`), or its I/O error that a second demux repeats on a clip
  that reads back whole (`tools.video_errors.demuxer_io_error`): both were tried again by each --retry-ineligible.
- A zero the quality check gave (`graph.nodes.quality`: under 2 frames, uniform or unusable content; no model judged
  the clip) is scored again by `--retry-ineligible` once its clip changed, as a video fault is (`rescorable`): a clip
  of which a renderer had written one frame got 0 (DESIGN §3) and kept it once whole, while the same clip cut
  mid-write (a video fault) was scored again. Resume keys rows by item (clip path, instruction, preset, draw), not
  by the clip's content; the "clip" record is read only for verdicts made from the clip's bytes alone (video faults,
  quality zeros). A reward or a zero that a model judged stands when its clip changes later (an edit after scoring
  is no clip still being written, and clips copied without their mtimes would all be scored again); to re-score
  one, delete its row or write to another --out.
- A refusal of the content ("refused" with a message that says the model declined the clip, or its server's
  content filter or content policy did: `graph.replies.declined_answer`) is the scorer's answer about the clip:
  the same model at the same endpoint and temperature gives it again, so it was paid for again by each
  --retry-ineligible and counted by a plain resume as a row "a rerun can fix". It is retried only when the
  row's recorded scorer (`graph.batch.scorer_of`) differs from this run's (another model, endpoint or
  temperature: a resume into an output with rewards of another scorer is refused anyway, `other_scorer`, so this
  is an output of only ineligible rows). Any other "refused" (a 4xx the server gave for a reason not recognised,
  or in rows written before they were "settings", a rejected API key or a server's image limit) is retried as
  before: a fix of the server or the settings may clear it. A 400 or 413 for a limit of the server's setup is now
  "settings" (`graph.transport.limit_kind`), retried as any other outage.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

from graph.batch import quality_zero
from graph.replies import declined_answer
from graph.schemas import Fault, FaultKind, stored_faults

FINAL_FAULTS = ("input", "video")
"""Fault kinds that fail again on a rerun: a bad manifest line or instruction, an undecodable clip (a video
fault that says the clip could not be reached, `unreached`, or that the machine failed its read, `environmental`,
is retried once it can be read)."""
FAULT_KINDS = get_args(FaultKind)
"""The kinds a fault's reason names ("stage: kind: message"), as `recorded_faults` reads a row's reasons."""


def clip_readable(path: str) -> bool:
    """True when `path` is a file this process may read (what a clip "not found" or unreadable for want of
    permission needs before a rerun can score it)."""
    return Path(path).is_file() and os.access(path, os.R_OK)


def fault_retryable(fault: Fault, path: str | None, readable: Callable[[str], bool],
                    clip_changed: Callable[[str], bool], scorer_changed: bool = False) -> bool:
    """Whether another run could fix `fault` (the one per-kind rule of `retryable`): any kind but input and video
    faults (`FINAL_FAULTS`), except a refusal of the content (`graph.replies.declined_answer`) by the same scorer
    (not `scorer_changed`: the same model refuses the same clip again); a video fault once the row's clip at
    `path` can be read when it says the clip could not be reached or the machine failed its read (`Fault.outage`:
    `unreached`, `environmental`), or once the clip changed since the row's run (module docstring)."""
    if fault.kind == "refused" and declined_answer(fault.message):
        return scorer_changed
    if fault.kind not in FINAL_FAULTS:
        return True
    if fault.kind != "video" or path is None:
        return False
    return (fault.outage and readable(path)) or clip_changed(path)


def recorded_faults(result: dict[str, Any]) -> list[Fault]:
    """The faults that made an ineligible `result` (a row's "result") so: its "faults" when it records them, else
    read from its reasons (a row written before results carried faults, or before a bad manifest line's and a
    dead worker's rows did). Reasons are the faults' "stage: kind: message" (or "input: message"), then the
    run's process notes: the notes it records ("notes") are left out, and in a row written before it recorded them,
    a reason after the first counts only when it reads "stage: kind: message" with a fault kind (a note read as a
    fault had a clip no rerun can decode scored again by every --retry-ineligible). A first reason of no such form
    ("batch: the worker process ... died", "agent: ValueError: ...") is a fault of kind "other", retried."""
    try:
        if faults := stored_faults(result.get("faults")):  # the eval tables' reader (`evals.table_rows.row_faults`)
            return faults
    except ValueError:  # not as this code writes them: the reasons still say what went wrong
        pass
    reasons, notes = [str(r) for r in result.get("reasons") or []], result.get("notes")
    if isinstance(notes, list) and notes and reasons[-len(notes):] == notes:
        reasons = reasons[:-len(notes)]
    found = []
    for i, reason in enumerate(reasons):
        parts = reason.split(": ", 2)
        if len(parts) == 3 and parts[1] in FAULT_KINDS:
            found.append(Fault(stage=parts[0][:64], kind=parts[1], message=parts[2][:2000]))
        elif i == 0:
            kind = parts[0] if parts[0] in FINAL_FAULTS and len(parts) > 1 else "other"
            found.append(Fault(stage=parts[0][:64], kind=kind, message=reason.split(": ", 1)[-1][:2000]))
    return found


def retryable(result: dict[str, Any], path: str | None = None,
              readable: Callable[[str], bool] = clip_readable,
              clip_changed: Callable[[str], bool] = lambda p: False, scorer_changed: bool = False) -> bool:
    """True for an ineligible result (a row's "result") that another run could turn into a reward: one of its
    faults (`recorded_faults`) is `fault_retryable` (a transport error, a timeout, a setting the server or client
    had wrong, an invalid reply, a tool fault, a dead worker; a refusal of the content only when the row was scored
    by another scorer than this run's, `scorer_changed`; a video fault whose clip at `path` can be read now after it
    could not be reached or the machine failed its read, `readable`; a video fault of a clip changed since,
    `clip_changed`)."""
    if result.get("status") != "ineligible":
        return False
    return any(fault_retryable(f, path, readable, clip_changed, scorer_changed) for f in recorded_faults(result))


def rescorable(result: dict[str, Any], path: str | None = None,
               clip_changed: Callable[[str], bool] = lambda p: False) -> bool:
    """True for a zero the quality check gave (`graph.batch.quality_zero`: no model judged the clip) whose clip at
    `path` changed since the row's run (`clip_changed`), as a video fault is retried (module docstring). A zero or
    reward a model judged stands whatever its clip became."""
    return quality_zero(result) and path is not None and clip_changed(path)


def over_decode_limit(result: Any) -> bool:
    """True for an ineligible `result` (a row's "result") with a video fault of a clip over the decode limit
    (`tools.video_errors.over_decode_limit`): final while the clip is unchanged, though raising the limit admits it."""
    if not isinstance(result, dict) or result.get("status") != "ineligible":
        return False
    if not (videos := [f for f in recorded_faults(result) if f.kind == "video"]):
        return False
    from tools.video_errors import over_decode_limit as too_large  # lazy: PyAV, only for a video fault

    return any(too_large(f.message) for f in videos)
