"""Damage in a multi-slice H.264 clip (PyAV's own writes carry one slice per encoder thread): FFmpeg's slice threads
neither flag nor fail a frame whose damaged slice another thread decoded, so the reader decodes such clips with no
slice threads (tools/video_slices.py)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.encoded_clips import write_rgb_clip
from tests.test_video import read_ids
from tests.test_video_concealed import _damaged, _decode, _gradient_ids, _packets, _zero_a_fifth
from tools.video import VideoDecodeError, VideoReader
from tools.video_slices import slices_per_frame

N = 40


def _sliced(path: Path, frames: np.ndarray, slices: int, gop: int = 12) -> Path:
    """An H.264 MP4 of ``frames`` with ``slices`` slices per frame (x264 one thread: the slices are x264's own)."""
    return write_rgb_clip(path, frames, "libx264", rate=16, gop=gop,
                          options={"x264-params": f"slices={slices}:threads=1:log-level=error"})


@pytest.fixture(scope="module")
def sliced(tmp_path_factory) -> tuple[Path, Path]:
    """A 40-frame 4-slice H.264 MP4 (keyframes 0, 12, 24, 36) and a copy whose third packet (decode order: frame 3,
    a P-frame after B-frame 2) has a fifth of its bytes zeroed: one of its slices broken."""
    clean = _sliced(tmp_path_factory.mktemp("s") / "s.mp4", _gradient_ids(), 4)
    with av.open(str(clean)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    assert slices_per_frame(bytes(_packets(clean)[0]), "h264", extradata) == 4  # the premise
    return clean, _damaged(clean, 2, _zero_a_fifth)


def test_a_damaged_slice_of_a_multi_slice_clip_fails_its_frames(sliced):
    """FFmpeg conceals the broken slice of frame 3 and, decoding one thread's slices, flags frame 3; with slice threads
    it flagged nothing (nor failed), so frames 2-11 (frame 3 and those that reference it) came back damaged under their
    indices, no error. Each read of them now fails naming frame 3; the frames before it and from the next keyframe on
    still read."""
    clean, bad = sliced
    good, broken = _decode(clean), _decode(bad)
    ordered = sorted(broken)
    differs = [i for i, p in enumerate(ordered) if np.abs(broken[p][0].astype(int) - good[p][0]).mean() > 0.5]
    assert differs == list(range(2, 12))  # the premise: ten frames damaged
    with VideoReader(bad) as reader:
        assert reader.meta.frames == N and reader._order[0].slices == 4
        for i in (2, 3, 7, 11):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {N} could not be decoded: .*corrupt data in "
                                                       "frame 3"):
                reader.read([i])
        assert read_ids(reader.read([0, 1, 12, 39])) == [0, 1, 12, 39]
        with pytest.raises(VideoDecodeError, match=f"frame 5 of {N}"):
            reader.read([1, 5, 30])
        with pytest.raises(VideoDecodeError, match=f"frame 2 of {N} .*corrupt data in frame 3"):
            list(reader.iter_frames())
