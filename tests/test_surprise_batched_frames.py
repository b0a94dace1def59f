"""V-JEPA 2 surprise converts frames per batch of windows, not the whole clip at once.

`preprocess_frames` turned all (up to 512) frames into float32 [T,3,crop,crop] before the first window
ran: 512 frames at crop 256 are ~1.2 GB at once. The scorer now converts the frames of each batch of windows
as it reaches the model, each frame once (a frame shared with the next batch is kept, not converted again),
and its evidence is bit-identical to the all-at-once path.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.vjepa_files import tiny_vjepa2
from tools.surprise import VJEPA2SurpriseScorer, preprocess_frames, window_starts


@pytest.fixture(scope="module")
def model():
    return tiny_vjepa2(layers=1)


def _count_conversions(monkeypatch) -> list[int]:
    """Frames per resize of raw (uint8) frames: what `preprocess_frames` converts in one call."""
    import torch.nn.functional as F

    sizes: list[int] = []
    real = F.interpolate

    def counting(x, *args, **kwargs):
        if x.dtype == torch.uint8:
            sizes.append(int(x.shape[0]))
        return real(x, *args, **kwargs)

    monkeypatch.setattr(F, "interpolate", counting)
    return sizes


@pytest.mark.parametrize(("t_total", "batch_size", "stride"), [(41, 4, 2), (41, 1, 2), (33, 3, 5), (16, 8, 2)])
def test_per_batch_conversion_is_bit_identical_and_bounded(model, monkeypatch, t_total, batch_size, stride):
    frames = np.random.default_rng(t_total).integers(0, 256, (t_total, 40, 52, 3), dtype=np.uint8)
    scorer = VJEPA2SurpriseScorer(model=model, batch_size=batch_size, stride=stride, top_k=2)
    starts = window_starts(t_total, 16, stride)
    old = scorer.score_windows(preprocess_frames(frames, 32), starts)  # the all-at-once path
    sizes = _count_conversions(monkeypatch)
    ev = scorer.score(frames)
    assert [w.surprise for w in ev.windows] == old  # bit-identical
    assert [w.start for w in ev.windows] == starts
    bound = (batch_size - 1) * stride + 16  # the frames of one batch of windows
    assert sizes and max(sizes) <= min(bound, t_total), sizes
    covered = len({f for s in starts for f in range(s, s + 16)})
    assert sum(sizes) == covered  # each frame converted once
