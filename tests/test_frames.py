"""Frame helpers (tools/frames.py, re-exported by tools.video): uniform and nearby indices, crop
boxes with reported fallback, resizing, labels and JPEG data-URL content blocks."""

from __future__ import annotations

import base64
import re

import cv2
import numpy as np
import pytest

from tools import video as V
from tools.video import (
    FULL_FRAME,
    crop_frame,
    encode_jpeg_data_url,
    frame_label,
    image_content_blocks,
    normalize_crop,
    resize_long_side,
    uniform_indices,
    uniform_subset,
)


def test_uniform_indices_hand_values():
    assert uniform_indices(10, 4) == [0, 3, 6, 9]
    assert uniform_indices(5, 3) == [0, 2, 4]
    assert uniform_indices(4, 3) == [0, 2, 3]  # 1.5 rounds half to even
    assert uniform_indices(3, 10) == [0, 1, 2]
    assert uniform_indices(1, 32) == [0]
    assert uniform_indices(0, 5) == [] and uniform_indices(5, 0) == []
    assert uniform_indices(81, 32) == [0, 3, 5, 8, 10, 13, 15, 18, 21, 23, 26, 28, 31, 34, 36, 39, 41, 44,
                                       46, 49, 52, 54, 57, 59, 62, 65, 67, 70, 72, 75, 77, 80]
    with pytest.raises(ValueError):
        uniform_indices(-1, 3)


def test_uniform_subset_hand_values():
    track = [0, 2, 4, 6, 8, 10, 12, 14]  # frames of a track stretch
    assert uniform_subset(track, 4) == [0, 4, 10, 14]  # positions 0, 2, 5 (4.67), 7
    assert uniform_subset([30, 31, 32], 4) == [30, 31, 32]  # fewer items than asked
    assert uniform_subset([8, 9, 10, 11], 0) == [] and uniform_subset([], 4) == []


def test_normalize_crop_valid_and_clamped():
    assert normalize_crop((0.1, 0.2, 0.5, 0.6)) == V.CropResult((0.1, 0.2, 0.5, 0.6), False, None)
    assert normalize_crop(np.array([0, 0, 1, 1])).box == FULL_FRAME
    assert normalize_crop([-1e-9, 0, 1 + 1e-9, 1]) == V.CropResult(FULL_FRAME, False, None)


@pytest.mark.parametrize(("box", "reason"), [
    (None, "no box"),
    ((0.1, float("nan"), 0.5, 0.6), "finite"),
    ((0.1, 0.2, float("inf"), 0.6), "finite"),
    ((0.1, 0.2, 1.2, 0.6), r"\[0, 1\]"),
    ((10, 20, 100, 200), r"\[0, 1\]"),
    ((0.5, 0.5, 0.2, 0.8), "inverted"),
    ((0.3, 0.3, 0.3, 0.5), "inverted"),
    ((0.1, 0.1, 0.11, 0.5), "too small"),
    ((0.1, 0.1, 0.5, 0.11), "too small"),  # a sliver in height falls back as one in width does
    ((0.1, 0.2, 0.5), "4 numbers"),
    ((0.1, 0.2, 0.5, 0.6, 0.7), "4 numbers"),
    ("0,0,1,1", "sequence"),
    ((0.1, "a", 0.5, 0.6), "numbers"),
])
def test_normalize_crop_falls_back_with_reason(box, reason):
    result = normalize_crop(box)
    assert result.fallback and result.box == FULL_FRAME
    assert result.reason is not None and "full frame" in result.reason
    assert re.search(reason, result.reason)


def test_crop_frame_pixels():
    frame = np.arange(100 * 200 * 3, dtype=np.int64).reshape(100, 200, 3)
    out = crop_frame(frame, (0.25, 0.5, 0.75, 1.0))
    assert out.shape == (50, 100, 3) and np.array_equal(out, frame[50:100, 50:150])
    assert np.array_equal(crop_frame(frame, (0.101, 0.0, 0.2, 0.5)), frame[0:50, 20:40])
    with pytest.raises(ValueError, match="inverted"):
        crop_frame(frame, (0.5, 0.5, 0.1, 0.1))


def test_crop_frame_edges_are_not_moved_by_floating_point():
    """0.07*100 is 7.000000000000001 and 0.57*100 is 56.99999999999999 in floating point: the ceil and floor took a
    column the box does not touch, on either side."""
    frame = np.arange(100 * 100 * 3, dtype=np.int64).reshape(100, 100, 3)
    assert np.array_equal(crop_frame(frame, (0.0, 0.0, 0.07, 1.0)), frame[:, 0:7])
    assert np.array_equal(crop_frame(frame, (0.57, 0.57, 1.0, 1.0)), frame[57:, 57:])
    edge = crop_frame(frame, (0.98, 0.0, 1.0, 1.0))  # the last 2% of the frame: its last two columns
    assert np.array_equal(edge, frame[:, 98:100])


def test_resize_long_side():
    assert resize_long_side(np.zeros((100, 200, 3), np.uint8), 100).shape == (50, 100, 3)
    assert resize_long_side(np.zeros((61, 97, 3), np.uint8), 50).shape == (31, 50, 3)
    small = np.zeros((61, 97, 3), np.uint8)
    assert resize_long_side(small, 512) is small  # never upscales
    checker = np.zeros((4, 4, 3), np.uint8)
    checker[::2, ::2] = checker[1::2, 1::2] = 255
    assert set(np.unique(resize_long_side(checker, 2))) <= {127, 128}  # area average, not nearest
    with pytest.raises(ValueError):
        resize_long_side(small, 0)


def test_frame_label():
    assert frame_label(12, 81, 16) == "frame 12 of 81, t=0.75s"
    assert frame_label(0, 1, 30) == "frame 0 of 1, t=0.00s"
    assert frame_label(5, 10, 3) == "frame 5 of 10, t=1.67s"
    with pytest.raises(ValueError):
        frame_label(1, 2, 0)


def _decode_url(url: str) -> np.ndarray:
    prefix = "data:image/jpeg;base64,"
    assert url.startswith(prefix)
    bgr = cv2.imdecode(np.frombuffer(base64.b64decode(url[len(prefix):]), np.uint8), cv2.IMREAD_COLOR)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def test_encode_jpeg_data_url_keeps_rgb_order():
    red = np.zeros((16, 16, 3), np.uint8)
    red[..., 0] = 255
    rgb = _decode_url(encode_jpeg_data_url(red)).astype(int)
    assert rgb.shape == (16, 16, 3)
    assert rgb[..., 0].min() > 240 and rgb[..., 1].max() < 15 and rgb[..., 2].max() < 15
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    assert len(encode_jpeg_data_url(noise, quality=20)) < len(encode_jpeg_data_url(noise, quality=95))
    with pytest.raises(ValueError):
        encode_jpeg_data_url(red, quality=0)
    with pytest.raises(ValueError):
        encode_jpeg_data_url(red.astype(np.float32))


def test_image_content_blocks():
    frames = np.zeros((2, 300, 600, 3), np.uint8)
    blocks = image_content_blocks(frames, [0, 40], total=81, fps=16)
    assert [b["type"] for b in blocks] == ["text", "image_url", "text", "image_url"]
    assert blocks[0]["text"] == "frame 0 of 81, t=0.00s" and blocks[2]["text"] == "frame 40 of 81, t=2.50s"
    assert _decode_url(blocks[1]["image_url"]["url"]).shape == (256, 512, 3)
    custom = image_content_blocks(frames, [0, 40], 81, 16, long_side=1000, labels=["a", "b"])
    assert custom[2]["text"] == "b" and _decode_url(custom[3]["image_url"]["url"]).shape == (300, 600, 3)
    with pytest.raises(ValueError):
        image_content_blocks(frames, [0], 81, 16)
    with pytest.raises(ValueError):
        image_content_blocks(frames, [0, 1], 81, 16, labels=["only one"])
