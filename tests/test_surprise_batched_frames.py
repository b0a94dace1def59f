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

from tools.surprise import VJEPA2SurpriseScorer, preprocess_frames, window_starts


def tiny_model():
    from transformers import VJEPA2Config, VJEPA2Model

    torch.manual_seed(0)
    cfg = VJEPA2Config(crop_size=32, patch_size=16, frames_per_clip=16, tubelet_size=2, hidden_size=48,
                       num_attention_heads=2, num_hidden_layers=1, pred_hidden_size=48,
                       pred_num_attention_heads=2, pred_num_hidden_layers=1, num_pooler_layers=1)
    model = VJEPA2Model(cfg).eval()
    with torch.no_grad():
        model.predictor.embeddings.mask_tokens.normal_(0, 0.02)
    return model


@pytest.fixture(scope="module")
def model():
    return tiny_model()


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
