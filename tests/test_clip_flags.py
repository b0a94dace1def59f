"""Wan 2.1 I2V's CLIP preprocessing (policy.wan_i2v.ClipImageEncoder) follows the image processor config's step
flags as transformers' CLIPImageProcessor does. Before: resize, centre crop, rescale and normalise always ran, so a
config turning one off (real ones ship ``do_center_crop: false`` with a height/width size) fed CLIP other pixel
values, and other shapes, than the pipeline's processor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

BASE = {"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 32},
        "crop_size": {"height": 32, "width": 32}, "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711], "do_resize": True, "do_center_crop": True,
        "do_rescale": True, "do_normalize": True, "do_convert_rgb": True, "resample": 3,
        "rescale_factor": 1 / 255}


@pytest.mark.parametrize("change", [
    {"do_center_crop": False},
    {"do_resize": False},
    {"do_normalize": False},
    {"do_rescale": False},
    {"do_rescale": False, "do_normalize": False},
    {"do_center_crop": False, "size": {"height": 40, "width": 24}},
    {"size": {"shortest_edge": 24}},  # crop larger than the resized image: zero padding
    {"do_convert_rgb": False},
    {"resample": 2},
    {"resample": 0},
])
def test_clip_preprocessing_follows_the_processor_flags(change):
    from transformers import CLIPImageProcessor

    from policy.wan_i2v import ClipImageEncoder

    processor = {**BASE, **change}
    images = np.random.default_rng(0).integers(0, 256, (2, 48, 72, 3), dtype=np.uint8)
    ours = ClipImageEncoder(torch.nn.Linear(1, 1), processor).preprocess(images)
    theirs = CLIPImageProcessor(**processor).preprocess(list(images), return_tensors="pt")["pixel_values"].float()
    assert ours.shape == theirs.shape, change
    scale = theirs.abs().mean()
    assert (ours - theirs).abs().mean() < 0.01 * scale, change  # resampling rounding only


def test_an_unsupported_resample_is_refused():
    from policy.wan_i2v import ClipImageEncoder

    with pytest.raises(ValueError, match="resample 1 is not supported"):
        ClipImageEncoder(torch.nn.Linear(1, 1), {**BASE, "resample": 1})
