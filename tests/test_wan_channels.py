"""The Wan transformer's channel counts are read as WanTransformer3DModel builds them (`policy.shapes.wan_channels`):
a missing field takes the class default (16), ``out_channels`` null or 0 is ``in_channels``."""
from __future__ import annotations

import pytest

from policy.shapes import WAN_I2V_NUM_FRAMES, WAN_TI2V_NUM_FRAMES, native_num_frames, wan_channels
from policy.wan_i2v import expert_layout_problem


@pytest.mark.parametrize("config, expected", [
    ({"in_channels": 48, "out_channels": 48}, (48, 48)),
    ({"in_channels": 36, "out_channels": 16}, (36, 16)),
    ({"in_channels": 48, "out_channels": None}, (48, 48)),
    ({"in_channels": 48, "out_channels": 0}, (48, 48)),
    ({"in_channels": 36}, (36, 16)),
    ({}, (16, 16)),
    ({"in_channels": "36", "out_channels": True}, (None, None)),
])
def test_the_channels_are_those_the_transformer_is_built_with(config, expected):
    assert wan_channels(config) == expected


def test_out_channels_0_is_in_channels_not_an_a14b_expert():
    # diffusers builds out_channels = in_channels: a TI2V layout, not the channel-concat one of an A14B expert
    assert expert_layout_problem({"in_channels": 48, "out_channels": 0, "image_dim": None}) is None


def test_a_missing_out_channels_takes_the_class_default():
    # WanTransformer3DModel's out_channels default is 16: in_channels 36 is the I2V-14B layout (81 frames)
    assert native_num_frames("wan", {"in_channels": 36}) == WAN_I2V_NUM_FRAMES
    assert native_num_frames("wan", {"in_channels": 48, "out_channels": None}) == WAN_TI2V_NUM_FRAMES
