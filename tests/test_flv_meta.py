"""The file size an FLV's onMetaData states (`tools.flv_meta`): what lets a complete clip with a long last frame pass."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import pytest

from tests.test_video import id_frames
from tools.flv_meta import stated_size, whole_flv
from tools.video import VideoDecodeError, probe


def _held(path: Path, options: dict | None = None) -> Path:
    """16 FLV frames 62 ms apart, the last one held 1 s (its packet's duration, which the muxer adds to the header's)."""
    with av.open(str(path), "w", options=options or {}) as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt, s.codec_context.time_base = 64, 64, "yuv420p", Fraction(1, 1000)
        s.options = {"bf": "0"}
        for k, f in enumerate([*id_frames(16), None]):
            frame = None if f is None else av.VideoFrame.from_ndarray(f, format="rgb24")
            if frame is not None:
                frame.pts, frame.time_base = k * 62, Fraction(1, 1000)
            for packet in s.encode(frame):
                packet.duration = 1000 if packet.pts == 15 * 62 else packet.duration
                c.mux(packet)
    return path


@pytest.mark.parametrize("options", [None, {"flvflags": "add_keyframe_index"}])
def test_the_stated_size_is_the_files(tmp_path, options):
    path = _held(tmp_path / "h.flv", options)
    data = path.read_bytes()
    assert stated_size(data) == len(data)
    assert whole_flv(path) and whole_flv(data) and not whole_flv(data[:-1])
    assert stated_size(b"FLV\x01\x01\x00\x00\x00\x09" + bytes(20)) is None  # no onMetaData tag
    assert stated_size(data[:40]) is None  # the tag cut short: does not parse


def test_a_held_clip_cut_where_a_tag_ends_is_still_truncated(tmp_path):
    """The size only clears a file that has it all: cut after its 12th frame's tag (no packet read short), the
    header's 1.93 s still runs past the frames and the clip is truncated."""
    path = _held(tmp_path / "h.flv")
    with av.open(str(path)) as c:
        starts = [p.pos for p in c.demux(c.streams.video[0]) if p.size]
    data = path.read_bytes()
    cut = tmp_path / "cut.flv"
    cut.write_bytes(data[:starts[12]])  # the 13th frame's tag (its header at the packet's position) on: gone
    assert probe(path).frames == 16
    with pytest.raises(VideoDecodeError, match="truncated file: the video stream's header says 1.93 s"):
        probe(cut)
