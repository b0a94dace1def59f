"""Which rows of a `raa score-batch` output go before a resume runs (`graph.batch` describes rows and keys).

- `--retry-ineligible` first removes the rows of this run's items whose ineligibility another run could
  fix (`graph.batch_retry.retryable`: anything but input and video faults and refusals, e.g. a dead endpoint, a wrong
  model name, a tool crash, a clip "not found" that exists now, a clip its run was not permitted to read that can be read now, and a
  video fault of a clip that changed since its run), so a batch scored against a broken setup is redone after
  the fix without deleting the good rows, nor rows of other draws, presets or manifests in the same output
  (`stale_rows`, `drop_rows`).
- The rows of bad manifest lines of this manifest, preset and draw are removed on every run (`stale_rows`)
  and written again for the lines still bad (`graph.batch.write_bad_lines`): a line fixed, blanked or
  deleted since loses its row (a blanked bad line kept its ineligible row for good: an output of 5 items
  had 6 rows).
- A row that stays takes its manifest line's fields as they are now ("line", "manifest" and "path": the clip as the
  line names it, which rows written before named by its resolved path, a symlink's target; `current_fields`; its
  result and everything else stand): the key names the clip, instruction, preset and draw, so a field added to or
  corrected in the line since ("id", "condition"), or the line moved, kept the old values for good and `raa eval
  compare --pair-by` paired by them. Two manifests sharing an output whose lines name one item with different other
  fields share its one row, which takes the fields of the manifest run last.
- A line whose clip path or instruction was edited is a new item; its old row stays (it may be another manifest's
  row, sharing the output) but is named before the batch starts (`edited_rows`: a row with a line's number and
  other fields and another key), since `raa eval compare` then finds the line's pairing field twice.
- `raa score-batch` counts the rows already in the output that `--retry-ineligible` would score again (`fixable_rows`,
  `fixable_lines`) and says so, on a resume without the flag before it scores and at the end of a run that wrote an
  ineligible row, so that a batch scored against a broken setup does not read as done; with the flag, before it
  scores, only the rows it leaves (over the decode limit, below: they were said only at the end of a run that wrote
  an ineligible row, so a --retry-ineligible run after raising the limit said nothing of them). A count said before
  the run scored is not said again at its end unchanged, and the hints name the batch's own command
  (`rerun_command`: manifest, --out, --preset, --draw), not the bare flag. The row of a line repeating an earlier
  line's clip and instruction under another name or other fields ("repeat_of", `graph.batch_manifest.drop_repeats`)
  is not counted among them: it holds a copy of that line's row, and the flag writes the copy again without a run of
  its own (it was counted, so "N rows ... scores them again" named more runs than the flag made); such rows are
  named apart.
  So are the rows of clips over the decode limit (`over_decode_limit`): final, as any video fault of an unchanged clip,
  but a setting (`RAA_TOOLS_MAX_DECODE_MB`) admits them once raised, and the reason named only the size that would:
  the batch says the row must be deleted for the clip to be scored again, naming the rows by the batch's preset
  and draw (`batch_rows`: told only "the rows whose reason reads VideoTooLargeError", a researcher deleted other
  batches' rows sharing the output, which no run of this batch writes again).
- The rows of lines repeating an earlier line's clip and instruction ("repeat_of") go, stay or are written again
  by `graph.batch_repeat_rows`.
- `raa score-batch` decides what to score from the rows that stay (`graph.batch.done_keys` with `leaving`)
  and loads its tools before any row goes, so a tool that cannot load leaves the output as it was.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph.batch import (
    NOT_JSON,
    Output,
    bad_line_key,
    clip_stamp,
    is_bad_line_row,
    scored_by_other,
    stamp_unchanged,
)
from graph.batch_manifest import given_bad_line_key, given_names
from graph.batch_manifest_file import RowManifests
from graph.batch_output import OutputWriteError, os_problem
from graph.batch_retry import clip_readable, over_decode_limit, rescorable, retryable
from tools.jsonl import finite_json, strict_dumps, write_text_atomic


def stale_rows(manifest: Path, items: list[dict[str, Any]], preset: str, draw: int, *, manifests: RowManifests,
               retry_ineligible: bool, scorer: dict[str, Any] | None = None,
               cwd: str | None = None) -> Callable[[Any], str | None]:
    """Why a row of the output goes before `items` of `manifest` run at `preset` and `draw` ("bad line", "retry"
    or "changed"), None when it stays. "bad line": the row of any bad line of this manifest, preset and draw, the
    line still bad (its row is written again), fixed since (it is scored) or blanked or deleted since (it
    has no item any more): either way one row per line of the manifest as it is now. "retry": with
    `retry_ineligible`, a `retryable` row of one of `items` (its refusals only when its recorded "scorer" differs
    from this run's `scorer`, `graph.batch.scored_by_other`); "changed": with `retry_ineligible`, a `rescorable`
    row of one of them (a quality zero of a clip changed since). Rows of other items (other draws, presets or
    manifests sharing the output) are never touched. Whether a clip can be read now, or changed, is asked of its
    line's name as it is now, which the rerun reads it by, not the row's (a name fixed to another of the same file,
    "gone/../a.mp4" to "a.mp4", keeps the key: asked of the old name, it stayed "not found" one run more). A row's
    answer does not change between calls: whether a clip can be read is looked up once (a clip rendered while the
    tools load would otherwise be kept by `graph.batch.done_keys`, so not scored, and then dropped by `drop_rows`,
    leaving it no row). `cwd`: the shell's working directory (`graph.batch_manifest.shell_cwd`), against which a
    relative manifest name is a name it had too (`given_names`: its bad lines' rows keyed by it are its own, unless
    they record another manifest file: "manifest_file_id", `graph.batch_manifest_file`). `manifests`: the run's one
    view of the manifest names (`RowManifests`, of the file `items` were read from, `graph.batch_manifest.read_items`),
    by which a row's recorded file is judged, as repeat rows are (`graph.batch_repeat_rows.recorded_manifest`)."""
    retry = {it["key"]: it["path"] for it in items} if retry_ineligible else {}
    found: dict[str, bool] = {}

    def readable(path: str) -> bool:  # looked up once: `done_keys` and `drop_rows` ask the same question minutes apart
        if path not in found:
            found[path] = clip_readable(path)
        return found[path]

    now: dict[str, dict[str, int] | None] = {}
    bad_keys: dict[str, tuple[str, set[str]]] = {}  # per line number: its bad line's keys, once (a resolve, digests)
    names = given_names(manifest, cwd)  # a link left at the old name of a manifest moved, maybe the shell's way in

    def bad_key(line: int) -> tuple[str, set[str]]:  # of the resolved name; of the names it was run by
        if (shown := repr(line)) not in bad_keys:  # as written: a hand-edited `true` is not line 1
            bad_keys[shown] = (bad_line_key(manifest, line, preset, draw),  # and of the names it was run by: a
                               {given_bad_line_key(name, line, preset, draw) for name in names})  # manifest moved
        return bad_keys[shown]

    def ours(row: dict[str, Any]) -> bool:  # a bad line's row of this manifest (graph.batch_manifest_file)
        resolved, given = bad_key(row["line"])
        if row.get("key") == resolved:  # whatever file it records: a manifest saved by a rename is a new file
            return True  # (its key is of this preset and draw; a row judged by what it records must say them)
        whose = manifests.whose(row, unnamed="this" if row.get("key") in given else None)
        return whose == "this" and row.get("preset") == preset and row.get("draw", 0) == draw

    def changed(recorded: Any) -> Callable[[str], bool]:  # of one row: its clip unlike its "clip" record
        def differs(path: str) -> bool:
            if path not in now:  # looked up once, as readable
                now[path] = clip_stamp(path)
            stamp = now[path]
            return isinstance(recorded, dict) and stamp is not None and not stamp_unchanged(recorded, stamp)
        return differs

    def goes(row: Any) -> str | None:
        if not isinstance(row, dict):
            return None
        if is_bad_line_row(row) and ours(row):
            return "bad line"
        result, path = row.get("result"), retry.get(row.get("key"))  # the name the rerun reads the clip by
        if (path is not None and isinstance(result, dict)
                and retryable(result, path, readable, changed(row.get("clip")), scored_by_other(row, scorer))):
            return "retry"
        if path is not None and isinstance(result, dict) and rescorable(result, path, changed(row.get("clip"))):
            return "changed"
        return None

    return goes


def current_fields(items: list[dict[str, Any]]) -> Callable[[Any], dict[str, Any] | None]:
    """For a row of the output: the row with the "line", "path" and "manifest" fields of its item among `items` (the
    manifest line as it is now) where they differ from the row's, else None (not one of `items`, or up to date).
    A resume keeps an item's result, but a field added to or corrected in its manifest line since ("id",
    "condition"), or a line moved, reached the output only by deleting the row and scoring the clip again."""
    now = {it["key"]: finite_json({"line": it["line"], "path": it["path"], "manifest": it["manifest"]})
           for it in items if it["error"] is None}  # as the row holds them (a NaN field is written as null)

    def fresh(row: Any) -> dict[str, Any] | None:
        fields = now.get(row.get("key")) if isinstance(row, dict) else None
        if fields is None or all(row.get(k) == v for k, v in fields.items()):
            return None
        return {**row, **fields}

    return fresh


def edited_rows(output: Output, items: list[dict[str, Any]], preset: str, draw: int,
                leaving: Callable[[Any], Any] = lambda row: None) -> str | None:
    """A warning naming the rows of `output` (at `preset` and `draw`) that carry the line number and other fields
    (at least one) of a line among `items` but not its key: most likely that line's row from before its clip path
    or instruction was edited, which stays beside the new one (`raa eval compare` then finds its pairing field
    twice). Only named, never removed: whether such a row is stale (or another manifest's, sharing the output)
    only the researcher knows. None when there are none. Rows for which `leaving` is true
    (`graph.batch_repeat_rows.stale_repeats`: about to go) are not named, nor rows of the line's own clip and instruction (a repeat row, "repeat_of" the key the line
    repeats or is: another manifest's row of the same line, a copy of this manifest sharing the output)."""
    keys = {it["key"] for it in items}
    lines = {(it["line"], strict_dumps(it["manifest"], sort_keys=True)): _clip_of(it)  # per line: its clip's key
             for it in items if it["error"] is None and it["manifest"]}

    def edited(row: dict[str, Any]) -> bool:  # a line's fields, another clip or instruction
        clip = lines.get((row.get("line"), strict_dumps(row["manifest"], sort_keys=True)))
        return clip is not None and clip != _clip_of(row)

    found = [row for row in output.values if isinstance(row, dict) and row.get("key") not in keys
             and row.get("preset") == preset and row.get("draw", 0) == draw and isinstance(row.get("manifest"), dict)
             and edited(row) and not leaving(row)]
    if not found:
        return None
    first = found[0]
    return (f"{len(found)} row(s) already in {output.path} carry the fields of a line of this manifest but another "
            f"clip or instruction (first: line {first['line']}, {first.get('path')!r}): left from an edited line? "
            "Such a row stays beside the line's new one (`raa eval compare` finds its pairing field twice): delete "
            "it, unless it is another manifest's sharing this output")


def _clip_of(row: dict[str, Any]) -> Any:
    """The key of the clip and instruction an item or row holds: the key of the line it repeats ("repeat_of"), or
    its own."""
    return row.get("repeat_of") or row.get("key")


def drop_rows(output: Output, goes: Callable[[Any], str | None],
              fresh: Callable[[Any], dict[str, Any] | None] = lambda row: None, *,
              rewrite: bool = False) -> dict[str, int]:
    """Rewrite the output file as `output` read it (under the batch's lock, so as it still is) without the rows
    that `goes` (`stale_rows`) and with the rows that stay as `fresh` makes them (`current_fields`: None keeps a
    row as it is); returns how many went to be scored again ("retry": ineligible, "changed": a quality zero of a
    clip changed since) and how many stayed with new fields ("updated"). Lines that are not JSON (torn writes) go
    too. The file is replaced in one rename (an interruption leaves the old file or the new one), and only when a
    line goes or changes (as `tools.jsonl.keep_rows`, without reading the file again), or when `rewrite` (`output`
    holds rows re-keyed in memory, `graph.batch_moved.moved_rows`). OutputWriteError when it
    cannot be written (the file is left as it was)."""
    retried = {"retry": 0, "changed": 0, "updated": 0}
    kept = []
    for line, row in zip(output.lines, output.values, strict=True):
        why = None if row is NOT_JSON else goes(row)
        if why in retried:
            retried[why] += 1
        if row is not NOT_JSON and why is None:
            if (new := fresh(row)) is not None:
                retried["updated"] += 1
                line = strict_dumps(new)
            kept.append(line)
    if len(kept) < len(output.lines) or retried["updated"] or rewrite:
        try:
            write_text_atomic(output.path, "".join(line + "\n" for line in kept))
        except OSError as exc:  # the rename did not happen: the old file stands
            what = "without the rows to score again" if len(kept) < len(output.lines) else "with its rows' manifest fields"
            raise OutputWriteError(f"cannot rewrite --out {output.path} {what}: {os_problem(exc)}; the file is left "
                                   "as it was (no row removed or changed)") from exc
    return retried


def fixable_rows(output: Output, manifest: Path, items: list[dict[str, Any]], preset: str, draw: int, *,
                 manifests: RowManifests, scorer: dict[str, Any] | None = None,
                 cwd: str | None = None) -> dict[str, int]:
    """How many clips of `items` whose rows in `output` a run without `--retry-ineligible` keeps the flag would score
    again, by `stale_rows`' why ("retry", "changed"), and how many rows of lines repeating an earlier line's clip and
    instruction it would write again from that line's row ("copied": no run of their own; module docstring): told, a
    batch whose endpoint was down no longer reads as complete. And how many rows the flag leaves though a setting
    would admit their clips ("too_large": over the decode limit, `over_decode_limit`), which only deleting them
    scores again; the copies of those rows are not counted (`fixable_lines` names the rows without "repeat_of": a
    copy goes with its first line's row, `graph.batch_repeat_rows.stale_repeats`). `manifests`, `cwd`: as `stale_rows`'."""
    goes = stale_rows(manifest, items, preset, draw, manifests=manifests, retry_ineligible=True, scorer=scorer,
                      cwd=cwd)
    repeats = {it["key"] for it in items if it.get("repeat_of") is not None}
    sources = {it["key"] for it in items if it["error"] is None} - repeats  # once: per row, quadratic in the batch
    found: dict[str, set[str]] = {"retry": set(), "changed": set(), "copied": set(), "too_large": set()}
    copies = []  # the rows of `repeats`: judged by their first line's row (`graph.batch_repeat_rows`), once all read
    for row in output.values:
        if isinstance(row, dict) and row.get("key") in repeats:
            copies.append(row)
        elif row is not NOT_JSON and (why := goes(row)) in ("retry", "changed"):
            found[why].add(row["key"])
        elif (isinstance(row, dict) and why is None and row.get("key") in sources
              and over_decode_limit(row.get("result"))):
            found["too_large"].add(row["key"])
    going = found["retry"] | found["changed"]
    found["copied"] = {row["key"] for row in copies if row.get("repeat_of") in going}
    return {why: len(keys) for why, keys in found.items()}


def _them(n: int) -> str:
    return "it" if n == 1 else "them"


def told_first(fixable: dict[str, int], *, retrying: bool) -> dict[str, int]:
    """The counts of `fixable_rows` that `raa score-batch` says before it scores (`fixable_lines`): all of them on a
    plain resume; at the start of a `--retry-ineligible` run only the rows the flag leaves though a setting would
    admit them ("too_large"), as it removes the others (`removed_lines`) and says so."""
    return {"too_large": fixable.get("too_large", 0)} if retrying else fixable


def rerun_command(manifest: Path, out: Path, preset: str, draw: int) -> str:
    """The `raa score-batch` command of this batch (its manifest, --out, --preset and --draw: what picks its rows;
    --processes and the like only say how it runs), quoted for a shell: the command the hints of `fixable_lines`
    name. A relative manifest whose name starts with "-" is written "./-m.jsonl": the command line reads "-m.jsonl" as
    an option ("No such option"), and a Path drops the "./" the user typed."""
    name = str(manifest)
    words = ["raa", "score-batch", f"./{name}" if name.startswith("-") else name, "--out", str(out), "--preset", preset]
    return shlex.join(words + (["--draw", str(draw)] if draw else []))


def fixable_lines(fixable: dict[str, int], out: Path, rerun: str | None = None,
                  said: dict[str, int] | None = None, *, preset: str | None = None, draw: int = 0) -> list[str]:
    """What `raa score-batch` says of the rows `fixable_rows` counted (before it scores, `told_first`; at the end of a
    run that wrote an ineligible row, all of them), nothing when there are none; `rerun`: the batch's command
    (`rerun_command`, without the flag), named as the command that scores the rows again (with the flag, in a line
    of its own) and that scores the clips over the decode limit once their rows are deleted: "--retry-ineligible"
    alone named neither the manifest nor --preset nor --draw, and the command a researcher pieced from it ran
    another batch. `said`: the counts said before the run scored (`told_first`); one said then is not said again
    unchanged (a --retry-ineligible run still down said its rows over the decode limit at its start and again at
    its end). `preset` and `draw`: the batch's, by which the hint names the rows over the decode limit to delete
    (`batch_rows`; the rows of other batches sharing `out` are not counted, and the hint says to leave them)."""
    lines = []
    if said:
        fixable = {why: n for why, n in fixable.items() if said.get(why) != n}
    if n := fixable.get("retry", 0):
        lines.append(f"{n} of the rows already in {out} ineligible for a reason a rerun can fix: "
                     f"--retry-ineligible scores {_them(n)} again")
    if n := fixable.get("changed", 0):
        lines.append(f"{n} zero row(s) already in {out} whose clip changed since the quality check zeroed it: "
                     f"--retry-ineligible scores {_them(n)} again")
    if n := fixable.get("copied", 0):
        lines.append(f"{n} row(s) already in {out} of a line repeating an earlier line's clip and instruction hold its "
                     f"result: --retry-ineligible writes {_them(n)} again from that line's row")
    if lines and rerun is not None:
        lines.append(f"  {rerun} --retry-ineligible")
    if n := fixable.get("too_large", 0):
        lines.append(f"{n} row(s) already in {out} ineligible for a clip over the decode limit its reason names: final "
                     f"while the clip is unchanged (--retry-ineligible leaves {_them(n)}); after raising the limit, "
                     f"delete {_them(n)} (the {'row' if n == 1 else 'rows'}{batch_rows(preset, draw)} whose reason "
                     f"reads VideoTooLargeError and that {'has' if n == 1 else 'have'} no \"repeat_of\"; the copies "
                     "that have one follow" + (f"; rows of other presets, draws or manifests in {out} are not counted: "
                                               "leave them" if preset is not None else "")
                     + f") and run again to score {'its clip' if n == 1 else 'their clips'}"
                     + (f": {rerun}" if rerun is not None else ""))
    return lines


def batch_rows(preset: str | None, draw: int) -> str:
    """How the hint of `fixable_lines` names a batch's rows among those sharing its output: by their "preset" and
    "draw" fields (draw 0: also the rows without one, written before draws existed) and as this manifest's clips
    (another manifest's rows may hold the same preset and draw); nothing without a `preset`."""
    if preset is None:
        return ""
    return (f" with \"preset\": {strict_dumps(preset)} and \"draw\": {draw}{' (or none)' if draw == 0 else ''} "
            "of this manifest's clips")


def updated_lines(removed: dict[str, int], out: Path) -> list[str]:
    """What a resume says of the rows `drop_rows` brought to their manifest line's current fields."""
    return ([f"{n} row(s) already in {out} took their manifest line's current fields (line number, clip path, "
             "other fields; their results stand)"] if (n := removed["updated"]) else [])


def removed_lines(removed: dict[str, int], out: Path) -> list[str]:
    """What `--retry-ineligible` says of the rows `drop_rows` removed to score again: each kind removed, or "0
    ineligible row(s) removed" when none was (only changed clips' zero rows removed also read "0 ineligible")."""
    lines = []
    if (n := removed["retry"]) or not removed["changed"]:
        lines.append(f"{n} ineligible row(s) removed from {out} to score again")
    if n := removed["changed"]:
        lines.append(f"{n} zero row(s) whose clip changed since the quality check zeroed it removed from {out} "
                     "to score again")
    return lines
