"""Which manifest file a `raa score-batch` row of a bad line or a repeat line was written from: its identity.

Row format: the row of a bad manifest line (`graph.batch.write_bad_lines`) and the row of a line repeating an
earlier line's clip and instruction (`graph.batch.write_repeats`) record "manifest_file_id": {"ino", "dev"} of the
manifest file the run read, "manifest_folder_id" of the folder it lies in (`file_id`, the fields a clip's "clip"
stamp records of the clip, `graph.batch.clip_stamp`) and "manifest_file", its resolved path
(`graph.batch.manifest_fields`; bad lines' rows written before record no name).
Rows of a line scored on its own record none: their key is of the clip, not of the manifest.

Why: such rows are known as this manifest's by a name (a bad line's key is of the manifest's resolved path; a repeat
row records "manifest_file"), and a name that leads to this manifest now, through a link, may have led to another
manifest when the row was written: `mv day day1; mkdir day2; ln -s day2 day; cd day; raa score-batch m.jsonl` took
day 1's bad line's row and repeat rows (rewards) for day 2's and removed them until day 1 ran again.

How a row is read (`RowManifests.whose`, the one rule both kinds of row are judged by: `graph.batch_resume.stale_rows`,
`graph.batch_repeat_rows.recorded_manifest`; "this file": the one whose lines the run read, `ManifestFile`). A row's
name is the "manifest_file" it records; a bad line's row that records none is named by its key (of the manifest's
name), which tells only whether it is one of the names this run was given:
- keyed by, or recording, the manifest's resolved path now: this manifest's, whatever file it records (an editor
  that saves by writing a new file and renaming it over the old one gives the manifest a new inode at each save);
- under another name of the manifest (the shell's way in through a link, the old name of a folder moved with a link
  left there, a hard link): this manifest's only when it records this file; recording another file, it is that
  manifest's (it stays);
- recording this file under a name that no longer leads here (a manifest moved with no link left, or run through a
  link from elsewhere): this manifest's; a bad line's row of this preset and draw goes and is written again under
  the manifest's present name, a repeat row is judged as this manifest's.
- recording none (written before rows did): read by its names as before, since nothing tells it apart.
A manifest moved through a link and then saved by a rename is another file for its rows written before: they are
this manifest's where they record the folder the name leads into now ("manifest_folder_id": a folder moved keeps its
inode, a link re-pointed at another folder leads into another one; a save by a rename stays in its folder), else
its bad lines' rows stay beside the new ones (no reward in them; `graph.batch_resume.stale_rows`), its repeat rows
are this manifest's where they hold one of its repeat lines as it is now, else another manifest's (kept;
`graph.batch_repeat_rows.recorded_manifest`). So is a
manifest whose device number changed between runs (a reboot or remount; an overlay or NFS mount numbers its device
when mounted). A row whose recorded name ("manifest_file") is another manifest file's own name now (`own_name`: no
link on the way; not this file under another name, a hard link, `same_file`) is that manifest's whatever file it
records (`cp a.jsonl b.jsonl` after a.jsonl was saved by a rename may
give b a's old inode; `graph.batch_resume.stale_rows`, `graph.batch_repeat_rows.recorded_manifest`). An inode reused
by a manifest made after the recorded one was deleted reads as that manifest, as does one recorded by a bad line's
row with no name (written before such rows recorded one).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal


def file_id(st: os.stat_result) -> dict[str, int]:
    """The identity of the file `st` stats, as rows record it ("ino", "dev"): a clip's (`graph.batch.clip_stamp`) and
    a manifest's ("manifest_file_id", module docstring)."""
    return {"ino": st.st_ino, "dev": st.st_dev}


@dataclass(frozen=True)
class ManifestFile:
    """The manifest file one run read (`graph.batch_manifest.read_items`), as its rows are judged against it: `name`,
    its resolved path ("manifest_file"); `identity`, `file_id` of the very file read (its fstat); `folder`, `file_id`
    of the folder it lies in, taken at the read (None when it cannot be stat'ed). A stat of the manifest's name made
    later (the resume looked three times a run) found a file saved by a rename since, not the one whose lines it
    read."""

    name: str
    identity: dict[str, int]
    folder: dict[str, int] | None


def manifest_folder_id(manifest: Path | str) -> dict[str, int] | None:
    """`file_id` of the folder the file `manifest` names now lies in (symlinks followed), None when it cannot be
    stat'ed: what a row records as "manifest_folder_id" (module docstring)."""
    try:
        return file_id(os.stat(os.path.dirname(os.path.realpath(manifest))))
    except (OSError, ValueError):
        return None


def own_name(recorded: str) -> bool:
    """Whether the name `recorded` is, now, a manifest file's own resolved name (a file there, no link on the way):
    that manifest keys its rows by it (`graph.batch_manifest.repeat_key`, `bad_line_key`) and takes a row recording it
    for its own, whatever file the row records. The file a row records is then the one that manifest was (saved since
    by a rename, a new inode), and another manifest's the same inode only as reused (`cp a.jsonl b.jsonl`)."""
    return os.path.isfile(recorded) and os.path.realpath(recorded) == recorded


def same_file(recorded: str, manifest: str) -> bool:
    """Whether the name `recorded` (there now) is the file `manifest` (resolved): the same path once resolved, or the
    same file under another (a hard link: one manifest, its rows its own under either name). False when either cannot
    be read (as another manifest's)."""
    try:
        return os.path.realpath(recorded) == manifest or os.path.samefile(recorded, manifest)
    except (OSError, ValueError):
        return False


def names_file(path: Path, identity: dict[str, int]) -> bool:
    """Whether `path` names, now, the file `identity` (`file_id`: `ManifestFile.identity`, the manifest read), from
    one stat of `path`; False when nothing is there or it cannot be stat'ed. ``path.exists() and
    path.samefile(manifest)`` stat'ed both again: a file removed between the looks raised a bare FileNotFoundError."""
    try:
        return file_id(os.stat(path)) == identity
    except (OSError, ValueError):
        return False


def same_manifest_file(row: dict[str, Any], now: dict[str, int] | None,
                       field: str = "manifest_file_id") -> bool | None:
    """Whether the manifest file a row of a bad or repeat line records ("manifest_file_id"; its folder with `field`
    "manifest_folder_id") is the file `now` (`ManifestFile.identity`, `manifest_folder_id`): None when the row records none
    (written before rows did: not known), False when `now` is None (cannot be stat'ed: not known to be it)."""
    recorded = row.get(field)
    if not isinstance(recorded, dict) or not all(isinstance(recorded.get(k), int) for k in ("ino", "dev")):
        return None
    return now is not None and all(recorded[k] == now[k] for k in ("ino", "dev"))


Whose = Literal["this", "other"] | None
"""Whose a row is (`RowManifests.whose`): this manifest's, another's (there now), or not known (None)."""


class RowManifests:
    """Whose the rows of bad and repeat lines are, judged against `read` (the manifest file this run read), by the
    rule of the module docstring; the one rule of `graph.batch_resume.stale_rows` (a bad line's row) and
    `graph.batch_repeat_rows.recorded_manifest` (a repeat row), which wrote it out each on its own and disagreed (a
    manifest moved with a link left, saved by a rename and run by its new name: its repeat rows were its own, its
    bad lines' rows were not and stayed beside the new ones). What a recorded name leads to, and the folder it leads
    into, are looked up once per name and run (a file made at it, or a link re-pointed, meanwhile does not change a
    row's answer between the run's questions: the folder looked up at each, a link re-pointed while the tools
    loaded made a bad line's row go at `graph.batch.done_keys` and stay at `drop_rows`, beside the row written
    again; and it cost a realpath and a stat per row).
    One per run (`graph.batch_command`), handed to both: each built its own, so a link re-pointed between their
    lookups judged a bad line's row and a repeat row of one run against different folders."""

    def __init__(self, read: ManifestFile) -> None:
        self.read = read
        self._leads: dict[str, Whose] = {read.name: "this"}
        self._others: dict[str, bool] = {}
        self._folders: dict[str, dict[str, int] | None] = {}

    def leads(self, name: str) -> Whose:
        """Where `name` leads now: "this" (this manifest's file), "other" (another file), None (no file: gone, or a
        folder in its place; `os.path.isfile` is False for a name the system refuses, as for none)."""
        if name not in self._leads:
            self._leads[name] = (None if not os.path.isfile(name)
                                 else "this" if same_file(name, self.read.name) else "other")
        return self._leads[name]

    def others_own(self, name: str) -> bool:
        """Whether `name` is another manifest file's own name now (`own_name`, and not this file under another name:
        a hard link)."""
        if name not in self._others:
            self._others[name] = own_name(name) and self.leads(name) != "this"
        return self._others[name]

    def folder(self, name: str) -> dict[str, int] | None:
        """`manifest_folder_id` of `name`: the folder it leads into, looked up once per name."""
        if name not in self._folders:
            self._folders[name] = manifest_folder_id(name)
        return self._folders[name]

    def whose(self, row: dict[str, Any], unnamed: Whose = None,
              held: Callable[[dict[str, Any]], bool] = lambda row: False) -> Whose:
        """Whose `row` is, by the manifest name it records ("manifest_file") and the file and folder it records
        ("manifest_file_id", "manifest_folder_id"): "this" for this manifest's resolved name, whatever file; for
        this file unless the name is another manifest's own; for a name leading here, when the row records no
        file, or records the folder the name leads into now, or holds one of this manifest's lines (`held`);
        else where the name leads ("other", or None when nothing is there). `unnamed`: where the name of a row
        that records none leads (a bad line's row: "this" when its key is of a name this run was given). `held`:
        whether a row holds one of this manifest's lines as it is now (`graph.batch_repeat_rows.repeat_lines`),
        which makes a row recording another file under a name leading here this manifest's."""
        name = row["manifest_file"] if isinstance(row.get("manifest_file"), str) else None
        if name == self.read.name:
            return "this"
        same = same_manifest_file(row, self.read.identity)
        if same:
            return "other" if name is not None and self.others_own(name) else "this"
        leads = self.leads(name) if name is not None else unnamed
        if same is None or leads != "this":
            return leads
        folder = self.folder(name) if name is not None else self.read.folder  # saved by a rename since: this
        if same_manifest_file(row, folder, "manifest_folder_id") or held(row):  # manifest's in its folder
            return "this"
        return "other"
