"""The manifest of `raa score-batch` (`graph.batch` describes the rows and the resume): its lines as batch items,
their resume keys, and the manifests refused or warned about before the batch starts. Split from graph.batch, which
re-exports these names.

Decisions where the issue was silent:
- A manifest line that is not valid JSON, not UTF-8, or lacks path/instruction gets its own ineligible row
  (kind "input", reason "manifest: input: line N: ...") without calling the model, keyed per manifest and line
  (`bad_line_key`) and rewritten on every run: a line fixed since gets scored and its old row goes; a row that names
  its clip under another common key ("video", "file", "clip", "video_path") or its task under
  "prompt"/"task"/"caption" is told which field to rename. A UTF-8 byte-order mark (files saved by Windows editors
  and PowerShell) is skipped.
- Blank lines, and comment lines (whose first character other than white space is "#"), are skipped: JSON lines
  have no comments, but a line "commented out" is a clip the researcher meant to leave out, and its ineligible
  "input" row (not valid JSON) counted among the bad lines of every run. `raa score-batch` says how many comment
  lines it skipped (`manifest_items` gives their numbers, of the one read of the manifest its items come from).
- A row names its clip as the manifest gave it (joined to the manifest's folder, symlinks not followed: a clip in a
  Hugging Face cache's "snapshots" folder is not named by its "blobs/<sha>" target); the resume key is of the
  resolved path, so two names of one file are one clip (`item_key`). A path with ".." parts ("../clips/a.mp4") is
  named without them ("<parent>/clips/a.mp4", not "<folder>/../clips/a.mp4") where that names the same file, and as
  given where it does not (a symlink before the ".." makes it lead out of the link's target, not back to the folder
  the link is in: the name without it would be another file than the run scored). The run reads the clip by the name
  its row gives.
- A line repeating an earlier line's clip and instruction is scored once (`drop_repeats`): a line whose name of the
  clip and other fields are the earlier line's too gets no row of its own (it would be the same row twice, which
  `raa eval compare` refuses as a duplicate); a line whose other fields differ (another "id"), or that names the
  clip by another name (two links to one file, as a Hugging Face cache's snapshots link into one blob: one key,
  `item_key`), gets its own row, under its own key (`repeat_key`: its manifest and place among them), holding the
  earlier line's result (`graph.batch.write_repeats`), "repeat_of" its key and "manifest_file" its manifest, so no
  id and no name of the manifest is missing from the output (the second name was dropped as a repeat, and a
  researcher looking up its row found none). Names are
  told apart as rows give them (`_named`); two hard links are two paths that resolve apart, so two keys, each
  scored. The earlier line's result is taken whatever it is, also a failure to open the clip by the earlier line's
  name that this line's name would not meet (not scored under its own name): names of one key reach one file through
  folders that let its links be read (a folder that does not leaves the name unresolved: another key, scored on its
  own), so their permissions to read it are the same; they differ only where the earlier name passes a missing or
  unsearchable folder before a ".." ("gone/../a.mp4", which the key resolves away), or a policy reads the name (a
  link followed against fs.protected_symlinks, a path-based security module). The failure names the earlier line's
  path, and fixing that line's path fixes both rows; scoring such a line under its own name would need a run per
  line and a copy that differs from its line's row, which the resume (`graph.batch_repeat_rows`) and the
  readers (`same_run`) take as another run. Nor does `--retry-ineligible` judge the copy by its own name (it would
  write the same copy again at every run).
- A manifest of two or more lines none of which is a JSON object (a video, a CSV, a pretty-printed JSON array given
  by mistake), or one that opens a JSON array on its first line however the array is laid out, is refused before
  anything is written (`not_json_lines`, exit 2).
- Readers of the output that tell clips apart by path take the resolved one (`clip_identity`), as the key does: rows
  written before rows named clips as given named them by their resolved path. A reader resolves each folder once
  (`path_identities`): `os.path.realpath` of every row's path stats each of its folders, slow on a network disk.
- Clips missing where a manifest points but present relative to the current directory get a warning before the
  batch starts (`misplaced_paths`); their rows are still "video not found".
- The rows of bad lines and of repeat lines record the manifest file they were written from ("manifest_file_id":
  inode and device, `graph.batch_manifest_file`, which says when a row is taken for this manifest's by it): a name
  leading to this manifest now (a link re-pointed at another folder) may have led to another one when the row was
  written, and that manifest's rows went with this one's.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph.batch_manifest_file import ManifestFile, file_id, manifest_folder_id
from tools.file_kinds import read_file
from tools.jsonl import parsed_line, strict_dumps


def item_key(path: str, instruction: str, preset: str, draw: int = 0) -> str:
    """Resume key of one batch item (draw 0: the key of an item named without a draw)."""
    return _digest([path, instruction, preset] + ([draw] if draw else []))


def _digest(fields: list[Any]) -> str:
    """A resume key: the first 32 hex digits of the sha256 of `fields` as JSON (`item_key`, `repeat_key`)."""
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32]


FIELD_ALIASES = {"path": ("video", "video_path", "file", "clip"), "instruction": ("prompt", "task", "caption", "text")}
"""Keys a manifest row may use by mistake for each field; `manifest_row_error` names the rename."""


def manifest_row_error(row: dict[str, Any]) -> str:
    """Why `row` is not a manifest row (it lacks a string `path` or `instruction`, or its path is empty): per
    field, the key to rename when the row uses one of `FIELD_ALIASES` instead, else whether the field is
    missing, empty or not a string."""
    hints = []
    for field, aliases in FIELD_ALIASES.items():
        value = row.get(field)
        if isinstance(value, str) and (value or field != "path"):
            continue
        alias = next((a for a in aliases if a in row), None)
        hints.append(f"rename '{alias}' to '{field}'" if alias is not None and field not in row
                     else f"'{field}' is missing" if field not in row
                     else f"'{field}' is empty" if isinstance(value, str) else f"'{field}' is not a string")
    return ("a manifest row needs string fields 'path' and 'instruction'"
            + (f" ({'; '.join(hints)})" if hints else ""))


def bad_line_key(manifest: Path, number: int, preset: str, draw: int = 0) -> str:
    """Resume key of the row of manifest line `number` when that line is bad: per manifest file (two manifests
    sharing an output no longer share "line 8"'s key), and removed again on every run (`graph.batch_resume`),
    so such rows always describe the manifest as it is now."""
    return item_key(f"<{manifest.resolve()} line {number}>", "", preset, draw)


def given_bad_line_key(manifest: Path | str, number: int, preset: str, draw: int = 0) -> str:
    """`bad_line_key` of the manifest's name as given (absolute, symlinks not followed; `given_names`), not resolved:
    the name it resolved to when a run before its folder was moved, a symlink left at the old name
    (`graph.batch_moved`), wrote the row; not recognised as this manifest's (`graph.batch_resume.stale_rows`), that
    row stayed beside the new one."""
    return item_key(f"<{os.path.abspath(manifest)} line {number}>", "", preset, draw)


def shell_cwd(pwd: str | None) -> str | None:
    """The shell's name of the working directory: `pwd` (its $PWD, read by the CLI) when it is an absolute name of the
    directory this process is in, else None (unset, relative, or left by a parent that changed directory since). In a
    folder entered through a symlink (`cd clips`, a link left at a moved folder) the process's own name of it
    (`os.getcwd`) is the link's target; only $PWD still names the link."""
    if pwd is None or not os.path.isabs(pwd):
        return None
    try:
        return pwd if os.path.samefile(pwd, os.curdir) else None
    except (OSError, ValueError):
        return None


def given_names(manifest: Path, cwd: str | None = None) -> list[str]:
    """The absolute names of `manifest` as given, symlinks not followed: against the process's working directory and
    against the shell's (`cwd`, `shell_cwd`: a manifest run from inside a link by a relative name, `cd clips; raa
    score-batch m.jsonl`, is named through the link only there), each only while it names the manifest's file (a
    ".." after a link leads elsewhere than the name without it, which may be another manifest's: its bad lines'
    rows would go with this one's). `given_bad_line_key` of each."""
    names = [os.path.abspath(manifest)] + ([os.path.normpath(os.path.join(cwd, manifest))] if cwd is not None else [])
    found = []
    for name in dict.fromkeys(names):
        try:
            if os.path.samefile(name, manifest):
                found.append(name)
        except (OSError, ValueError):
            continue
    return found


def _lines(manifest: Path) -> tuple[list[tuple[int, bytes]], dict[str, int]]:
    """(number, bytes) of each line of `manifest`, split at "\n" only (a UTF-8 byte-order mark skipped), and the
    `file_id` of the very file read (`tools.file_kinds.read_file`: stat'ed by name before the read, an editor's save
    by a rename in between paired the old file's inode with the new file's lines). A FIFO or a folder put there since
    `raa score-batch` looked is an OSError, not a read waiting for a writer."""
    data, found = read_file(manifest)
    data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data  # a UTF-8 byte-order mark
    return list(enumerate(data.split(b"\n"), start=1)), file_id(found)


def _comment(raw: bytes) -> bool:
    """A comment line: "#" its first character other than white space (module docstring)."""
    return raw.lstrip().startswith(b"#")


def read_manifest(manifest: Path, preset: str, draw: int = 0) -> list[dict[str, Any]]:
    """The items of `manifest` (`manifest_items`), without its comment lines' numbers."""
    return manifest_items(manifest, preset, draw)[0]


def manifest_items(manifest: Path, preset: str, draw: int = 0) -> tuple[list[dict[str, Any]], list[int]]:
    """The items and comment lines' numbers of `read_items`."""
    items, comments, _ = read_items(manifest, preset, draw)
    return items, comments


def read_items(manifest: Path, preset: str,
               draw: int = 0) -> tuple[list[dict[str, Any]], list[int], ManifestFile]:
    """Manifest rows as batch items of stage-cache `draw`, and the numbers of the comment lines skipped, both of one
    read of the file (read again for the comments, a manifest edited meanwhile had its comments counted from
    another file than its items). A bad line becomes an item carrying an `error`; blank and comment lines are
    skipped. An item's `path` is the row's own string joined to the manifest's folder (symlinks not
    followed: what its output row names), `resolved` that path resolved (what its `key` is of), `written` the row's
    own string, `manifest_file` the manifest's resolved path (`repeat_key`) and `manifest_file_id` the `file_id` of the
    file read, `manifest_folder_id` of its folder (module docstring); and the file read (`ManifestFile`, of the same:
    what the resume judges rows against). Lines are decoded one by one: a line that is not UTF-8 text, or whose path
    cannot be a file name (a NUL byte), is a bad line like one that is not JSON."""
    base = manifest.resolve().parent
    items, comments, source = [], [], str(manifest.resolve())
    lines, identity = _lines(manifest)
    read = ManifestFile(source, identity, manifest_folder_id(source))  # the folder: where a row's name leads into
    for number, raw in lines:
        if _comment(raw):
            comments.append(number)
            continue
        error: str | None = None
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line, error = "", (f"line {number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                               f"{exc.start + 1}; save the manifest as UTF-8)")
        if error is None and not line.strip():
            continue
        path, instruction, row, shown, resolved, is_object = "", "", {}, "", "", False
        if error is None:
            try:
                try:
                    row = parsed_line(line)
                except json.JSONDecodeError as exc:  # its "line 1 column 5 (char 4)" is of this one line
                    raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
                if not isinstance(row, dict):
                    raise ValueError("a manifest line must be a JSON object")
                is_object = True
                given, asked = row.get("path"), row.get("instruction")
                if not isinstance(given, str) or not given or not isinstance(asked, str):
                    raise ValueError(manifest_row_error(row))
                path, instruction = given, asked
                resolved = str((base / path).resolve())
                shown = _named(base / path, resolved)
            except (ValueError, OSError, RuntimeError) as exc:  # of resolve: a name no file can have, a symlink loop
                error = f"line {number}: {exc}"
        if error is not None:
            row, path, instruction = {}, bad_line_path(number), ""
            key, shown, resolved = bad_line_key(manifest, number, preset, draw), path, path
        else:
            key = item_key(resolved, instruction, preset, draw)
        extra = {k: v for k, v in row.items() if k not in ("path", "instruction")}
        items.append({"key": key, "line": number, "path": shown, "resolved": resolved, "written": path,
                      "instruction": instruction, "preset": preset, "draw": draw, "manifest": extra, "error": error,
                      "object": is_object, "array": line.lstrip().startswith("["), "manifest_file": source,
                      "manifest_file_id": read.identity, "manifest_folder_id": read.folder})
    return items, comments, read


def _named(path: Path, resolved: str) -> str:
    """`path` as its row names it (module docstring): without its ".." parts when that names the file it names
    (`resolved`), else as given (a link before a ".." makes the ".." lead elsewhere than the folder it is in; a
    missing folder before a ".." makes the path name no file, which realpath's lexical ".." hides)."""
    plain = os.path.normpath(path)
    try:
        same = plain != str(path) and os.path.exists(path) and os.path.realpath(plain) == resolved
        return plain if same else str(path)
    except (OSError, ValueError):
        return str(path)


def not_json_lines(manifest: Path, items: list[dict[str, Any]]) -> str | None:
    """Why `manifest` (read as `items`) is no JSONL manifest at all, or None: two or more lines and none of them
    a JSON object (a video given by mistake, a CSV, a pretty-printed JSON array), or a first line that opens a
    JSON array (`json.dumps(rows)` on one line, or an array with an object per line, whose last line alone is an
    object). Each of its "lines" would get an ineligible row (thousands for a video) in an output where the rows
    of another manifest's bad lines stay."""
    first = (items[0]["error"] or "") if items else ""
    if items and items[0]["array"]:
        return (f"manifest {manifest} is not JSON lines: it is one JSON array ({first}); "
                'write one {"path": ..., "instruction": ...} object per line')
    if len(items) < 2 or any(item["object"] for item in items):
        return None
    return (f"manifest {manifest} is not JSON lines: none of its {len(items)} lines is a JSON object ({first}); "
            'write one {"path": ..., "instruction": ...} object per line')


def misplaced_paths(manifest: Path, items: list[dict[str, Any]], cwd: Path) -> str | None:
    """A warning when clips of `items` are missing where the manifest's rows point (paths are relative to
    the manifest's folder) but exist relative to `cwd`: a manifest written with paths relative to where
    the command runs. None when there are no such clips. The items still run (and are ineligible: video
    not found); the warning says why before the batch starts."""
    base = manifest.resolve().parent
    if base == cwd.resolve():
        return None
    found = [f"line {item['line']} {item['written']!r}" for item in items
             if item["error"] is None and not _exists(Path(item["path"]))
             and not Path(item["written"]).is_absolute() and _exists(cwd / item["written"])]
    if not found:
        return None
    return (f"{len(found)} clip(s) are not where the manifest points (paths are relative to its folder "
            f"{base}) but exist relative to the current directory, e.g. {found[0]}: write them relative to "
            "the manifest's folder, or absolute")


def _exists(path: Path) -> bool:
    """`path.exists()`, False for a name the system refuses (too long: OSError; Path.exists raises it)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def repeat_key(manifest: str, key: str, n: int) -> str:
    """Resume key of the `n`th line (1, 2, ...) of the manifest `manifest` (its resolved path, an item's
    "manifest_file") repeating the clip and instruction of an earlier line of key `key` under other fields
    (`drop_repeats`). Of its place among those lines, not of its fields: an "id" corrected since reaches the row, as
    it does for any line (`graph.batch_resume.current_fields`); the rows of such lines all hold the one result of
    their clip and instruction, so which of them a row is read as never changes its result. Per manifest, as a bad
    line's key (`bad_line_key`): keyed by the place alone, two manifests sharing an output with repeats of one clip
    shared keys, and each one's run deleted or overwrote the other's repeat rows (`repeat_keys`)."""
    return _digest(["repeat", manifest, key, n])


def _placed_key(key: str, n: int) -> str:
    """The key `repeat_key` gave the `n`th repeat of the line of key `key` before keys were per manifest: of its
    place alone (`repeat_keys`)."""
    return _digest(["repeat", key, n])


def repeat_keys(manifest: str, key: str, places: int) -> set[str]:
    """The keys the first `places` lines of `manifest` repeating the line of key `key` have (`repeat_key`), or had
    before they were per manifest (of the place alone): the rows of `manifest`'s repeats among those of other
    manifests sharing the output (`graph.batch_repeat_rows.stale_repeats`)."""
    return {k for n in range(1, places + 1) for k in (repeat_key(manifest, key, n), _placed_key(key, n))}


def drop_repeats(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """`items` less the lines that repeat an earlier line in all (same clip under the same name, instruction, preset,
    draw and other fields), with each line that repeats an earlier line's clip and instruction under another name
    (a link) or other fields (another "id") keyed by `repeat_key` and marked "repeat_of" the earlier line's key
    (module docstring); and a description per line of each kind ("line 7 = line 1"): those dropped, those that take
    the earlier line's result. A repeat in all would only write a second row the same as the first, which `raa eval
    compare` refuses as a duplicate; a repeat under another id or name dropped lost that id's or name's row."""
    first: dict[str, dict[str, Any]] = {}
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    repeats: dict[str, int] = {}  # per key: the lines under other fields so far
    kept, dropped, shared = [], [], []
    for item in items:
        fields = (item["key"], item["path"], strict_dumps(item["manifest"], sort_keys=True))
        if (earlier := seen.get(fields)) is not None:
            dropped.append(f"line {item['line']} = line {earlier['line']}")
            continue
        seen[fields] = item
        if (source := first.get(item["key"])) is None:
            first[item["key"]] = item
            kept.append(item)
            continue
        shared.append(f"line {item['line']} = line {source['line']}")
        repeats[item["key"]] = n = repeats.get(item["key"], 0) + 1
        kept.append({**item, "key": repeat_key(item["manifest_file"], item["key"], n), "repeat_of": item["key"]})
    return kept, dropped, shared


def same_run(row: dict[str, Any], other: dict[str, Any]) -> bool:
    """True when two output rows hold one run's result: one is the row of a line repeating the other's clip and
    instruction ("repeat_of" the other's key, `graph.batch.write_repeats`), or both are rows of lines repeating one
    line, and their results are the same (a repeat row is a copy of its line's row: one whose result differs is of
    another run, two outputs concatenated). Readers that find one clip and draw twice (`raa eval draws`, `raa eval
    compare --pair-by path`) take such rows as one row, not a contradiction."""
    if row.get("repeat_of") is None and other.get("repeat_of") is None:
        return False
    return ((row.get("repeat_of") or row.get("key")) == (other.get("repeat_of") or other.get("key"))
            and row.get("result") == other.get("result"))


def clip_identity(path: Any) -> str:
    """The clip an output row's "path" names, as its key is of it (`item_key`: the resolved path; symlinks followed
    where they exist here): readers that tell clips apart by path (`raa eval draws`, `raa eval compare --pair-by
    path`) take a row naming a clip as the manifest gave it (a link) and one written before rows did (its target)
    as one clip. The path as it is when it cannot be resolved (a NUL byte, a symlink loop)."""
    try:
        return os.path.realpath(str(path))
    except (OSError, ValueError):
        return str(path)


def path_identities() -> Callable[[Any], str]:
    """`clip_identity` for a reader that asks it of every row: each folder resolved once, then only the clip's own
    link followed (one `os.readlink` per link on the way), each path answered once. `os.path.realpath` stats every
    folder of each path it resolves, slow on a network disk for thousands of rows of a few folders."""
    folders: dict[str, str] = {}
    known: dict[str, str] = {}

    def resolve(text: str, hops: int) -> str:
        head, name = os.path.split(text)
        if not head or not name or name in (".", "..") or hops > 40:  # 40: the system's own limit on links
            return clip_identity(text)
        if head not in folders:
            folders[head] = clip_identity(head)
        joined = os.path.join(folders[head], name)
        try:
            target = os.readlink(joined)
        except (OSError, ValueError):  # no link (or no file): the name in its resolved folder
            return joined
        return resolve(os.path.join(folders[head], target), hops + 1)  # an absolute target replaces the folder

    def identity(path: Any) -> str:
        text = str(path)
        if text not in known:
            known[text] = resolve(text, 0)
        return known[text]

    return identity


def bad_line_path(number: int) -> str:
    """The placeholder `path` of a manifest line that names no readable clip (its row is ineligible)."""
    return f"<line {number}>"


def is_bad_line_row(row: dict[str, Any]) -> bool:
    """True for an output row of a manifest line that named no clip (`bad_line_path`): no video to pair by."""
    return isinstance(row.get("line"), int) and row.get("path") == bad_line_path(row["line"])
