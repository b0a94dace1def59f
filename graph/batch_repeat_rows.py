"""The rows of lines repeating an earlier line's clip and instruction in a `raa score-batch` output, before a resume
runs (`graph.batch_resume` decides the other rows; `graph.batch_manifest.drop_repeats` makes such lines items, and
`graph.batch.write_repeats` writes their rows). Split from graph.batch_resume.

The row of a line repeating an earlier line's clip and instruction ("repeat_of") is a copy of that line's row, kept only
while it is one (`stale_repeats`): it goes, to be written again from that line's row, when that row goes or holds
another result (deleted by hand to score the clip again: the repeats kept the old result beside the new), and only then,
never for its own fault (its own name readable where the first line's is not, the flag wrote the same copy again at
every run and every resume offered it as a row the flag fixes; nor is it among the rows `--retry-ineligible` says it
removed to score again), and it goes for good when no line of the manifest has its key any more (a repeat line deleted:
the repeats after it move up a place, `graph.batch_manifest.repeat_key`, and the last one's old row stayed, its id twice
in the output): known as this manifest's by the "manifest_file" it records (or a name that is this manifest now: a link
left at the old name of a manifest moved; where the row records the manifest's file, "manifest_file_id", only when that
is this file, and under any name when it is: `graph.batch_manifest_file`), or for a row that records none (an output
written before rows did) by its key among the places as many as the output's rows repeating that line, or by its clip
and other fields, those of one of the manifest's repeat lines at whatever line (a line dropped with its row left the
next one's old row, keyed past them and recording its old line, beside its new one).
Only rows repeating one of this run's items are touched, and of those only this manifest's go for their line (keys are
per manifest): another manifest sharing the output keeps its repeat rows while they are copies (with more or fewer
repeats of one clip, each run deleted or overwrote the other's, which its next run wrote again), and when the row they
copy goes (scored again), this run writes them again from the new row too, as that manifest holds them now
(`others_copies`: they went, and that manifest's ids were missing from the output until it ran again). Those copies stay
in the output as they are until then, and the ones written again replace them once written (`drop_replaced`): removed
before the clip was scored, a run stopped before its new row (Ctrl-C, a crash, a full disk) lost them for good. Rows
keyed before keys were per manifest are taken as this manifest's: they go, and are written again under its keys.
A row under another key holding one of this manifest's repeat lines as it is goes too when the manifest it records
("manifest_file") is gone (no file there now: a folder in its place too), renamed or moved (its rows stayed beside the
new name's, each id twice), or when it records none; while that manifest exists (a copy of this one, or an extended
copy, sharing the output) it stays: each run removed the other's rows and wrote its own again.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph.batch import NOT_JSON, ROW_FIELDS, Output, file_stamp, kept_rows, manifest_fields
from graph.batch_manifest import drop_repeats, manifest_items, repeat_keys
from graph.batch_manifest_file import RowManifests, Whose
from tools.jsonl import finite_json, strict_dumps, write_text_atomic


def stale_repeats(output: Output, manifests: RowManifests, items: list[dict[str, Any]],
                  goes: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    """`goes` (`stale_rows`), and "repeat" for a row repeating one of `items` ("repeat_of" its key) that is no copy of
    that item's row as it stays in `output` (that row goes, or holds another result), or that is a row of
    `manifests.read`'s (its "manifest_file"; for a row that records none, `graph.batch_manifest.repeat_keys` or the clip and fields of one
    of its repeat lines) whose line is gone (its key is none of `items`'), or under another key a row of one of its
    repeat lines as it is now (line, clip path, fields) whose manifest is gone (its "manifest_file" no longer names a
    file, or it records none: the manifest's row before it was renamed or moved, which would stay beside the one this
    run writes; `recorded_manifest`): module docstring. Such a row is judged by that item's row alone, never by `goes`:
    a copy goes when its first line's row does, and a rerun writes it again from that row; judged on its own (its own
    path readable, the first line's not), it went for "retry" and came back the same copy, at every --retry-ineligible.
    The rows that stay are looked up once, at the first row asked about. `manifests`: the run's one view of the
    manifest names (`RowManifests`, of the file `items` were read from, `graph.batch_manifest.read_items`), the one
    `goes` judges bad lines' rows by too."""
    sources = {it["key"] for it in items if it["error"] is None and it.get("repeat_of") is None}
    repeats = {it["key"] for it in items if it.get("repeat_of") is not None}
    staying: list[dict[str, Any]] = []  # [the results of the rows of `sources` that stay], once looked up
    ours: set[str] = set()  # the keys of `read`'s repeat rows of `sources`, now or before, among those in `output`
    lines = repeat_lines(items)  # this run writes rows of these
    named = {fields[1:] for fields in lines}  # their clips and fields, at any line
    name = manifests.read.name  # as the keys and the rows hold it (an item's "manifest_file")
    whose = recorded_manifest(manifests, lines)

    def went(row: Any) -> str | None:
        source = row.get("repeat_of") if isinstance(row, dict) else None
        if not isinstance(source, str) or source not in sources:
            return goes(row)
        if not staying:
            staying.append({key: r.get("result") for key, r in kept_rows(output, goes).items() if key in sources})
            places = Counter(r.get("repeat_of") for r in output.values if isinstance(r, dict))
            ours.update(k for key in sources for k in repeat_keys(name, key, places[key]))
        if source not in staying[0] or staying[0][source] != row.get("result"):
            return "repeat"
        # one it records as written by this manifest (its place may lie past the repeat rows left in the output: a
        # line dropped with its row), or one recording none of a line's clip and fields, whatever its line (as
        # much past them: the place is not known); a renamed or moved manifest's row of the line as it is; a copy
        # of the manifest, still there, keeps its own
        mine = (row.get("key") in ours or whose(row) == "this"
                or ("manifest_file" not in row and _line_fields(row)[1:] in named)
                or (_line_fields(row) in lines and whose(row) != "other"))
        return "repeat" if row.get("key") not in repeats and mine else None

    return went


def recorded_manifest(manifests: RowManifests,
                      lines: frozenset[tuple[Any, Any, str]] = frozenset()) -> Callable[[dict[str, Any]], Whose]:
    """Whose a repeat row is (`graph.batch_manifest_file.RowManifests.whose`, the rule a bad line's row is judged by
    too) by the "manifest_file" it records (`graph.batch.write_repeats`): "this" when that is
    `manifest` (a resolved path), or a name that is `manifest`'s file now (the old name of a manifest moved with a
    symlink left there, or another hard link to it: taken for another manifest, its rows stayed beside the ones written
    under this name, each id twice); "other" when it names another file, there now: that manifest's (a copy of this one
    sharing the output, or an extended copy, holds the same repeat lines), never a renamed or moved manifest's left
    behind; None when it records none (written before rows did: not known to be another's) or no file is there (gone; or
    a folder in its place, which holds no line: taken for a manifest that cannot be read, its copies were written again
    as they stood at every run that scored their row again, for good). Looked up once per name. A row recording the
    manifest's file ("manifest_file_id", `graph.batch_manifest_file`) under another name than `manifest` is
    "this" when that is `manifest`'s file and the name is no manifest's own name now (a manifest moved, no link left;
    or the name leads here through a link), and never when it is another file: a name leading here now may have led to
    another manifest when the row was written (a link re-pointed), "other" while a file is there, None when none is.
    A name that is another manifest's own (`own_name`) is that manifest's even when the row records this file: an
    inode freed by that manifest's save by a rename and given to this one (`cp a.jsonl b.jsonl`) took its rows.
    A row recording another file under a name leading here now is "this" all the same when it records the folder that
    name leads into now ("manifest_folder_id": the folder moved, the link left at its old name) or holds one of `lines`
    (`repeat_lines`: this manifest's repeat lines as they are now, at their line, clip and fields): a manifest moved
    with a link left at its old name and then saved by a rename is another file for its rows written before; taken
    for another's, they stayed beside the ones this run wrote under the new name, each id twice for good (for a row
    recording no folder, one of a line edited or deleted since still does). A link re-pointed at a manifest holding
    the very line written the same, or at another file of the same folder, is not told apart: that row goes, as it did
    before rows recorded files, and is written again by its own manifest's next run. `manifests`: the run's one view
    of the manifest names, of the file it read (`graph.batch_manifest.read_items`), the one rows are judged against;
    `manifest`, its resolved name."""
    def held(row: dict[str, Any]) -> bool:
        return _line_fields(row) in lines

    return lambda row: manifests.whose(row, held=held)


def repeat_lines(items: list[dict[str, Any]]) -> frozenset[tuple[Any, Any, str]]:
    """`_line_fields` of each line among `items` repeating an earlier line's clip and instruction ("repeat_of")."""
    return frozenset(_line_fields(it) for it in items if it.get("repeat_of") is not None)


def _line_fields(row: dict[str, Any]) -> tuple[Any, Any, str]:
    """A repeat item's or row's line number, clip path and other fields, as its row holds them (a NaN field as null)."""
    return row.get("line"), row.get("path"), strict_dumps(finite_json(row.get("manifest")), sort_keys=True)


def others_copies(output: Output, manifests: RowManifests, items: list[dict[str, Any]],
                  goes: Callable[[Any], str | None]) -> list[dict[str, Any]]:
    """The rows of `output` of another manifest sharing it, still there (`recorded_manifest`), that go (`goes`, of
    `stale_repeats`) for no longer being a copy of the row of one of `items` they repeat (that row goes, to be scored
    again, or holds another result), as items for `graph.batch.write_repeats` to write again from that row: that
    manifest's repeat lines as it holds them now (`current_repeats`: key, fields, "repeat_of" and "manifest_file"), one
    per key, none of a key with a row that stays (two outputs concatenated: the first one's copy went and came back
    beside the second one's, its id twice for good). A row whose line that manifest no longer holds (deleted, or now
    repeating another clip), or lacking one of the fields, is left to go: written again as it stood, a stale row took
    a new result and stayed until that manifest ran again; one whose line's fields changed since is written with
    them (the old ones came back until then). One of a manifest that cannot be read as it stands now is written
    again as it stood (`current_repeats`)."""
    sources = {it["key"] for it in items if it["error"] is None and it.get("repeat_of") is None}
    whose = recorded_manifest(manifests, repeat_lines(items))
    staying = kept_rows(output, goes)  # a key with a row that stays has its row (two outputs concatenated)
    lines = current_repeats()
    copies = {}
    for row in output.values:
        if (isinstance(row, dict) and row.get("repeat_of") in sources and all(k in row for k in ROW_FIELDS)
                and whose(row) == "other" and goes(row) == "repeat" and row["key"] not in staying
                and (line := lines(row)) is not None):
            copies[row["key"]] = line
    return list(copies.values())


def current_repeats() -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """For a repeat row of another manifest (its "manifest_file"): the item of that manifest's line of the row's key as
    the manifest holds it now, at the row's preset and draw, repeating the clip the row repeats; None when it holds no
    such line (the row goes, and that manifest's next run writes its line's row). Each manifest is read once per
    preset and draw. When it cannot be read as the file the row names (unreadable now, or that name a link left at
    a manifest moved, whose lines are keyed by its new name), whether it holds the line is not known: the row as it
    stood (dropped, that manifest's id was missing from the output until it ran again)."""
    read: dict[tuple[str, str, int], dict[str, dict[str, Any]] | None] = {}

    def line(row: dict[str, Any]) -> dict[str, Any] | None:
        name, preset, draw = row["manifest_file"], row["preset"], row["draw"]
        if not (isinstance(name, str) and isinstance(preset, str) and isinstance(draw, int)):
            return None
        if (name, preset, draw) not in read:
            try:
                found = (drop_repeats(manifest_items(Path(name), preset, draw)[0])[0]
                         if os.path.realpath(name) == name else None)
            except (OSError, ValueError):  # unreadable (or gone since `recorded_manifest` looked)
                found = None
            read[name, preset, draw] = (None if found is None else
                                        {it["key"]: it for it in found if it.get("repeat_of") is not None})
        held = read[name, preset, draw]
        if held is None:
            return {**{k: row[k] for k in ROW_FIELDS}, "repeat_of": row["repeat_of"], "manifest_file": name,
                    **manifest_fields(row)}
        item = held.get(row["key"])
        return item if item is not None and item["repeat_of"] == row["repeat_of"] else None

    return line


def keeping(goes: Callable[[Any], str | None], copies: list[dict[str, Any]]) -> Callable[[Any], str | None]:
    """`goes`, but None for the rows of the keys of `copies` (`others_copies`: another manifest's copies of a row this
    run scores again), for `graph.batch_resume.drop_rows`: they stay as they are until their new copy is written,
    which `drop_replaced` then leaves alone (a run stopped before the new row lost them, and their manifest's ids)."""
    keys = {copy["key"] for copy in copies}

    def went(row: Any) -> str | None:
        return None if isinstance(row, dict) and row.get("key") in keys else goes(row)

    return went


def drop_replaced(before: Output, now: Output, copies: list[dict[str, Any]]) -> Output:
    """Remove from the output file (`now`: as the run left it, read once at its end) the rows of the keys of `copies`
    (`keeping`) that a row of the same key written since `before` (the output as this run read it) replaced: all but
    the last row of such a key, so one row per key. A key with no row written since keeps its rows as they were (the
    run stopped before its new row). The file is replaced in one rename, only when a row goes. Returns the output as
    it is left (`now`, less the rows that went), for what the run says of it next without reading it again; OSError
    when the file cannot be rewritten (the old rows stay beside the new: the next run of either manifest removes
    them)."""
    keys = {copy["key"] for copy in copies}
    had = Counter(row.get("key") for row in before.values if isinstance(row, dict))
    has = Counter(row.get("key") for row in now.values if isinstance(row, dict))
    written = {key for key in keys if has[key] > had[key]}
    last = {row["key"]: i for i, row in enumerate(now.values) if isinstance(row, dict) and row.get("key") in written}
    kept = [i for i, row in enumerate(now.values)
            if row is NOT_JSON or not isinstance(row, dict) or last.get(row.get("key"), i) == i]
    if len(kept) == len(now.lines):
        return now
    lines = [now.lines[i] for i in kept]
    write_text_atomic(now.path, "".join(line + "\n" for line in lines))
    return Output(now.path, lines, [now.values[i] for i in kept], None, file_stamp(now.path))
