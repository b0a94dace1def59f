"""Which frames to look at: uniform sampling and the nearby-frame allowance (DESIGN.md §3-§4).

Pure index arithmetic, re-exported by ``tools.video``. ``uniform_indices`` rounds half to even
(``uniform_indices(4, 3) == [0, 2, 3]``). Clips of at most ``ALL_FRAMES_LIMIT`` frames may show any
frame; longer clips get at most ``NEARBY_EXTRA_LIMIT`` extra frames near the referenced ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ALL_FRAMES_LIMIT = 81
NEARBY_EXTRA_LIMIT = 16


def uniform_indices(n: int, k: int) -> list[int]:
    """``round(linspace(0, n-1, k))``, deduplicated and sorted (DESIGN §4 uniform sampling)."""
    if n < 0 or k < 0:
        raise ValueError(f"uniform_indices needs n >= 0 and k >= 0, got n={n}, k={k}")
    if n == 0 or k == 0:
        return []
    return sorted({int(v) for v in np.round(np.linspace(0, n - 1, k))})


def uniform_subset(items: Sequence[int], k: int) -> list[int]:
    """The items at ``uniform_indices(len(items), k)``, sorted and unique (e.g. 4 overlay frames of a
    32-frame track, or the frames shown for a surprise window)."""
    return sorted({int(items[i]) for i in uniform_indices(len(items), k)})


def nearby_indices(n: int, referenced: Sequence[int], already: Sequence[int],
                   max_extra: int = NEARBY_EXTRA_LIMIT) -> list[int]:
    """Frames that may be shown for a request about ``referenced`` frames (DESIGN §3 inspect budget).

    Out-of-range references are ignored. Clips with ``n <= ALL_FRAMES_LIMIT`` allow any frame:
    the result is every referenced frame plus its immediate neighbours (i-1, i+1). Longer clips:
    referenced frames already in ``already`` are kept; new frames (not in ``already``) are taken
    nearest-first (distance 0, then 1, 2, ... around each referenced frame in ascending order,
    the earlier side first) until ``max_extra`` new frames are chosen. Sorted and unique.
    """
    if n < 0 or max_extra < 0:
        raise ValueError(f"nearby_indices needs n >= 0 and max_extra >= 0, got n={n}, max_extra={max_extra}")
    refs = sorted({int(r) for r in referenced if 0 <= int(r) < n})
    if n <= ALL_FRAMES_LIMIT:
        return sorted({j for r in refs for j in (r - 1, r, r + 1) if 0 <= j < n})
    seen = {int(a) for a in already}
    chosen = {r for r in refs if r in seen}
    extra: list[int] = []
    for d in range(n):
        if len(extra) >= max_extra or not refs:
            break
        for r in refs:
            for j in ((r,) if d == 0 else (r - d, r + d)):
                if len(extra) < max_extra and 0 <= j < n and j not in seen and j not in chosen:
                    chosen.add(j)
                    extra.append(j)
    return sorted(chosen)
