"""Cover art is no video: FFmpeg gives an MP4's ``udta/covr`` picture (and Matroska's image attachments) as a
video stream marked ``attached_pic``, first when the box comes before the tracks."""

from __future__ import annotations

import struct
from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids
from tools.mp4_boxes import child_boxes
from tools.video import VideoDecodeError, VideoReader, probe


def _box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I4s", len(body) + 8, kind) + body


def _with_cover_first(path: Path, frames: np.ndarray | None) -> bytes:
    """An MP4 of `frames` (None: no video track) with a PNG cover, its ``moov/udta`` moved before the tracks
    (mvhd, udta, trak: the order some taggers write)."""
    with av.open(str(path), "w") as c:
        cover = c.add_stream("png", rate=1)
        cover.width, cover.height, cover.pix_fmt = 32, 32, "rgb24"
        cover.disposition = av.stream.Disposition.attached_pic
        video = c.add_stream("libx264", rate=16) if frames is not None else None
        if video is not None:
            video.width, video.height, video.pix_fmt = 64, 64, "yuv420p"
        c.mux(cover.encode(av.VideoFrame.from_ndarray(np.full((32, 32, 3), 200, np.uint8), format="rgb24")))
        c.mux(cover.encode())
        for f in frames if frames is not None else []:
            c.mux(video.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        if video is not None:
            c.mux(video.encode())
    out = b""
    for kind, body in child_boxes(memoryview(path.read_bytes())):
        if kind == b"moov":  # the same boxes, reordered: no offset into the media data changes
            order = {b"mvhd": 0, b"udta": 1}
            kids = sorted(child_boxes(body), key=lambda kv: order.get(kv[0], 2))
            body = memoryview(b"".join(_box(k, bytes(b)) for k, b in kids))
        out += _box(kind, bytes(body))
    return out


def test_a_cover_picture_before_the_tracks_is_not_the_clip(tmp_path: Path) -> None:
    """Was: the cover read as the clip, 1 frame at 90000 fps (a run scored it zero: "only 1 frame(s)")."""
    data = _with_cover_first(tmp_path / "c.mp4", id_frames(20))
    path = tmp_path / "first.mp4"
    path.write_bytes(data)
    with av.open(str(path)) as c:
        assert c.streams.video[0].disposition & av.stream.Disposition.attached_pic
    meta = probe(path)
    assert (meta.frames, meta.fps, meta.width) == (20, 16.0, 64)
    with VideoReader(data) as reader:
        assert read_ids(reader.read([19, 0, 7])) == [19, 0, 7]


def test_a_file_with_only_a_cover_has_no_video(tmp_path: Path) -> None:
    path = tmp_path / "only.mp4"
    path.write_bytes(_with_cover_first(tmp_path / "o.mp4", None))
    with pytest.raises(VideoDecodeError, match="no video stream"):
        probe(path)
