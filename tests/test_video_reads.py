"""Reads that must keep frame identity: ``read_all_frames`` after a dropped frame, and the first read of a
clip that does not start on a keyframe."""

from __future__ import annotations

import pytest

from tests.test_video import id_frames, read_ids, write_raw
from tools.video import VideoDecodeError, VideoReader, read_all_frames


def test_read_all_frames_fails_on_a_frame_the_decoder_drops(tmp_path, monkeypatch):
    """``read_all_frames(max_frames=k)`` numbered the decoder's output: with frame 12 dropped it returned
    frame 13 as frame 12 (and every later one shifted), no error. Now it maps timestamps like ``read``."""
    path = write_raw(tmp_path / "d.mp4", id_frames(24), gop=24)
    original = VideoReader._packets_to_frames

    def dropping(self, container, stream):
        for frame in original(self, container, stream):
            if read_ids(frame.to_ndarray(format="rgb24")[None])[0] != 12:
                yield frame

    monkeypatch.setattr(VideoReader, "_packets_to_frames", dropping)
    assert read_ids(read_all_frames(path, max_frames=12)) == list(range(12))
    for limit in (16, None):
        with pytest.raises(VideoDecodeError, match="frame 12 of 24 could not be decoded"):
            read_all_frames(path, max_frames=limit)
    assert read_all_frames(path, max_frames=0).shape == (0, 64, 64, 3)
