"""A reference picture whose nal_ref_idc bits alone were zeroed (the rest intact): the decoder drops it from its
references and decodes the frames after it that reference it wrong, with frame threads flagging none of them (a read
of frame 17, packet 15 broken so, came back wrong in 2 of 4 runs). The frame_nums around it show it a reference
picture (``H264References.fed``): the frames decoded from it up to the next keyframe fail."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import _damaged, _packets, failed_reads, frame_threaded_reads, gop12_clip
from tools.video import VideoDecodeError, VideoReader
from tools.video_nonref import H264References


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """`gop12_clip`: 40 frames, B-frames (a pyramid), keyframes 0, 12, 24, 36, and its frames."""
    return gop12_clip(tmp_path_factory.mktemp("h"))


def _unreferenced(data: bytearray, start: int, size: int) -> None:
    """Each slice of the packet (4-byte lengths) broken to nal_ref_idc 0, nothing else."""
    at = start
    while at < start + size:
        length = int.from_bytes(data[at:at + 4], "big")
        if data[at + 4] & 0x1F in (1, 5):
            data[at + 4] &= 0x9F
        at += 4 + length


def no_wrong_reads(path: Path, want: np.ndarray, packet: int, keys: list[int]) -> None:
    """`packet` of the clip at `path` broken to nal_ref_idc 0 (`_unreferenced`): every read that does not fail gives
    the clean frame (`want`), in order on one reader and each frame of its GOP (`keys`: the keyframes' packets, then
    the packet count) on a fresh one."""
    bad = _damaged(path, packet, _unreferenced)
    with VideoReader(bad) as reader:
        failed_reads(reader, want)
    key = max(k for k in keys if k <= packet)
    for i in range(key, min(k for k in keys if k > packet)):
        with VideoReader(bad) as reader:
            try:
                assert np.array_equal(reader.read([i])[0], want[i]), (packet, i)
            except VideoDecodeError:
                pass


def test_a_reference_picture_broken_to_unreferenced_is_told_when_the_next_picture_is_fed(clean):
    """Packet 15 (a B-pyramid reference) broken to nal_ref_idc 0: its frame_num is the one after packet 14's, and
    that of packet 16 (a B-frame no picture references) and of 17 (the next reference picture) the one after its
    own, as a reference picture's successors take. Told once packet 16 is fed (17 tells it again); the clean clip's
    packets tell nothing."""
    path, _ = clean
    with av.open(str(path)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    packets = [bytes(p) for p in _packets(path)]
    refs = H264References(extradata)
    assert not any(refs.fed(tag, data, extradata) for tag, data in enumerate(packets))
    broken = bytearray(packets[15])
    _unreferenced(broken, 0, len(broken))
    refs = H264References(extradata)
    told = [refs.fed(tag, bytes(broken) if tag == 15 else data, extradata) for tag, data in enumerate(packets[:20])]
    assert told[16] == told[17] == [15] and not any(told[:16] + told[18:])


@pytest.mark.parametrize("threads", [1, 4])
def test_no_frame_read_differs_from_the_clean_clip_with_any_reference_pictures_nal_ref_idc_zeroed(monkeypatch, clean,
                                                                                               threads):
    """Each reference picture in turn (its slices' nal_ref_idc zeroed, nothing else): every read of a single frame that
    does not fail gives the clean clip's frame, read in order on one reader (``failed_reads`` asserts it) and, for the
    frames of its GOP, each on a fresh one (a seek's decode from the keyframe: frame threads handed frame 17 out
    wrong so, packet 15 broken)."""
    path, want = clean
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    packets = _packets(path)
    keys = [i for i, p in enumerate(packets) if p.is_keyframe] + [len(packets)]
    referenced = [i for i, p in enumerate(packets) if bytes(p)[4] & 0x60]
    assert len(referenced) > 20  # the premise
    for packet in referenced:
        no_wrong_reads(path, want, packet, keys)
