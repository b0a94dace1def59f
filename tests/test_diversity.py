"""Hand-computed checks of evals/diversity.py (paper Sec. 5.3 D_prompt)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evals.diversity import d_prompt, d_prompt_frames


def test_d_prompt_three_points_hand_computed():
    # points (0,0), (3,4), (0,4): distances 5, 3, 4 -> mean 4 ; stored as [N, 1, 2]
    x = torch.tensor([[[0.0, 0.0]], [[3.0, 4.0]], [[0.0, 4.0]]])
    assert d_prompt(x) == pytest.approx(4.0)


def test_d_prompt_latent_shape_and_numpy():
    a = np.zeros((2, 3, 1, 2, 2), dtype=np.float32)
    a[1] = 1.0  # 12 elements differ by 1 -> L2 = sqrt(12)
    assert d_prompt(a) == pytest.approx(math.sqrt(12))


def test_d_prompt_identical_samples_zero_and_needs_two():
    assert d_prompt(torch.ones(4, 5)) == 0.0
    with pytest.raises(ValueError, match="at least 2"):
        d_prompt(torch.ones(1, 5))


def test_d_prompt_frames_hand_computed():
    f = np.zeros((3, 1, 1, 2, 3), dtype=np.uint8)  # 6 values per clip
    f[1] = 255  # clip 1 white
    f[2, 0, 0, 0] = 255  # clip 2 half white
    # d(0,1)=1, d(0,2)=0.5, d(1,2)=0.5 -> mean 2/3
    assert d_prompt_frames(f) == pytest.approx(2 / 3)
    assert d_prompt_frames(torch.from_numpy(f)) == pytest.approx(2 / 3)


def test_d_prompt_frames_rejects_float():
    with pytest.raises(ValueError, match="uint8"):
        d_prompt_frames(np.zeros((2, 1, 1, 1, 3), dtype=np.float32))


def test_empty_samples_are_an_error_not_a_distance():
    """Clips with zero frames divided by zero in d_prompt_frames; empty latents gave a distance of 0."""
    with pytest.raises(ValueError, match="no pixels"):
        d_prompt_frames(np.zeros((3, 0, 8, 8, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="empty"):
        d_prompt(torch.zeros(3, 0))
