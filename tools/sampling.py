"""Which frames to look at: uniform sampling and the extra-frame allowance (DESIGN.md §3-§4).

Pure index arithmetic, re-exported by ``tools.video``. ``uniform_indices`` rounds half to even
(``uniform_indices(4, 3) == [0, 2, 3]``). Clips of at most ``ALL_FRAMES_LIMIT`` frames may show any
frame; longer clips get at most ``NEARBY_EXTRA_LIMIT`` frames beyond their initial sample (the agent's
policy: `graph.nodes.evidence.allowed`).
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
