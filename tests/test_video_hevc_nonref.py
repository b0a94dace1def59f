"""A damaged HEVC picture that no other picture references (every slice a sub-layer non-reference type, TRAIL_N,
TSA_N, RASL_N..., at the stream's highest TemporalId: x265's B-frames but the pyramid's): a run of zero bytes in it
(``tools.video_nal_check``) damages its own frame alone (``tools.hevc_nonref``). One whose header's NAL unit
type is itself the damage (a reference picture read as one no other references) still fails the frames after it."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import _damaged, _packets, failed_reads, frame_threaded_reads
from tests.test_video_hevc_damage import N, _hevc, _plain, _zero_the_tail
from tools.hevc_nonref import HevcReferences
from tools.video import VideoDecodeError, VideoReader

LAYERED = ":temporal-layers=3:bframes=3"
"""x265 with three temporal sub-layers: its non-reference B-frames TSA_N / RASL_N at TemporalId 2, the highest."""


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, tuple[Path, np.ndarray]]:
    """The x265 test clip (no picture hashes: only the zero-run check sees the damage) as written by default (its
    non-reference B-frames TRAIL_N / RASL_N, one sub-layer) and with temporal sub-layers (``LAYERED``), each with its
    frames."""
    out = {}
    for name, params in (("plain", ""), ("layered", LAYERED)):
        path = _hevc(tmp_path_factory.mktemp(name) / "c.mp4", params)
        out[name] = path, np.stack([f for _, f in sorted(_plain(path).items())])
    return out


def _zero_the_middle(data: bytearray, start: int, size: int) -> None:
    """Zero the slice data of a packet's first NAL unit (MP4: after its 4-byte length) from a third of the way in to
    its last 2 bytes: a run of zero bytes inside the unit (``tools.video_nal_check``), its header intact."""
    nal = int.from_bytes(data[start:start + 4], "big")
    assert nal + 4 <= size and nal > 12
    data[start + 4 + nal // 3:start + 4 + nal - 2] = bytes(nal - 2 - nal // 3)


def _nal_header(path: Path, packet: int) -> tuple[int, int]:
    """The NAL unit type and TemporalId of the first NAL unit of ``packet`` (decode order; MP4: after its length)."""
    data = bytes(_packets(path)[packet])
    return (data[4] >> 1) & 0x3F, (data[5] & 7) - 1


def _wrong(path: Path, clean: Path) -> list[int]:
    """The frames of ``clean`` that ``path`` gives otherwise, or not at all (FFmpeg flags and fails none:
    ``_plain``)."""
    got, want = _plain(path), _plain(clean)
    return [i for i, p in enumerate(sorted(want)) if p not in got or not np.array_equal(got[p], want[p])]


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize(("clip", "packet", "frame", "header"), [
    ("plain", 7, 6, (0, 0)),  # TRAIL_N
    ("plain", 24, 23, (8, 0)),  # RASL_N: a leading picture of keyframe 24
    ("layered", 4, 3, (2, 2)),  # TSA_N at TemporalId 2
    ("layered", 24, 23, (8, 2)),  # RASL_N at TemporalId 2
])
def test_a_zero_run_in_a_picture_no_frame_references_fails_its_own_frame_alone(monkeypatch, clips, threads, clip,
                                                                             packet, frame, header):
    """The packet of a B-frame no frame references has its slice data zeroed (``_zero_the_middle``): FFmpeg gives its
    frame wrong and every other frame as in the clean clip (no flag, no error). The zero-run check failed the frames
    decoded after it up to the next keyframe too; now only its own frame's read fails, and the others read as in the
    clean clip."""
    path, want = clips[clip]
    assert _nal_header(path, packet) == header  # the premise: a sub-layer non-reference picture
    bad = _damaged(path, packet, _zero_the_middle)
    assert _wrong(bad, path) == [frame]  # ... the only frame damaged
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    with VideoReader(bad) as reader:
        assert failed_reads(reader, want) == [frame]
        with pytest.raises(VideoDecodeError, match=f"frame {frame} of {N} could not be decoded.*zero bytes.*no frame "
                                                   "references it"):
            reader.read(range(N))
        keep = [i for i in range(N) if i != frame]
        assert np.array_equal(reader.read(keep), want[keep])


@pytest.mark.parametrize(("clip", "packet"), [("plain", 2), ("plain", 4), ("layered", 2)])
def test_a_zero_run_in_a_reference_picture_still_fails_the_frames_after_it(clips, clip, packet):
    """A reference picture (TRAIL_R; TSA_R at TemporalId 1 in the layered clip) with its slice data zeroed
    (``_zero_the_middle``): the frames decoded after it that reference it come out wrong, and each such read fails as
    before."""
    path, want = clips[clip]
    assert _nal_header(path, packet)[0] in (1, 3)  # the premise: a reference picture
    bad = _damaged(path, packet, _zero_the_middle)
    wrong = _wrong(bad, path)
    assert len(wrong) > 1  # ... frames after it damaged
    with VideoReader(bad) as reader:
        failed = failed_reads(reader, want)  # (every read that does not fail is asserted right)
    assert set(wrong) <= set(failed)


def _type_broken(kind: int):  # noqa: ANN202
    """An edit: the packet's first NAL unit type set to ``kind`` (its TemporalId kept), its slice data zeroed."""
    def edit(data: bytearray, start: int, size: int) -> None:
        data[start + 4] = (data[start + 4] & 0x81) | kind << 1
        _zero_the_middle(data, start, size)
    return edit


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize(("clip", "packet", "kind"), [("plain", 2, 0), ("plain", 4, 0), ("layered", 2, 2)])
def test_a_reference_picture_whose_type_broke_to_non_reference_still_fails_the_frames_after_it(
        monkeypatch, clips, threads, clip, packet, kind):
    """A reference picture whose NAL unit type broke to a sub-layer non-reference one (TRAIL_R to TRAIL_N, a bit;
    TSA_R to TSA_N), its slice data zeroed: FFmpeg decodes it and keeps it for the pictures whose reference
    picture sets name it, and the frames after it come out wrong. The next picture's reference picture set names it:
    each frame that comes out wrong fails its read. Trusting the NAL unit type alone would hand them out."""
    path, want = clips[clip]
    bad = _damaged(path, packet, _type_broken(kind))
    assert _nal_header(bad, packet)[0] == kind
    wrong = _wrong(bad, path)
    assert len(wrong) > 1  # the premise: frames after it damaged
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    with VideoReader(bad) as reader:
        failed = failed_reads(reader, want)
    assert set(wrong) <= set(failed)


def test_a_zero_run_in_a_non_reference_picture_of_a_hashed_clip_still_fails_its_gop(tmp_path):
    """With picture hashes the decoder fails the damaged picture's packet, and FFmpeg may then put the next packet's
    error out behind a frame, which PyAV drops (``CodecContext.decode`` keeps the frames it has): the decoder's
    checks lapse for the frames after it, so a failed packet still fails them up to the next keyframe."""
    path = _hevc(tmp_path / "c.mp4", ":hash=1")
    assert _nal_header(path, 3) == (0, 0)
    bad = _damaged(path, 3, _zero_the_tail)
    with VideoReader(bad) as reader:
        for i in (1, 4, 11):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {N} could not be decoded"):
                reader.read([i])


def _poc_broken(data: bytearray, start: int, size: int) -> None:
    """A reference picture's NAL unit type broken to TRAIL_N and its POC LSB (8 bits, the test clip's) to another
    (+64), its slice data zeroed: damage at a packet's head can reach both."""
    data[start + 4] &= 0x81
    bits = "".join(f"{b:08b}" for b in data[start + 6:start + 14])
    at = 2  # first_slice_segment_in_pic_flag, slice_pic_parameter_set_id 0
    at += 2 * (len(bits[at:]) - len(bits[at:].lstrip("0"))) + 1  # slice_type (Exp-Golomb)
    bits = bits[:at] + f"{(int(bits[at:at + 8], 2) + 64) % 256:08b}" + bits[at + 8:]
    data[start + 6:start + 14] = int(bits, 2).to_bytes(8, "big")
    _zero_the_middle(data, start, size)


@pytest.mark.parametrize("packet", [2, 4])
def test_a_reference_picture_whose_type_and_poc_broke_still_fails_the_frames_after_it(clips, packet):
    """A reference picture read as TRAIL_N with its POC broken too, as no picture after it names: the next picture's
    set names the picture's own POC no longer, but it names one (the broken picture's as written) that the picture's
    own set did not keep: not confirmed. FFmpeg gives the frames after it wrong or not at all; each such read fails."""
    path, want = clips["plain"]
    bad = _damaged(path, packet, _poc_broken)
    refs = _references(bad)
    assert refs.says_unreferenced(packet) and refs.confirmed(packet) is False
    wrong = _wrong(bad, path)
    assert len(wrong) > 1  # the premise: frames after it damaged
    with VideoReader(bad) as reader:
        failed = failed_reads(reader, want)
    assert set(wrong) <= set(failed)


def _references(path: Path, edit: int | None = None) -> HevcReferences:
    """``HevcReferences`` fed every packet of ``path`` (tags: decode order); packet ``edit`` with its NAL unit header
    broken to TRAIL_N at the highest TemporalId."""
    with av.open(str(path)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    refs = HevcReferences(extradata)
    for tag, p in enumerate(_packets(path)):
        data = bytearray(bytes(p))
        if tag == edit:
            data[4] &= 0x81
            data[5] = (data[5] & 0xF8) | (refs._sps[0].highest_tid + 1)
        assert refs.fed(tag, bytes(data), extradata) == []  # (no HEVC picture is told demoted)
    return refs


@pytest.mark.parametrize("clip", ["plain", "layered"])
def test_pictures_are_told_unreferenced_by_their_type_their_temporal_id_and_the_next_reference_picture_set(clips,
                                                                                                          clip):
    """The pictures whose slices are of a sub-layer non-reference type at the highest TemporalId (0 in the plain clip,
    2 in the layered one) say no picture references them; the next picture's reference picture set confirms each but
    one no picture follows (None). The layered clip's last packet, TSA_N at TemporalId 1, says nothing: a picture of
    sub-layer 2 may reference it. A reference picture whose header broke to TRAIL_N at the highest TemporalId says
    so, and is not confirmed."""
    path, _ = clips[clip]
    headers = [_nal_header(path, t) for t in range(N)]
    highest = max(tid for _, tid in headers)
    refs = _references(path)
    told = [t for t in range(N) if refs.says_unreferenced(t)]
    assert told == [t for t, (kind, tid) in enumerate(headers) if kind in (0, 2, 8) and tid == highest]
    assert len(told) >= 16 and all(refs.confirmed(t) is True for t in told if t < N - 1)
    assert refs.confirmed(N - 1) is (None if told[-1] == N - 1 else False)
    assert not refs.says_unreferenced(2) and refs.confirmed(2) is False
    if clip == "layered":
        assert headers[39] == (2, 1) and 39 not in told
    broken = _references(path, edit=2)
    assert broken.says_unreferenced(2) and broken.confirmed(2) is False
    assert [t for t in told if broken.confirmed(t)] == [t for t in told if refs.confirmed(t)]
