"""uint8 frames as a torch tensor over their own memory, for code that only reads them (the surprise scorer's resize,
CoTracker3's conversion of frames already at its working shape)."""

from __future__ import annotations

from typing import Any

import numpy as np


def uint8_tensor(torch: Any, frames: np.ndarray) -> Any:
    """A C-contiguous uint8 tensor of ``frames`` for a reader, copied at most once: over C-contiguous frames
    themselves, others made contiguous by the one copy ``np.ascontiguousarray`` makes.

    Read-only frames (the tool service's ``.npy`` body is a view of the request's bytes) go through DLPack:
    ``torch.from_numpy`` over them warns (hiding the warning swapped the process-wide filters: not thread-safe),
    while ``torch.from_dlpack`` shares them silently, leaving the caller to write nothing through the tensor
    (its documented contract; nothing here writes). They were copied by ``torch.tensor``, as they still are
    where numpy (< 2.1) exports no read-only array (``BufferError``).

    Why frames that are not C-contiguous are still copied (measured with torch 2.13, numpy 2.4, 2-core CPU): a
    strided tensor over them saves no memory, since the surprise resize (``F.interpolate``, antialiased) makes the
    same contiguous copy itself (the profiler shows an allocation of exactly the frames' bytes, e.g. 10.5 MiB for 8
    frames of 240x1920 cropped out of 240x2200), gives the same bits, and is no faster (best of 15, view against
    copy: 38 vs 46 ms cropped in width, 32 vs 40 ms in height, 39 vs 30 ms Fortran-order, 1.8 vs 1.7 ms every
    other frame: the machine's noise); and frames with a negative stride (``[:, ::-1]``) are refused by
    ``torch.from_numpy`` and make ``torch.from_dlpack`` abort the whole process (a C++ exception from
    ``computeStorageNbytes``, not a Python error)."""
    a = np.ascontiguousarray(frames)
    if a.flags.writeable:
        return torch.from_numpy(a)
    try:
        return torch.from_dlpack(a)
    except BufferError:  # numpy < 2.1: "signalling readonly is unsupported"
        return torch.tensor(a)
