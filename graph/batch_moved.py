"""Rows of a `raa score-batch` output whose clip was moved since, a symlink left at its old name (`graph.batch`
describes rows and keys; `graph.batch_resume` the other rows a resume touches).

A row's key is of its clip's resolved path (`graph.batch_manifest.item_key`), so moving the clips' folder and leaving
a symlink at its old name changed every key: the resume found none of its rows, scored every clip again and kept the
old rows beside the new ones (4 rows became 8), and the only warning (`graph.batch_resume.edited_rows`) named the rows
with other manifest fields, again at every run.

Decisions:
- A row counts as the row of an item of this run (`moved_rows`: re-keyed to the item's key, nothing scored again) when
  its recorded "path" leads to the file the item's path resolves to now (`graph.batch_manifest.path_identities`) and
  its "instruction", "preset" and "draw" are the item's (draw 0: also a row without one). Its result stands, whatever
  it is (`--retry-ineligible` then judges it as any row of the item). Never a row of another clip, instruction, preset
  or draw, nor a bad manifest line's row or a row of a line repeating another ("repeat_of": those follow their
  line's row, `graph.batch_repeat_rows`; a copy of a row re-keyed has its "repeat_of" re-keyed with it). The output is
  rewritten with the new keys by `graph.batch_resume.drop_rows`, so the next run finds them as they are.
- A manifest moved with the clips (in their folder) and run by its old name: its bad lines' rows, keyed by the
  manifest's resolved path, are known by its old one too (`graph.batch_manifest.given_bad_line_key`: the name as given),
  so they are written again, not kept beside the new ones; its repeat rows are known by the manifest they record
  (`graph.batch_repeat_rows.recorded_manifest`).
- And only a row of that very file: the clip's size, modification time (ns), inode and device now are the ones its
  run recorded ("clip", `graph.batch.clip_stamp`, `graph.batch.same_file`: a folder renamed or moved on its disk keeps
  them; a link left to another folder holding other clips under the same names does not; of the rows under one old
  key, only those are re-keyed: one recording another file then, last under that key, counted for the item), or the
  row records none and holds no reward (ineligible: nothing of the
  clip is taken) for a fault not of the clip, the clip there now (a clip "not found" records none: a link made since at its name to the clips is no move, and
  its clips are scored, as before).
- A row that matches so but cannot be taken safely is not re-keyed, never removed, and named in one warning before
  the batch scores (`moved_warning`): the item already has a row under its key (a duplicate left by a run before
  moved rows were recognised: which of the two results to keep only the researcher knows), another row of older
  key took the item (of two old names, the row found last is taken, as the last row of a key counts), rows under its
  old key lead to another clip of this run too (outputs joined, a link since pointed elsewhere: re-keyed to one item,
  the other's rows went with them, a reward given to another clip), or its clip's recorded stamp is not the clip's now
  (its clip is scored again).
- What the stamp tells apart: another file of another size or modification time; another file of the same size and
  time (an archive unpacked with fixed times, clips of one length behind a re-pointed link), by its inode and device,
  which size and time alone took for the clip (its reward re-keyed to another video). What it cannot: content. A copy
  with its times kept (`cp -p`, `rsync -a`, a folder moved to another disk, then linked) is another file, its clips
  scored again though their bytes are the same (safe: a cost, never another clip's reward); a file made after the
  recorded one was deleted may reuse its inode on the same disk, and with the same size and time reads as it. Rows
  written before the inode was recorded are compared by size and time alone. Only a content hash in the row would
  tell all these apart (each clip read once more per run, as `evals.clip_identity` does for `raa eval reward`).
  `--retry-ineligible` asks size and time alone whether a clip changed (`graph.batch.stamp_unchanged`): a copy with
  its times kept has the content it had, and a device renumbered at a reboot or a remount is no change.
- Such a row of a clip unlike the one recorded is named until the item holds a row of its
  own (scored again), then no more: a link re-pointed (`latest -> day1` to `day2`) left the day-1 rows, results of
  clips still there under their own keys, and each run named them again until they were deleted. Not when the row
  records no clip but holds a reward (it may be the clip's own result, scored twice). A row that carries its line's
  other fields ("id") is then named as any row of an edited line (`graph.batch_resume.edited_rows`, at every run):
  `raa eval compare --pair-by` that field, or `path` (its path leads to the new clip), finds the line twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from graph.batch import clip_stamp, same_file
from graph.batch_manifest import is_bad_line_row, path_identities
from graph.batch_output import Output
from graph.batch_retry import recorded_faults
from tools.jsonl import strict_dumps


@dataclass
class Moved:
    """What `moved_rows` found: the output with the rows taken re-keyed (in `values` and `lines`), how many rows were
    re-keyed, and the rows that match an item but were not taken (`moved_warning`): `left` beside the item's row or
    another taken for it (or under an old key whose rows lead to two items), `changed` of a clip unlike the one their run
    recorded (while the item holds no row of its own)."""

    output: Output
    rekeyed: int = 0
    left: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)


def moved_rows(output: Output, items: list[dict[str, Any]], preset: str, draw: int) -> Moved:
    """The rows of `output` that are rows of `items` (at `preset` and `draw`) under the key of a clip path that has
    moved since (module docstring), re-keyed to their item's key in a copy of `output` (the file is not touched)."""
    sources = [it for it in items if it["error"] is None and it.get("repeat_of") is None]
    wanted = {(it["resolved"], it["instruction"]): it["key"] for it in sources}
    asked = {it["instruction"] for it in sources}  # a row of no such instruction is looked at no further: its path
    # is not resolved (another manifest's rows sharing the output: a readlink each, at every resume)
    paths = {it["key"]: it["path"] for it in sources}
    stamps: dict[str, dict[str, int] | None] = {}  # per item key: its clip's `clip_stamp` now, looked up once
    keys = {it["key"] for it in items}
    held = {row["key"] for row in output.values if isinstance(row, dict) and isinstance(row.get("key"), str)}
    identity = path_identities()
    found: dict[str, list[str]] = {}  # per item key: the old keys of the rows that match it, in file order
    rows_of: dict[tuple[str, str], list[dict[str, Any]]] = {}  # per (old key, item key): its rows that match the item
    leads: dict[str, set[str]] = {}  # per old key: the items its matching rows lead to now (two: taken for neither)
    changed: list[dict[str, Any]] = []
    for row in output.values:
        if not _candidate(row, keys, preset, draw) or row["instruction"] not in asked:
            continue
        key = wanted.get((identity(row["path"]), row["instruction"]))
        if key is None:
            continue
        if key not in stamps:
            stamps[key] = clip_stamp(paths[key])
        if not _same_clip(row, stamps[key]):
            if key not in held or not _superseded(row):  # the item scored since: said no more
                changed.append(row)
        else:
            found.setdefault(key, []).append(row["key"])
            rows_of.setdefault((row["key"], key), []).append(row)
            leads.setdefault(row["key"], set()).add(key)
    new_key: dict[str, str] = {}
    vetted: set[int] = set()  # the rows re-keyed: those found of the very clip, not every row under a taken old key
    left: list[dict[str, Any]] = []
    for key, olds in found.items():
        sole = [old for old in olds if len(leads[old]) == 1]  # an old key of rows leading to two clips now
        # (outputs joined, a link then to one clip now to another): re-keyed to either, the other's rows went with it
        taken = None if key in held or not sole else sole[-1]
        if taken is not None:
            new_key[taken] = key
            vetted.update(id(row) for row in rows_of[(taken, key)])
        left += [row for old in dict.fromkeys(olds) if old != taken for row in rows_of[(old, key)]]
    if not new_key:
        return Moved(output, 0, left, changed)
    values, lines, rekeyed = list(output.values), list(output.lines), 0
    for i, row in enumerate(values):
        if not isinstance(row, dict):
            continue
        if id(row) in vetted:  # a row under the old key of another file then ("changed") stays under it, named
            values[i] = {**row, "key": new_key[row["key"]]}
            rekeyed += 1
        elif row.get("repeat_of") in new_key:
            values[i] = {**row, "repeat_of": new_key[row["repeat_of"]]}
        else:
            continue
        lines[i] = strict_dumps(values[i])
    return Moved(replace(output, values=values, lines=lines), rekeyed, left, changed)


def _same_clip(row: dict[str, Any], now: dict[str, int] | None) -> bool:
    """Whether a moved row may be taken for the clip its path leads to now (of stamp `now`, `graph.batch.clip_stamp`):
    the size and modification time its run recorded ("clip") are the clip's (a folder moved keeps them; a link left
    to another folder of clips under the same names does not), or it records none and holds no reward (an ineligible
    row: nothing of the clip is taken) and no fault of the clip (kind "video": a clip not found or unreadable at its
    run, as one that was not there yet records no size, says nothing of the file its path leads to now; taken, a
    link made since to the clips left them "not found" under their new key, unscored). Never for a clip not there
    now (nothing was moved there: taken, the line kept the old row's fault, not scored "not found" as before)."""
    recorded, result = row.get("clip"), row.get("result")
    if isinstance(recorded, dict):
        return now is not None and same_file(recorded, now)
    return (now is not None and isinstance(result, dict) and result.get("status") == "ineligible"
            and not any(fault.kind == "video" for fault in recorded_faults(result)))


def _superseded(row: dict[str, Any]) -> bool:
    """Whether a row not taken for its item (`_same_clip` false) goes unsaid once the item holds a row of its own
    (module docstring): it records the size and modification time of another file (a link re-pointed), or of the clip
    before it changed, or it holds no reward. One that records none but holds a reward (written before rows recorded
    clips) may be the clip's own, scored twice: named at every run, as the rows `left`."""
    result = row.get("result")
    return isinstance(row.get("clip"), dict) or not isinstance(result, dict) or result.get("reward") is None


def _candidate(row: Any, keys: set[str], preset: str, draw: int) -> bool:
    """Whether `row` may be a moved row of an item of this run: a clip's own row (not a bad line's, nor a repeat's)
    of `preset` and `draw` under a key no item has."""
    recorded = row.get("draw", 0) if isinstance(row, dict) else None
    return (isinstance(row, dict) and isinstance(row.get("key"), str) and row["key"] not in keys
            and row.get("repeat_of") is None and row.get("preset") == preset
            and type(recorded) is int and recorded == draw
            and isinstance(row.get("path"), str) and isinstance(row.get("instruction"), str)
            and not is_bad_line_row(row))


def moved_warning(moved: Moved, out: Any) -> str | None:
    """The one warning naming the rows `moved_rows` matched to an item but did not take; None when there are none."""
    parts = []
    if moved.left:
        first = moved.left[0]
        parts.append(f"{len(moved.left)} row(s) beside the line's own row, another taken for it, or under a key of "
                     f"rows leading to two clips (first: line {first.get('line')}, {first.get('path')!r}): the same "
                     "clip scored twice; delete the one you do not want (`raa eval compare` finds such a clip twice)")
    if moved.changed:
        first = moved.changed[0]
        parts.append(f"{len(moved.changed)} row(s) whose run recorded another size or modification time of the clip, "
                     f"or none (first: line {first.get('line')}, {first.get('path')!r}): maybe another file under that "
                     "name, so the clip is scored again; delete such a row once you know it is stale")
    if not parts:
        return None
    return (f"rows already in {out} name a clip of this manifest by a path that leads to it now (a folder moved, a "
            "link left at its old name?), with a line's instruction, preset and draw, but are not taken as its row "
            "(neither removed): " + "; ".join(parts))


def moved_lines(moved: Moved, out: Any) -> list[str]:
    """What a resume says of the rows `moved_rows` re-keyed."""
    return ([f"{moved.rekeyed} row(s) already in {out} name their clip by a path that now leads to it elsewhere (a "
             "folder moved, a link left at its old name): taken as its rows, not scored again"]
            if moved.rekeyed else [])
