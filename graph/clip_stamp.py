"""Which clip file a run judged: its size and modification time, recorded by the quality step in the run's state
(`meta["file"]`), and whether the file at the run's path is still that clip.

A run's state names its clip by path only, and the file at a path can be replaced after the run (a policy's
rollouts generated again into the same folder, `raa demo` run again). A time-travel fork (Studio,
`agent.update_state`) then re-ran reflect, audit and repair on the new clip's frames beside the old clip's
assessments, and `raa report` showed the new clip's frames as the old run's evidence frames.

Decisions where the issue was silent:
- Size and modification time, not a hash of the content: a stat per node costs microseconds, where hashing
  would read every clip once more per run. A clip touched or copied without its times (`cp` without `-p`) reads
  as changed: its fork is ineligible and its report shows no frames, each saying why (never a clip judged as
  another).
- The modification times are compared to within `MTIME_SLACK_NS` (1 µs), the size exactly: a state edited in
  Studio (a fork from the quality step's output) comes back through JavaScript numbers, whose rounding of
  `mtime_ns` made the unchanged clip read as changed ("modified T -> T") and the fork ineligible. A file
  rewritten within a microsecond at the same size is not told apart.
- A file that cannot be stat'ed now (deleted, moved) is no change this module can judge: decoding it reports
  its own error where frames are still needed, and the frames a run decoded before stay usable.
- Runs traced before stamps (no `meta["file"]`) are not checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

STAMP_KEYS = ("size", "mtime_ns")

MTIME_SLACK_NS = 1_000
"""Modification times this close are one (module docstring): a stamp edited in Studio went through a JavaScript
number, a double, which rounds today's ~1.8e18 ns to 256 ns."""


def stamp_of(st: os.stat_result) -> dict[str, int]:
    """{"size", "mtime_ns"} of the file `st` stats: a run's stamp of its clip, and the first fields of a batch row's
    ("clip", `graph.batch.clip_stamp`, which adds the file's identity)."""
    return {"size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns)}


def clip_stamp(video: str) -> dict[str, int] | None:
    """`stamp_of` the file at `video`; None when it cannot be stat'ed."""
    try:
        st = os.stat(video)
    except (OSError, ValueError):
        return None
    return stamp_of(st)


def _when(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).isoformat(timespec="seconds")


def clip_change(video: Any, recorded: Any) -> str | None:
    """Why the file at `video` is no longer the clip `recorded` (a `clip_stamp`) stamps, or None when it still is,
    when the run recorded no stamp, or when the file cannot be stat'ed now (module docstring)."""
    if not isinstance(video, str) or not isinstance(recorded, Mapping) or any(
            not isinstance(recorded.get(k), int) for k in STAMP_KEYS):
        return None
    now = clip_stamp(video)
    if now is None or (now["size"] == recorded["size"]
                       and abs(now["mtime_ns"] - recorded["mtime_ns"]) <= MTIME_SLACK_NS):
        return None
    return (f"the clip {video} changed since this run decoded it (size {recorded['size']} -> {now['size']} bytes, "
            f"modified {_when(recorded['mtime_ns'])} -> {_when(now['mtime_ns'])}): it is not the clip this run "
            "judged; score the new clip in a new run")


def state_clip_change(state: Mapping[str, Any]) -> str | None:
    """`clip_change` of a run's state: its video against the stamp its quality step recorded."""
    meta = state.get("meta")
    return clip_change(state.get("video"), meta.get("file") if isinstance(meta, Mapping) else None)


UNCHECKED_NODES = frozenset({"quality", "gate"})
"""Nodes that run whatever the file is now: quality stamps it, the gate only reads the judgments made."""


async def clip_moved(node: str, state: Mapping[str, Any]) -> str | None:
    """`state_clip_change` for a node about to run (None for `UNCHECKED_NODES` and runs without a stamp); the stat
    runs in a worker thread (no blocking call on the event loop, `graph.workers`)."""
    meta = state.get("meta")
    if node in UNCHECKED_NODES or not isinstance(meta, Mapping) or meta.get("file") is None:
        return None
    from graph.workers import run_blocking

    return await run_blocking(state_clip_change, state, priority="first", lane="io")
