"""Rows of `raa eval reward`'s results.jsonl (`evals.reliability`): how a row is written (`result_row`,
`stamped`), read back from a file that may be damaged (`results_rows`: bad lines skipped and named), and judged
current (`stale`: another instruction or other clip content) or unusable as it stands (`damaged`). The rules are
argued in `evals.reliability`'s module docstring."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.batch_rows import checked_reward
from evals.clip_identity import stale_version
from evals.table_rows import TableRowError, check_row, finite
from graph.schemas import RewardResult
from tools.file_kinds import NOTHING, read_at
from tools.jsonl import LineError, SkippedLine, decode_text, usable_rows

if TYPE_CHECKING:  # pragma: no cover
    from evals.reward_scorer import EvalClip


class ManifestError(ValueError):
    """A manifest file or row that cannot be evaluated."""


def result_row(clip: EvalClip, preset: str, result: RewardResult, version: dict[str, Any] | None,
               usage_unknown: str | None = None) -> dict[str, Any]:
    """One results.jsonl row (judge verdict added later), recording the clip's content identity `version`
    (`evals.clip_identity`). With `usage_unknown` (why the usage was not
    recorded: its scorer chunk crashed) the row's usage is null and ``usage_unknown`` says why: the calls the
    chunk made before it crashed were spent, and ``{}`` read as a free run in the usage means."""
    usage = {"usage": dict(result.usage)} if usage_unknown is None else {"usage": None, "usage_unknown": usage_unknown}
    return {"path": clip.path, "instruction": clip.instruction, "label": clip.label, "pattern": clip.pattern,
            "task": clip.task, "preset": preset, "reward": result.reward, "status": result.status,
            "T": result.T, "P": result.P, "V": result.V, "failure": result.failure,
            "unverifiable": result.unverifiable, "reasons": list(result.reasons), "notes": list(result.notes),
            "run_id": result.run_id, "faults": [f.model_dump(mode="json") for f in result.faults], **usage, "clip_version": version, "judge": None}


def stale(row: dict[str, Any], clip: EvalClip, version: dict[str, Any] | None) -> bool:
    """True when `row` was scored for another clip than `clip` (whose content identity is now `version`; None:
    no readable file; `evals.clip_identity.stale_version`, which also reads the older stat form). A row
    without the key is from before versions were recorded and counts as current; a row that recorded None
    (the clip was missing then) is stale once a file is there."""
    if row.get("instruction") != clip.instruction:
        return True
    return "clip_version" in row and stale_version(row["clip_version"], clip.path, version)


def damaged(row: dict[str, Any]) -> bool:
    """True when a results.jsonl row cannot be counted as it stands (`check_result_row` refuses it). Such a row is
    scored again, as a missing one is (it crashed the rerun or the table)."""
    try:
        check_result_row(row, "")
    except TableRowError:
        return True
    return False


def check_result_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    """``row`` when it can be counted as it stands; else `TableRowError` naming `where` (``PATH:N``) and the field.
    Refused (hand-edited, written by another tool): a row the table cannot count (`evals.table_rows.check_row`: a
    verdict that is not an object, a usage that is not an object of whole numbers >= 0, faults that are no fault
    records), a usage figure that is no finite number, a status and reward that disagree
    (`evals.batch_rows.checked_reward`: an ineligible row with a reward; a scored or zero row whose reward is not a
    number in 0..1, a zero row whose reward is not 0, another status), or reasons or notes that are not lists of
    strings (the judge was sent a string's characters as reasons, or crashed on a number on every rerun). `raa eval
    reward` scores such a row again (`damaged`); `raa eval report` refuses it, naming its line: the page counted an
    ineligible row's reward of 0.7 toward F+, a reward the next run threw away."""
    check_row(row, where)
    usage = row.get("usage")
    if usage is not None and not all(finite(v) for v in usage.values()):  # NaN / inf beside the counts
        raise TableRowError(f"{where}: field 'usage' must hold finite numbers, got {usage!r}")
    checked_reward(row, where, TableRowError)
    for name in ("reasons", "notes"):
        if not _strings(row.get(name)):
            raise TableRowError(f"{where}: field {name!r} must be a list of strings or null, got {row.get(name)!r:.80}")
    return row


def _strings(value: Any) -> bool:
    """True for None (a row written without the field) or a list of strings."""
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def stamped(row: dict[str, Any], scorer_id: dict[str, Any] | None) -> dict[str, Any]:
    """`row` recording ``scorer_id`` (unchanged without one)."""
    return row if scorer_id is None else {**row, "scorer": scorer_id}


def read_results(path: Path) -> dict[tuple[str, str], dict]:
    """Rows of an existing results.jsonl keyed by (path, preset); last row wins; bad lines are skipped
    (`results_rows`)."""
    return results_rows(path)[0]


def results_rows(path: Path) -> tuple[dict[tuple[str, str], dict], list[SkippedLine]]:
    """Rows of an existing results.jsonl keyed by (path, preset) (last row wins) and the non-blank lines skipped
    (``PATH:N`` and why): not JSON (a line cut by a crash mid-write) or not a row with a string path and preset. A
    file that is not UTF-8 (not one this harness wrote: its rows are ASCII JSON) raises ManifestError naming
    it: skipping it would let the compaction rewrite it without its rows."""
    rows, skipped = results_lines(path, REWARD_ADVICE)
    return {key: row for key, (_, row) in rows.items()}, skipped


REWARD_ADVICE = "results are written there; move it away or choose another --out"
"""`raa eval reward`'s advice for a results.jsonl that is no file (it appends to it)."""
REPORT_ADVICE = "`raa eval report` reads the rows `raa eval reward --out` wrote there; give it a folder that run wrote"
"""`raa eval report`'s (it only reads the file, and takes a folder, no --out)."""


Lines = tuple[dict[tuple[str, str], tuple[str, dict]], list[SkippedLine]]
"""`results_lines`' rows keyed by (path, preset), each with its line ``PATH:N``, and the lines skipped."""


def results_lines(path: Path, advice: str) -> Lines:
    """`results_rows` with each row's line, ``PATH:N`` (`raa eval report` names it in `evals.table_rows.check_row`'s
    error); none where no file is (`results_found`)."""
    found = results_found(path, advice)
    return ({}, []) if found is None else found


def results_found(path: Path, advice: str) -> Lines | None:
    """`results_lines`, or None where no file is, from one look at `path` (`tools.file_kinds.read_at`): `raa eval
    report` asked whether the file was there, then read it by name; removed in between, its page came out empty
    rather than "no evaluation results". A path that is something else than a file (a folder, a FIFO) is refused,
    ending with the command's `advice` (`REWARD_ADVICE`, `REPORT_ADVICE`: each caller names its own); one that cannot
    be read (EACCES) is named as such."""
    try:
        kind, data = read_at(path)  # one look: a file (read once: checked whole, then parsed line by line), nothing, other
    except OSError as exc:  # EACCES ...: `raa eval report`'s catch-all told it as a page it could not write
        raise ManifestError(f"{path} cannot be read ({exc.strerror or exc})") from exc
    if kind == NOTHING:
        return None
    if kind is not None:  # the run appends to it: that failed with a bare IsADirectoryError
        raise ManifestError(f"{path} is not a file: {advice}")
    try:
        decode_text(data)  # the whole file first: a file of another encoding is refused, not skipped line by line
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}): "
                            "not a results file of `raa eval reward`; move it away or save it as UTF-8") from None
    parsed, skipped = usable_rows(path, _result_row, data=data)
    return {(row["path"], row["preset"]): (where, row) for where, row in parsed}, skipped


def _result_row(where: str, row: Any) -> tuple[str, dict[str, Any]]:
    """A results.jsonl line's row with its line; `LineError` for one without a string path and preset."""
    if isinstance(row, dict) and isinstance(row.get("path"), str) and isinstance(row.get("preset"), str):
        return where, row
    raise LineError(f"{where}: not a result row (no string 'path' and 'preset')")
