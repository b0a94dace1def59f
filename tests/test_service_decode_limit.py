"""The tool service's ``max_decode_mb`` bounds what its reader decodes, whatever `tools.video_limits`' default: its
reader kept that default (4 GiB), so a setting above it was checked and then refused by the reader as the clip's
"undecodable video" (422, a final video fault of a good clip), and a request within the setting never decoded."""

from __future__ import annotations

import pytest
from graph_scripts import moving_square

import tools.video_limits
from tools.service_frames import HTTPProblem, decode_frames

FRAME_BYTES = 64 * 64 * 3


@pytest.fixture
def clip(tmp_path, monkeypatch):
    """A 64x64 clip of 12 frames, with the readers' default limit lowered to 4 of its frames (as 4 GiB is to a
    larger setting)."""
    monkeypatch.setattr(tools.video_limits, "DECODE_LIMIT_BYTES", 4 * FRAME_BYTES)
    return moving_square(tmp_path / "c.mp4", frames=12, size=64)


def test_a_setting_above_the_readers_default_is_honoured(clip):
    mib = 12 * FRAME_BYTES / 2**20
    assert decode_frames(clip, None, 100, max_decode_mb=mib).shape == (12, 64, 64, 3)  # the whole clip
    assert decode_frames(clip.read_bytes(), list(range(10)), 100, max_decode_mb=mib).shape == (10, 64, 64, 3)


def test_a_setting_below_the_readers_default_still_refuses_with_413(clip):
    with pytest.raises(HTTPProblem) as caught:
        decode_frames(clip, list(range(3)), 100, max_decode_mb=2 * FRAME_BYTES / 2**20)
    assert caught.value.status == 413 and "over the decode limit of" in caught.value.detail
    exact = 3 * FRAME_BYTES / 2**20  # at the limit exactly: decoded, by the service's check and the reader's
    assert decode_frames(clip, list(range(3)), 100, max_decode_mb=exact).shape == (3, 64, 64, 3)
