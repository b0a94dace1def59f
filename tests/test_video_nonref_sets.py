"""Parameter sets sent in band in a non-key packet (``tools.video_nonref.H264References``): a PPS under a new id ahead
of a P-frame's slice, the slices from there on naming it (``tests.h264_rewrite``)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.h264_rewrite import cavlc_clip, frames_of, pps_switched
from tests.test_video_concealed import N, _damaged, _packets, _zero_a_fifth, failed_reads
from tests.test_video_nonref_damage import _wrong
from tools.video import VideoReader
from tools.video_nonref import H264References

SWITCH = 14
"""The packet (decode order; a P-frame, no keyframe) that carries the new PPS (id 1)."""


@pytest.fixture(scope="module")
def switched(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """The 40-frame CAVLC clip (keyframes 0, 12, 24, 36) with PPS 1 sent in packet ``SWITCH`` and used from there on,
    and its frames (the same as the clip's: the premise)."""
    folder = tmp_path_factory.mktemp("s")
    clip = cavlc_clip(folder / "c.mp4")
    path = pps_switched(clip, folder / "switched.mp4", SWITCH)
    want = frames_of(clip)
    assert np.array_equal(frames_of(path), want)
    assert not _packets(path)[SWITCH].is_keyframe and bytes(_packets(path)[SWITCH])[4] & 0x1F == 8
    return path, want


def test_a_pps_sent_in_a_non_key_packet_is_learnt(switched):
    """The B-frames after the switch (packets 16-22 even, nal_ref_idc 0) are confirmed by the frame_nums around them:
    their slices name PPS 1, learnt from packet 14. Learnt from keyframes alone, none parsed: none confirmed."""
    path, _ = switched
    with av.open(str(path)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    refs = H264References(extradata)
    for tag, p in enumerate(_packets(path)[:24]):
        refs.fed(tag, bytes(p), extradata)
    assert [t for t in range(SWITCH, 24) if refs.says_unreferenced(t)] == [16, 18, 20, 22]
    assert all(refs.confirmed(t) for t in (16, 18, 20, 22))


@pytest.mark.parametrize("packet", [16, 20])
def test_a_flagged_picture_no_frame_references_after_the_switch_fails_its_own_frame_alone(switched, packet):
    """Packet 16 (frame 15) or 20 (frame 19), B-frames no frame references, each naming PPS 1, have a fifth zeroed:
    FFmpeg flags that frame (20; 16's a zero run shows: ``tools.video_nal_check``), the only one wrong. Its read alone
    fails; with PPS 1 unknown, its frame_num did not parse and the frames decoded after it up to keyframe 24 failed too,
    read right."""
    path, want = switched
    bad = _damaged(path, packet, _zero_a_fifth)
    frame = packet - 1
    flagged, wrong = _wrong(bad, want)
    assert set(flagged) <= {frame} and wrong == [frame]  # the premise (16: no flag, a zero run: video_nal_check)
    with VideoReader(bad) as reader:
        assert failed_reads(reader, want) == [frame]
    assert len(want) == N
