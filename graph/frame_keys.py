"""Keys of the agent's frame cache (graph.frame_store): clip versions, the clip a key is filed under, frame
indices.

Every `FrameStore` entry is filed under its clip's version, ``(path, (mtime_ns, ctime_ns, size, inode))``:
frames and data URLs as ``(version, index, ...)``, extras and shared jobs as ``(kind, version, ...)``.
`FrameStore.forget` drops a clip's entries by the path in that slot (`clip_path`). Decision where the issue
was silent: a key without a version in its slot (`put_extra` and `shared_job` take any key: a one-element
tuple, a plain string) names no clip, so `forget` keeps it; it read ``key[1][0]`` blindly, raised IndexError
for ``("anything",)`` half-way through (the clip's URLs and extras stayed) and took a string in the slot
(``("note", "a")``) for a clip named by its first character. Versions stay stat identities, not content hashes
(`evals.clip_identity` says why): the ctime in them changes with any rewrite, `os.utime` included.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

VideoKey = tuple[str, tuple[int, int, int, int] | None]
"""`FrameStore.version`: (path, (mtime_ns, ctime_ns, size, inode) or None when it cannot be stat'ed)."""


def file_version(video: str) -> VideoKey:
    """The version of `video` now: its path and the file's identity (None when it cannot be stat'ed: opening
    it reports why)."""
    try:
        st = os.stat(video)
    except (OSError, ValueError):
        return (video, None)
    return (video, (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))


def is_version(value: Any) -> bool:
    """Whether `value` is a `VideoKey` (a path string and an identity tuple or None)."""
    return (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
            and (value[1] is None or isinstance(value[1], tuple)))


def clip_path(key: Any, slot: Literal[0, 1]) -> str | None:
    """The path of the clip whose version sits at `slot` of cache key `key` (0: frames and URLs, 1: extras and
    shared jobs), or None when that slot holds no version (module docstring)."""
    if not isinstance(key, tuple) or len(key) <= slot or not is_version(key[slot]):
        return None
    return key[slot][0]


def forget_paths(videos: Any) -> set[str]:
    """The paths `FrameStore.forget` was given, as strings (a `pathlib.Path` is its path); TypeError for a
    bare string or path, which iterated as its characters and matched no clip."""
    if isinstance(videos, str | bytes | os.PathLike):
        raise TypeError(f"forget takes a collection of paths, got the single path {videos!r}: pass [path]")
    return {os.fspath(v) for v in videos}


def encoding_key(v: VideoKey, indices: Sequence[int]) -> tuple[str, VideoKey, tuple[int, ...]]:
    """`FrameStore.shared_job` key of encoding the full frames `indices` (checked by `frame_indices`) of `v`."""
    return ("encode", v, tuple(indices))



def frame_indices(video: str, indices: Sequence[int]) -> list[int]:
    """`indices` as ints; one that is not an integer (numpy integers are) raises FrameIndexError naming
    `video`, as `tools.video` does: `int()` took 1.5 as frame 1 and "2" as frame 2, the wrong frame unsaid."""
    if bad := [i for i in indices if isinstance(i, bool | np.bool_) or not isinstance(i, int | np.integer)]:
        from tools.video import FrameIndexError

        raise FrameIndexError(f"{video}: frame index must be an integer, got {bad[0]!r}")
    return [int(i) for i in indices]
