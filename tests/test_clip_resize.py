"""Wan 2.1 I2V's CLIP preprocessing (policy.wan_i2v.ClipImageEncoder) sizes its resize as transformers'
CLIPImageProcessor does: the short side to ``shortest_edge``, the long side ``int(edge * long / short)``. Before:
the long side was rounded, so a frame whose scaled long side ends in .5 or more was resized one pixel wider than
the pipeline's and the centre crop saw shifted content (mean error 0.37 in normalised units, against 0.004 of
resampling rounding), i.e. other CLIP image embeddings than the pretrained model's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

PROCESSOR = {"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 32},
             "crop_size": {"height": 32, "width": 32}, "image_mean": [0.48145466, 0.4578275, 0.40821073],
             "image_std": [0.26862954, 0.26130258, 0.27577711], "do_resize": True, "do_center_crop": True}


@pytest.mark.parametrize("size", [(48, 73), (73, 48), (64, 96)])  # 73 * 32 / 48 = 48.67: round 49, int 48
def test_clip_resize_matches_the_processor_when_the_long_side_is_fractional(size):
    from transformers import CLIPImageProcessor

    from policy.wan_i2v import ClipImageEncoder

    images = np.random.default_rng(0).integers(0, 256, (1, *size, 3), dtype=np.uint8)
    ours = ClipImageEncoder(torch.nn.Linear(1, 1), PROCESSOR).preprocess(images)
    theirs = CLIPImageProcessor(**PROCESSOR).preprocess(list(images), return_tensors="pt")["pixel_values"]
    assert ours.shape == theirs.shape == (1, 3, 32, 32)
    assert (ours - theirs).abs().mean() < 0.02  # resampling rounding only (PIL uint8 vs torch float)
