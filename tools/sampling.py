"""Which frames to look at: uniform sampling and the extra-frame allowance (DESIGN.md §3-§4).

Pure index arithmetic, re-exported by ``tools.video``. ``uniform_indices`` rounds half to even
(``uniform_indices(4, 3) == [0, 2, 3]``). Clips of at most ``ALL_FRAMES_LIMIT`` frames may show any
frame; longer clips get at most ``NEARBY_EXTRA_LIMIT`` frames beyond their initial sample (the agent's
policy: `graph.nodes.evidence.allowed`). ``order_problem`` is the rule that frames scored or tracked as a
sequence follow the clip's time: surprise windows are named by clip frame, and a tracker follows its frames
in the order given (the tool service refuses other orders with a 400, the agent's tracking as a fault).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator

ALL_FRAMES_LIMIT = 81
NEARBY_EXTRA_LIMIT = 16


def frame_index(value: object) -> int:
    """`value` as a frame index: an int, a numpy integer or a whole float (7.0: JSON writers emit those, and it
    names one frame exactly); anything else raises ValueError naming it. Pydantic's lax int took ``true`` as
    frame 1 and ``"3"`` as frame 3 without a word: a model's misread label or a tool's bug then pointed at a
    frame nobody named. (A fractional 1.5 was already refused.) A whole numpy float of any width counts as a
    float: np.float64 (a float subclass) passed and np.float32 was refused."""
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"frame index must be an integer, got the boolean {value!r}")
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating) and float(value).is_integer():  # np.float32 is no float subclass
        return int(value)
    raise ValueError(f"frame index must be an integer, got {value!r}")


FrameIndex = Annotated[int, BeforeValidator(frame_index)]
"""A pydantic field type for frame indices (`frame_index`); its JSON schema stays "integer"."""


def uniform_indices(n: int, k: int) -> list[int]:
    """``round(linspace(0, n-1, k))``, deduplicated and sorted (DESIGN §4 uniform sampling)."""
    if n < 0 or k < 0:
        raise ValueError(f"uniform_indices needs n >= 0 and k >= 0, got n={n}, k={k}")
    if n == 0 or k == 0:
        return []
    return sorted({int(v) for v in np.round(np.linspace(0, n - 1, k))})


def uniform_subset(items: Sequence[int], k: int) -> list[int]:
    """Up to `k` of the distinct `items`, spread uniformly over them in increasing order (``uniform_indices``
    over the sorted distinct items; e.g. 4 overlay frames of a 32-frame track, or the frames shown for a surprise
    window). Repeats are dropped before the pick: picked by position and deduplicated after, a report naming one
    frame four times gave 2 frames where 4 were asked and there."""
    distinct = sorted({int(v) for v in items})
    return [distinct[i] for i in uniform_indices(len(distinct), k)]


def order_problem(indices: Sequence[int]) -> str | None:
    """Why frame indices cannot be taken as a sequence in time (the first step back), or None when they never go
    backwards. A repeat in order is kept: it pads a short clip to a surprise window, and a tracker sees the same
    frame twice (a step of zero pixels, one clip frame in the motion summary)."""
    for k in range(1, len(indices)):
        if indices[k] < indices[k - 1]:
            return (f"frame_indices must be in increasing order (repeats allowed): frame_indices[{k}] = "
                    f"{indices[k]} comes after {indices[k - 1]}")
    return None
