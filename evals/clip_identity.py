"""Which clip file a `raa eval reward` row was scored from: the ``clip_version`` its resume check compares.

A row records ``{"size": BYTES, "sha256": HEX}`` of the clip's content (`content_identity`); a rerun scores the
row again when the file at the path now has another identity (another render at the same name) or none (gone).

Decisions where the issue was silent:
- Content, not metadata. Rows recorded the file's stat identity (mtime_ns, ctime_ns, size, inode, as the frame
  and judge caches still file a clip: for a cache a needless miss only costs time), so a `chmod`, a `touch`,
  or a copy of the clip folder (another inode, another ctime) re-scored every clip under every preset. Size
  and a SHA-256 of the bytes survive all of those and change with any change of the content.
- Cost: one read of each clip per run (SHA-256 runs at about 1 GB/s, a few ms for a typical clip of a few
  MB); `ClipIdentities` keeps the identity per stat identity (`graph.frame_keys.file_version`: mtime, ctime,
  size, inode) within a run, so the rows of every preset reuse it and only a file rewritten during the run is
  read again. It was kept per (path, size, mtime_ns): a clip rewritten with its old size and mtime put back
  (`os.utime`) kept the old content's identity. A rewrite cannot put the ctime back (`os.utime` sets it too).
- The frame cache (`graph.frame_store.FrameStore`) and the judge's frame sampler (`evals.judge.FrameSampler`)
  stay keyed by that stat identity, not by content (decision, `graph.frame_keys`): both live in memory for
  one process, so a stat identity never misses a rewrite for the same ctime reason, and the only cost of a
  touched-but-identical clip is one decode again; keying them by content would hash every clip the trainer
  and the reward service score (each one new) to save that rare decode.
- A file that cannot be stat'ed or read gives None, as before: a row that recorded None is stale once the
  file can be read.
- Rows written before (``clip_version`` a list of the four stat numbers, `is_legacy`) still resume: such a row
  counts as current while that stat identity still matches the file exactly (what the old rule checked, so no
  row is re-scored by the upgrade itself), and `raa eval reward` rewrites it with the content identity when it
  compacts results.jsonl. When it no longer matches (the file was touched, chmod'ed, copied or changed since),
  nothing tells whether the content changed: the row is scored again, once, and the command says how many
  (`RewardEvalOutcome.legacy_rescored`); its new row has the content identity, so later metadata changes
  keep it.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeGuard

from graph.frame_keys import VideoKey, file_version

READ_CHUNK = 1 << 20
"""Bytes read at a time while hashing a clip."""


def content_identity(path: str) -> dict[str, Any] | None:
    """``{"size": bytes read, "sha256": hex digest}`` of the file at `path`; None when it cannot be read."""
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as fh:
            while block := fh.read(READ_CHUNK):
                digest.update(block)
                size += len(block)
    except (OSError, ValueError):  # missing, a folder, unreadable, a NUL in the path
        return None
    return {"size": size, "sha256": digest.hexdigest()}


class ClipIdentities:
    """`content_identity` per clip, kept for one run by its stat identity (`file_version`, module docstring):
    each clip is hashed once for every preset's rows, and again only when a stat says it changed."""

    def __init__(self) -> None:
        self._known: dict[VideoKey, dict[str, Any] | None] = {}

    def __call__(self, path: str) -> dict[str, Any] | None:
        key = file_version(path)
        if key[1] is None:  # cannot be stat'ed
            return None
        if key not in self._known:
            self._known[key] = content_identity(path)
        return self._known[key]


def is_legacy(recorded: Any) -> TypeGuard[list[int]]:
    """Whether a row's ``clip_version`` is the stat identity rows recorded before (four integers)."""
    return (isinstance(recorded, list) and len(recorded) == 4
            and all(isinstance(n, int) and not isinstance(n, bool) for n in recorded))


def legacy_matches(recorded: list[int], path: str) -> bool:
    """Whether the file at `path` still has the stat identity a legacy row recorded (module docstring)."""
    now = file_version(path)[1]
    return now is not None and list(now) == recorded


def legacy_changed(recorded: Any, path: str) -> bool:
    """Whether `recorded` is a legacy identity the file at `path` no longer matches (its row is scored again)."""
    return is_legacy(recorded) and not legacy_matches(recorded, path)


def stale_version(recorded: Any, path: str, identity: dict[str, Any] | None) -> bool:
    """Whether a row that recorded `recorded` was scored from another file than the one at `path` now, whose
    content identity is `identity` (legacy rows: `legacy_matches`)."""
    if is_legacy(recorded):
        return not legacy_matches(recorded, path)
    return recorded != identity
