"""A zero run in an H.264 picture an MP4 edit list discards (decoded, not shown) whose slices say no picture references
it (nal_ref_idc 0): the damage may be that header too, a reference picture broken to 0, and the frames decoded after
it come out wrong. Such a picture is not kept for ``H264References.confirmed`` (``skipped``), so its damage reaches the
frames after it, as a reference picture's does (``DamageWatch.broken``)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import (
    _damaged,
    _gradient_ids,
    _zero_a_fifth,
    failed_reads,
    frame_threaded_reads,
)
from tests.test_video_edits import _late_start
from tools.video import VideoDecodeError, VideoReader
from tools.video_damage import DamageWatch
from tools.video_nal_check import zero_run_damage


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> tuple[Path, np.ndarray, list[tuple[bool, bool]]]:
    """`_late_start` of 40 gradient frames, keyframes every 12, the edit from frame 20 (packets 0-6 and 8, decode
    order, discarded: keyframe 12's GOP up to frame 19, x264's B-pyramid); its 20 frames as read, and each packet's
    (discarded, reference picture)."""
    path = _late_start(tmp_path_factory.mktemp("d"), gop=12, skip=20, of=40, frames=_gradient_ids(40))
    with av.open(str(path)) as c:
        kinds = [(p.is_discard, bool(bytes(p)[4] & 0x60)) for p in c.demux(video=0) if p.size]
    with VideoReader(path) as reader:
        want = reader.read(range(reader.meta.frames))
    return path, want, kinds


def _unreferenced_and_zeroed(data: bytearray, start: int, size: int) -> None:
    """A picture's header broken to nal_ref_idc 0 (its 4-byte length first), and a fifth of it zeroed."""
    data[start + 4] &= 0x9F
    _zero_a_fifth(data, start, size)


def test_a_discarded_zero_run_picture_that_says_no_picture_references_it_damages_the_frames_after_it():
    """The watch dropped such a picture's damage unconfirmed; its tag is the next picture's (``tag_discarded``)."""
    watch = DamageWatch("c.mp4", 20)
    watch.broken(8, zero_run_damage(8), discarded=True, alone=True)
    assert watch.damage((8, 0)) is not None and watch.damage((11, 0)) is not None  # (frames from tag 8 on)
    assert watch.damage((7, 0)) is None and watch.damage((12, 12)) is None  # (before it; past the next keyframe)


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("edit", [_zero_a_fifth, _unreferenced_and_zeroed])
def test_no_frame_reads_wrong_whichever_discarded_picture_is_damaged(monkeypatch, clip, threads, edit):
    """Every discarded packet in turn, zeroed, or zeroed and its nal_ref_idc broken to 0 (a reference picture's: FFmpeg
    with 4 frame threads flagged nothing in some runs, and frames 0-3 read wrong with no error; packets 1 and 3).
    Each read of a frame, alone and all at once, fails or is the clean clip's."""
    path, want, kinds = clip
    discarded = [i for i, (discard, _) in enumerate(kinds) if discard]
    assert discarded == [0, 1, 2, 3, 4, 5, 6, 8] and [kinds[i][1] for i in discarded].count(False) == 3  # premise
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    for packet in discarded:
        bad = _damaged(path, packet, edit)
        with VideoReader(bad) as reader:
            failed_reads(reader, want)  # (every read that does not fail is asserted right)
        with VideoReader(bad) as reader:
            try:
                got = reader.read(range(len(want)))
            except VideoDecodeError:
                continue
            assert np.array_equal(got, want), packet
