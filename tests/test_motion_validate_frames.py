"""`validate_frames` copies only frames that are not C-contiguous.

Every tracker call (LK, CoTracker3, the window grid, the tool service's request check) goes through it. It hands
C-contiguous uint8 frames back as they are: ``np.ascontiguousarray`` returns such an array itself (tracemalloc: no
allocation for 10 frames of 64x64). Others (Fortran order, every other frame, reversed, cropped) get one C-order
copy, what the trackers read; this pins both. LK's grey-frame cache (`LKTracker._grays_of`) depends on the first:
it knows a window grid's second call on the same frames by the identity of the array validate_frames returns.
"""

from __future__ import annotations

import numpy as np
import pytest

from tools.motion.base import validate_frames


def _clip(t_total: int, h: int, w: int, *, read_only: bool) -> np.ndarray:
    frames = np.random.default_rng(5).integers(0, 256, (t_total, h, w, 3), dtype=np.uint8)
    frames.flags.writeable = not read_only
    return frames


@pytest.mark.parametrize("read_only", [False, True])
def test_validate_frames_returns_c_contiguous_uint8_frames_themselves(read_only):
    frames = _clip(3, 8, 10, read_only=read_only)
    assert validate_frames(frames) is frames
    assert validate_frames(frames[1:]).base is frames  # a run of whole frames is C-contiguous too: a view


@pytest.mark.parametrize("layout", ["fortran", "strided", "reversed", "cropped"])
def test_validate_frames_copies_only_frames_that_are_not_c_contiguous(layout):
    base = _clip(6, 8, 10, read_only=True)
    frames = {"fortran": np.asfortranarray(base), "strided": base[::2], "reversed": base[:, :, ::-1],
              "cropped": base[:, 1:7, 2:9]}[layout]
    got = validate_frames(frames)
    assert got.flags.c_contiguous and got.dtype == np.uint8
    assert not np.shares_memory(got, base)
    np.testing.assert_array_equal(got, frames)
