"""Which `raa eval reward` run an evaluation folder's files belong to: DIR/started.json records the run that
last started there (`started_record`, written under the folder's lock before anything is scored), and
summary.json, written when a run finishes, repeats that record with its finish time (`finished_fields`). A
started.json whose run id summary.json does not hold is a run that has not finished: still running, or
stopped (a crash, Ctrl-C, a killed job).

`raa eval report` keeps showing the last finished run's table (the one table.md and table.csv hold: three
files of one folder never disagree), and says on the page which run that is (`shown_run`: its manifest,
finish time, clips and presets) and that a newer run has not finished (`unfinished_note`: its manifest,
start time and how to finish it). Building the page from every row of results.jsonl instead would mix
manifests (the file keeps the rows of earlier ones), and building it from the unfinished run's scope would
show a partial table as if it were one. A started.json that is no JSON object (a hand edit) is no record: the
page says nothing of it, as for a folder written before runs were recorded. One that cannot be opened (a folder of that
name, a FIFO, no read permission) is no hand edit: `RunRecordError` names it (a FIFO blocked the reader forever,
`tools.jsonl.read_bytes`). summary.json is not read here: `raa eval report` reads it once, with its own checks
(`evals.report_index.read_summary`, whose `SummaryError` names one that cannot be read in any way: taken for no
summary, it made the run it records a run "not finished", a claim about a file that was never read), and passes that
object here (`unfinished`).

A record's manifest is an absolute path; records written before it was hold the path as it was given, relative to the
folder the run started in, which no record holds: `raa eval report` run from another folder named a wrong path (in the
repair hint, the header, the finishing command). Such a path is joined to the record's own folder, the only folder it
names (`run_manifest`), when the manifest is there (a suite rendered inside the evaluation folder, or a run started
from it); when it is not, the text names the path as recorded and says so (`relative_manifest_note`): a guessed
folder would name a file that may not be the run's. When the path also names another file from the folder the report
runs in (where the run may have started too: the old reading), neither is taken: the path is named as recorded, with
both files.
"""

from __future__ import annotations

import json
import os
import shlex
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals.eval_views import plural
from tools.jsonl import parsed_file

STARTED = "started.json"
SUMMARY = "summary.json"
TABLE_MD = "table.md"
TABLE_CSV = "table.csv"
RUN_FILES = (STARTED, TABLE_MD, TABLE_CSV, SUMMARY)
"""The files of DIR `raa eval reward` writes whole (results.jsonl aside, appended to): its writers
(`evals.reliability`) and its refusal of a folder in their place name them through these, so the two never differ."""


class RunRecordError(ValueError):
    """DIR/started.json cannot be opened (module docstring); the message names the file."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def started_record(manifest: str | None, presets: list[str], clips: int) -> dict[str, Any]:
    """The record of a run starting now (a fresh run id; `manifest` None when the caller had no file)."""
    return {"run": uuid.uuid4().hex, "manifest": manifest, "presets": list(presets), "clips": clips,
            "started": _now()}


def finished_fields(started: dict[str, Any]) -> dict[str, Any]:
    """What summary.json records of the run `started` describes, finishing now."""
    return {"run": started["run"], "manifest": started["manifest"], "started": started["started"],
            "finished": _now()}


def _read(path: Path) -> dict[str, Any] | None:
    """The JSON object of run record `path`; None without the file or for one that is no JSON object (a hand edit).
    `RunRecordError` naming it when it cannot be opened or read."""
    try:
        value = parsed_file(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RunRecordError(f"{path} cannot be read ({exc.strerror or exc}); {_WAYS}") from None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


_WAYS = "move it away or delete it (`raa eval reward` writes it anew), or rerun `raa eval reward`"


def started_run(out: Path) -> dict[str, Any] | None:
    """DIR's started.json when it records a run (its run id a string); None otherwise (no record, a hand-edited one).
    `RunRecordError` naming it when it cannot be opened (module docstring)."""
    started = _read(out / STARTED)
    return started if started is not None and isinstance(started.get("run"), str) else None


def unfinished(started: dict[str, Any] | None, summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """`started` (`started_run`) when `summary` (summary.json's object, None without one) does not record its run as
    finished; None otherwise. `raa eval report` passes the summary it read already (`evals.report_index`): read
    twice, the file was refused by whichever read came first, and two reads may see two files."""
    if started is None:
        return None
    return None if (summary or {}).get("run") == started["run"] else started


def run_manifest(record: dict[str, Any], folder: Path | None = None) -> str | None:
    """The manifest a run record names; None when it names none, or one that is not a string or is empty (a hand
    edit: 5 made `unfinished_note`'s command a TypeError that ended `raa eval report`, and "" a command with an empty
    ``-m``). Every reader of a record's manifest goes through here (the page's header and its notes agree). A relative
    path (an older record, module docstring) is joined to `folder`, the record's own, when the file is there."""
    manifest = record.get("manifest")
    if not isinstance(manifest, str) or not manifest:
        return None
    if folder is not None and not Path(manifest).is_absolute() and (folder / manifest).is_file() \
            and not _two_files(manifest, folder):
        return os.path.abspath(folder / manifest)  # links kept: the path as the run named it
    return manifest


def _two_files(manifest: str, folder: Path) -> bool:
    """Whether relative `manifest` names one file from the current folder and another from `folder`: the run may
    have started in either (the record does not say), so neither is taken for it (module docstring)."""
    return Path(manifest).is_file() and (folder / manifest).is_file() and not os.path.samefile(manifest, folder / manifest)


def relative_manifest_note(record: dict[str, Any], folder: Path) -> str | None:
    """What to know of a record's manifest recorded as a relative path that is not in its `folder` (module
    docstring); None for any other."""
    manifest = run_manifest(record, folder)
    if manifest is None or Path(manifest).is_absolute():
        return None
    if _two_files(manifest, folder):
        return (f"{manifest} is a path relative to the folder `raa eval reward` ran in (an older raa recorded it so, "
                f"and not the folder), and two files have that name: {os.path.abspath(manifest)} (from this folder) "
                f"and {os.path.abspath(folder / manifest)} (from {folder}): check which one the run read before "
                "running the command")
    return (f"{manifest} is a path relative to the folder `raa eval reward` ran in (an older raa recorded it so, and "
            f"not the folder), and it is not in {folder} ({folder / manifest} is no file): run the command from that "
            "folder, or with the full path of the manifest")


def _time(record: dict[str, Any], name: str) -> str:
    """A record's time stamp `name` as written, or "not recorded" when it is none or no text (a hand edit's
    ``{"a": 1}`` was printed as it is)."""
    value = record.get(name)
    return value if isinstance(value, str) and value else "not recorded"


def _scope_text(record: dict[str, Any]) -> str:
    """"N clips × M presets (names)" of the fields the record holds; one that is no count or no list reads "not
    recorded" (``"clips": true`` read "True clip", a bool being an int)."""
    presets = record.get("presets")
    clips = record.get("clips")
    shown = []
    if "clips" in record:
        shown.append(plural(clips, "clip") if isinstance(clips, int) and not isinstance(clips, bool) and clips >= 0
                     else "clips not recorded")
    if "presets" in record:
        shown.append(f"{plural(len(presets), 'preset')} ({', '.join(map(str, presets))})"
                     if isinstance(presets, list) else "presets not recorded")
    return " × ".join(shown)


def shown_run(summary: dict[str, Any] | None, folder: Path | None = None) -> str:
    """The header line naming the run the table shows (`summary`: summary.json's object, None without one that
    scopes the table; `folder`: summary.json's, which a relative manifest path is joined to, `run_manifest`)."""
    if summary is None:
        return "no finished `raa eval reward` run names its clips (no summary.json, or one written before it " \
               "named them): the table counts every row of results.jsonl"
    manifest = run_manifest(summary, folder)
    text = "the last finished `raa eval reward` run" + (f": manifest {manifest}" if manifest else " (summary.json)")
    if folder is not None and (note := relative_manifest_note(summary, folder)):
        text += f" ({note})"
    if "finished" in summary:  # absent from a summary written before it recorded the time
        text += f", finished {_time(summary, 'finished')}"
    scope = _scope_text(summary)
    return text + (f", {scope}" if scope else "")


def finish_command(manifest: str, out: Path, presets: Any) -> str:
    """The shell command that finishes a run of `manifest` into `out` at `presets` (its record's list; left out
    when it is none): without ``--presets`` the rerun scored the default preset instead (a new run, leaving the
    stopped one unfinished), and a path with a space split in two."""
    words = ["raa", "eval", "reward", "-m", manifest, "-o", str(out)]
    if isinstance(presets, list) and presets and all(isinstance(p, str) for p in presets):
        words += ["--presets", ",".join(presets)]
    return shlex.join(words)


def unfinished_note(record: dict[str, Any], out: Path) -> str:
    """The warning for a run started in `out` that has not finished."""
    manifest = run_manifest(record, out)
    relative = relative_manifest_note(record, out)
    scope = _scope_text(record)
    again = f"`{finish_command(manifest, out, record.get('presets'))}`" if manifest else \
        "`raa eval reward` with its manifest"
    return (f"a newer `raa eval reward` run (manifest {manifest or 'not recorded'}, started {_time(record, 'started')}"
            + (f", {scope}" if scope else "") + ") has not finished (still running, or stopped): its rows are not in "
            f"this table; rerun {again} to finish it (rows already scored are kept)" + (f"; {relative}" if relative else ""))
