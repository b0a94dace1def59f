"""A damaged H.264 picture that no other picture references (nal_ref_idc 0: x264's B-frames but the pyramid's), which
the decoder conceals and flags: its own frame is damaged, the frames decoded after it are not
(``tools.video_nonref``). One whose header's nal_ref_idc is itself the damage still fails the frames after it."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import (
    N,
    _damaged,
    _decode,
    _packets,
    _zero_a_fifth,
    failed_reads,
    frame_threaded_reads,
    gop12_clip,
)
from tools.video import VideoDecodeError, VideoReader
from tools.video_nonref import KEPT, H264References


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """`gop12_clip`: 40 frames, B-frames, keyframes 0, 12, 24, 36, and its frames."""
    return gop12_clip(tmp_path_factory.mktemp("n"))


def _wrong(path: Path, want: np.ndarray) -> tuple[list[int], list[int]]:
    """The frames FFmpeg flags decoding ``path``, and those that differ from ``want``."""
    got = _decode(path)
    order = sorted(got)
    return ([i for i, p in enumerate(order) if got[p][1]],
            [i for i, p in enumerate(order) if not np.array_equal(got[p][0], want[i])])


@pytest.mark.parametrize("threads", [1, 4])
def test_a_flagged_picture_no_frame_references_fails_its_own_frame_alone(monkeypatch, clean, threads):
    """Packet 8 (frame 7, a B-frame whose slice says nal_ref_idc 0) has a fifth of its bytes zeroed: FFmpeg conceals
    and flags frame 7, and only frame 7 comes out wrong. Frames 8-11, decoded after it, failed too (the flag blamed
    the rest of the GOP). Now only frame 7's read fails, and the others read as in the clean clip."""
    path, want = clean
    assert bytes(_packets(path)[8])[4] & 0x60 == 0  # the premise: nal_ref_idc 0
    bad = _damaged(path, 8, _zero_a_fifth)
    assert _wrong(bad, want) == ([7], [7])  # ... flagged, and the only frame damaged
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    with VideoReader(bad) as reader:
        assert failed_reads(reader, want) == [7]
        with pytest.raises(VideoDecodeError, match=f"frame 7 of {N} could not be decoded.*frame 7.*no frame references it"):
            reader.read(range(N))
        keep = [i for i in range(N) if i != 7]
        assert np.array_equal(reader.read(keep), want[keep])


def _unreferenced_and_zeroed(data: bytearray, start: int, size: int) -> None:
    """A reference picture's header broken to nal_ref_idc 0 (its 4-byte length first), and a fifth of it zeroed."""
    data[start + 4] &= 0x9F
    _zero_a_fifth(data, start, size)


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("packet", [2, 7])
def test_a_reference_picture_whose_header_broke_to_unreferenced_still_fails_the_frames_after_it(monkeypatch, clean,
                                                                                                threads, packet):
    """Packet 2 (frame 3, a P-frame) or 7 (frame 8, a P-frame) has its nal_ref_idc broken to 0 and a fifth zeroed: the
    decoder flags its frame, and decodes the frames after it against other pictures, unflagged (frames 2-11: the
    header's fields after frame_num no longer parse as written). Each frame that comes out wrong fails its read (the
    next reference picture's frame_num shows the header wrong), not its own alone. A guard: trusting nal_ref_idc alone
    handed frames 9-11 out wrong."""
    path, want = clean
    assert bytes(_packets(path)[packet])[4] & 0x60  # the premise: a reference picture
    bad = _damaged(path, packet, _unreferenced_and_zeroed)
    flagged, wrong = _wrong(bad, want)
    assert flagged == [packet + 1] and len(wrong) > 1  # ... its frame flagged, and frames it does not flag damaged
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    with VideoReader(bad) as reader:
        failed = failed_reads(reader, want)  # (every read that does not fail is asserted right)
    assert set(wrong) <= set(failed)


def _unreferenced_next_frame_num_and_zeroed(data: bytearray, start: int, size: int) -> None:
    """A reference picture's header broken to nal_ref_idc 0 and its frame_num (4 bits, the test clip's
    log2_max_frame_num) to one more, as the next reference picture's reads; a fifth zeroed."""
    data[start + 4] &= 0x9F
    bits = "".join(f"{b:08b}" for b in data[start + 5:start + 13])
    at = 0
    for _ in range(3):  # first_mb_in_slice, slice_type, pic_parameter_set_id (Exp-Golomb)
        zeros = len(bits[at:]) - len(bits[at:].lstrip("0"))
        at += 2 * zeros + 1
    bits = bits[:at] + f"{(int(bits[at:at + 4], 2) + 1) % 16:04b}" + bits[at + 4:]
    data[start + 5:start + 13] = int(bits, 2).to_bytes(8, "big")
    _zero_a_fifth(data, start, size)


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("packet", [2, 7])
def test_a_reference_picture_broken_to_unreferenced_and_the_next_frame_num_still_fails_the_frames_after_it(
        monkeypatch, clean, threads, packet):
    """Packet 2 (frame 3) or 7 (frame 8), P-frames, have nal_ref_idc broken to 0 and frame_num to one more (the next
    reference picture's), a fifth zeroed (damage at a packet's head can reach both): the decoder flags the frame and
    decodes the frames after it against other pictures, unflagged. The next reference picture's frame_num agrees
    with the broken one, but the previous reference picture's shows a gap (a picture no other references takes its
    predecessor's frame_num plus one): the frames after it fail. Checking the next one alone handed frames 2, 4-11
    (packet 2) or 7, 9-11 (packet 7) out wrong."""
    path, want = clean
    bad = _damaged(path, packet, _unreferenced_next_frame_num_and_zeroed)
    flagged, wrong = _wrong(bad, want)
    assert flagged == [packet + 1] and len(wrong) > 1  # the premise: frames it does not flag damaged
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    with VideoReader(bad) as reader:
        failed = failed_reads(reader, want)  # (every read that does not fail is asserted right)
    assert set(wrong) <= set(failed)


def test_a_picture_is_confirmed_unreferenced_by_the_next_reference_pictures_frame_num(clean):
    """Packets 3, 6, 8, 10, 16-22 even (B-frames, nal_ref_idc 0) take the frame_num of the next reference picture: confirmed.
    Packet 2 (a P-frame) is referenced; broken to nal_ref_idc 0, the next reference picture's frame_num is one more:
    not confirmed. Before a later reference picture is fed: not known yet (None)."""
    path, _ = clean
    with av.open(str(path)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    packets = [(bytes(p), p.is_keyframe) for p in _packets(path)]
    refs = H264References(extradata)
    for tag, (data, _) in enumerate(packets[:9]):
        refs.fed(tag, data, extradata)
    assert refs.says_unreferenced(8) and refs.confirmed(8) is None  # (packet 9, a P-frame, not fed yet)
    for tag, (data, _) in enumerate(packets[9:24], 9):
        refs.fed(tag, data, extradata)
    assert [t for t in range(24) if refs.says_unreferenced(t)] == [3, 6, 8, 10, 16, 18, 20, 22]
    assert all(refs.confirmed(t) for t in (3, 6, 8, 10, 16, 18, 20, 22))
    assert not refs.confirmed(2) and not refs.confirmed(1)
    broken = bytearray(packets[2][0])
    broken[4] &= 0x9F
    refs.fed(2, bytes(broken), extradata)
    assert refs.says_unreferenced(2) and refs.confirmed(2) is False


def test_pictures_more_than_kept_before_are_forgotten_whatever_the_tags_skip(clean):
    """Tags skip where packets of no picture go with the next one (``fed_with_pictures``: its tag counts them too): the
    test clip's packets fed under tags 3 apart. A picture fed more than KEPT tags before the last is forgotten (not
    confirmed: False). Forgetting only the tag exactly KEPT back kept every picture of such a decode."""
    path, _ = clean
    with av.open(str(path)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    refs = H264References(extradata)
    for i, p in enumerate(_packets(path)):
        refs.fed(3 * i, bytes(p), extradata)
    assert refs.confirmed(3 * 22) and 3 * 39 - 3 * 22 < KEPT  # (packet 22, a B-frame, kept)
    assert not refs.confirmed(3 * 3) and 3 * 39 - 3 * 3 > KEPT  # (packet 3, a B-frame, forgotten)


@pytest.mark.parametrize("threads", [1, 4])
def test_a_zero_run_in_a_reference_picture_broken_to_unreferenced_still_fails_the_frames_after_it(monkeypatch, clean,
                                                                                                  threads):
    """Packet 31 (frame 32, a P-frame) has its nal_ref_idc broken to 0 and a fifth zeroed: the zero-run check finds it
    (``tools.video_nal_check``), FFmpeg flags no frame and decodes frames 31-35 wrong. The check took the picture as
    one no frame references on its nal_ref_idc alone, and frames 31, 33-35 read alone came back wrong with no error;
    now, as a flagged one, only where the frame_nums bear it out."""
    path, want = clean
    assert bytes(_packets(path)[31])[4] & 0x60  # the premise: a reference picture
    bad = _damaged(path, 31, _unreferenced_and_zeroed)
    flagged, wrong = _wrong(bad, want)
    assert not flagged and wrong == [31, 32, 33, 34, 35]  # ... no flag, and the frames after it damaged
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    with VideoReader(bad) as reader:
        failed = failed_reads(reader, want)  # (every read that does not fail is asserted right)
    assert set(wrong) <= set(failed)
