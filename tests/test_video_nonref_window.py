"""A reference picture whose nal_ref_idc alone was zeroed, in an open-GOP clip (x264 ``open-gop``, 2 B-frames, no
pyramid): the B-frame decoded right after it references it and comes out wrong, unflagged. Told only as the next
reference picture was fed (``H264References.demoted``), a read of that B-frame with one thread settled it by a flush,
the next reference picture never fed, and handed it out wrong: the picture after the broken one tells it already, its
frame_num two past the last reference picture's where a picture no other references takes the one after."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import _decode, _gradient_ids, _packets
from tests.test_video_nonref_header import _unreferenced, no_wrong_reads
from tools.video_nonref import H264References


def _open_gop_clip(folder: Path) -> tuple[Path, np.ndarray]:
    path = folder / "open.mp4"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=16, options={"x264-params": "bframes=2:b-pyramid=none:ref=2:open-gop=1"})
        s.width, s.height, s.pix_fmt = 96, 96, "yuv420p"
        s.codec_context.gop_size = 12
        for f in _gradient_ids():
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    good = _decode(path)
    return path, np.stack([good[p][0] for p in sorted(good)])


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> tuple[Path, np.ndarray]:
    return _open_gop_clip(tmp_path_factory.mktemp("o"))


def _slice_first(data: bytes) -> bool:
    return data[4] & 0x1F == 1 and bool(data[4] & 0x60)


def test_the_picture_after_a_broken_reference_picture_tells_it(clip):
    """Packet 25 (the P-frame shown as frame 26) broken to nal_ref_idc 0: packet 26 (B-frame 25, which no picture
    references) tells it as it is fed, its frame_num two past that of packet 23 (the last reference picture left)."""
    path, _ = clip
    with av.open(str(path)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    packets = [bytes(p) for p in _packets(path)]
    assert _slice_first(packets[25]) and not packets[26][4] & 0x60  # the premise: a P-frame, then a B-frame
    broken = bytearray(packets[25])
    _unreferenced(broken, 0, len(broken))
    refs = H264References(extradata)
    told = [refs.fed(tag, bytes(broken) if tag == 25 else data, extradata) for tag, data in enumerate(packets)]
    assert 25 in told[26] and not any(told[:26])
    refs = H264References(extradata)
    assert not any(refs.fed(tag, data, extradata) for tag, data in enumerate(packets))  # (the clean clip: none)


def test_the_last_reference_picture_broken_to_unreferenced_is_told_by_the_b_frame_after_it(clip):
    """Packet 38 (P-frame 39, the clip's last reference picture) broken so: no reference picture comes after it, and
    only packet 39 (B-frame 38, which references it) can tell it; told at the next reference picture alone, it never
    was (with 4 frame threads a read of frame 38 came back wrong, no error, on a B-pyramid clip broken so)."""
    path, _ = clip
    with av.open(str(path)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    packets = [bytes(p) for p in _packets(path)]
    assert len(packets) == 40 and _slice_first(packets[38]) and not packets[39][4] & 0x60  # the premise
    broken = bytearray(packets[38])
    _unreferenced(broken, 0, len(broken))
    refs = H264References(extradata)
    told = [refs.fed(tag, bytes(broken) if tag == 38 else data, extradata) for tag, data in enumerate(packets)]
    assert told[39] == [38] and not any(told[:39])


def test_no_read_differs_from_the_clean_clip_with_a_reference_picture_broken_to_unreferenced(clip):
    """Each reference P-frame in turn broken so (one thread): every read that does not fail gives the clean clip's
    frame, in order on one reader and each frame of its GOP on a fresh one (frame 25, packet 25 broken, came back
    wrong both ways)."""
    path, want = clip
    packets = _packets(path)
    keys = [i for i, p in enumerate(packets) if p.is_keyframe] + [len(packets)]
    referenced = [i for i, p in enumerate(packets) if _slice_first(bytes(p))]
    assert len(referenced) > 12  # the premise
    for packet in referenced:
        no_wrong_reads(path, want, packet, keys)
