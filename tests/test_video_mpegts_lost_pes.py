"""A frame the MPEG-TS demuxer loses to a damaged PES must not shift the frames after it (`tools.mpegts_pes`).

Damage to the PES start code of a transport packet that begins a PES makes FFmpeg's demuxer skip that whole PES (a
frame) with no error; damage to the slice start code inside one makes the H.264 parser join its data to the frame
before, its PES timestamp lost. Either way the clip counts one frame fewer, and every frame shown after the lost one
came out under the index of the frame before it: its neighbour's pixels, handed out as good.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_open_gop import _drop, _open_gop
from tools.mpegts_pes import pes_starts
from tools.video import VideoDecodeError, VideoReader, probe


def _cut_clip(tmp_path: Path) -> Path:
    """A 40-frame x264 open-GOP MPEG-TS clip cut to start on its second keyframe, a non-IDR I with leading B-frames."""
    return _drop(_open_gop(tmp_path, "libx264", suffix=".ts"), 7)


def av_pid(path: Path) -> int:
    with av.open(str(path)) as c:
        return c.streams.video[0].id


def _target(data: bytes, pid: int, frame: str) -> int:
    """Offset of the transport packet that starts the PES of a frame late in the clip: a small B-frame's (its PES fits
    in that one packet: the next PES of the PID starts in the next packet of the PID, the 6th such from the end), or the
    largest one of the last 8 (a P- or I-frame, which the B-frames decoded after it reference)."""
    starts = [at for at, _, _ in pes_starts(data, pid)] + [len(data)]
    if frame == "reference":
        return max(starts[-9:-1], key=lambda a: starts[starts.index(a) + 1] - a)
    small = [a for a, b in zip(starts, starts[1:], strict=False) if all(
        (data[k + 1] & 0x1F) << 8 | data[k + 2] != pid for k in range(a + 188, b, 188))]
    return small[-6]


def _payload(data: bytes | bytearray, at: int) -> int:
    """Offset of the PES in the transport packet at `at` (after its adaptation field)."""
    return at + (5 + data[at + 4] if (data[at + 3] >> 4) & 3 == 3 else 4)


def _no_pes_header(data: bytearray, at: int) -> None:
    start = _payload(data, at)
    data[start:start + 3] = bytes(3)  # the PES start code


def _no_slice_start(data: bytearray, at: int) -> None:
    pes = _payload(data, at)
    body = pes + 9 + data[pes + 8]  # after the PES header: an access unit delimiter, then the slice
    slice_at = data.index(b"\x00\x00\x01", body + 4)
    for k in range(slice_at, slice_at + 4):
        data[k] ^= 0x5A


@pytest.mark.parametrize("frame", ["b", "reference"])
@pytest.mark.parametrize("damage", [_no_pes_header, _no_slice_start])
def test_a_frame_lost_by_the_demuxer_fails_the_frames_after_it(tmp_path: Path, damage, frame: str) -> None:  # noqa: ANN001
    """Was: 39 frames of 40 read as good, those from the lost one on each its successor's pixels (no error)."""
    clip = _cut_clip(tmp_path)
    with VideoReader(clip) as r:  # frame by frame: the open GOP's leading frames fail, alone
        frames, video_pid = r.meta.frames, av_pid(clip)
        good = {}
        for i in range(frames):
            try:
                good[i] = r.read([i])[0]
            except VideoDecodeError:
                pass
    assert len(good) >= frames - 4  # the clean clip reads whole but for the open GOP's leading frames
    data = bytearray(clip.read_bytes())
    damage(data, _target(bytes(data), video_pid, frame))
    bad = tmp_path / "bad.ts"
    bad.write_bytes(bytes(data))
    assert probe(bad).frames == frames - 1  # the damage loses a frame
    wrong, read = [], []
    with VideoReader(bad) as r:
        for i in range(r.meta.frames):
            try:
                got = r.read([i])[0]
            except VideoDecodeError as e:
                if i in good:
                    assert "bad.ts" in str(e) and f"frame {i} " in str(e)
                continue
            read.append(i)
            if i not in good or not np.array_equal(got, good[i]):
                wrong.append(i)
        assert wrong == [], f"frames {wrong} handed out with another frame's pixels"
        assert len(read) >= frames // 2  # the frames shown before the lost one still read
        with pytest.raises(VideoDecodeError, match="wrong index"):  # and a read of them all fails
            r.read([i for i in range(r.meta.frames) if i in good])


def test_a_file_s_pes_starts_are_read_from_a_map_not_a_whole_copy(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A long recording's TS may be gigabytes: `pes_starts` maps the file (same rows as from its bytes) and never reads
    it whole into memory (`Path.read_bytes` refused here)."""
    clip = _cut_clip(tmp_path)
    pid = av_pid(clip)
    want = pes_starts(clip.read_bytes(), pid)

    def whole(self):  # noqa: ANN001, ANN202
        raise AssertionError(f"{self} read whole")

    monkeypatch.setattr(Path, "read_bytes", whole)
    assert want and pes_starts(clip, pid) == want


@pytest.mark.parametrize("m2ts", [False, True])
def test_pes_starts_of_a_clip_with_audio_are_the_demuxed_video_packets(tmp_path: Path, m2ts: bool) -> None:
    """Every transport packet of the file is looked at (arrays of their headers: `_on_pid`), only the video PID's taken:
    in a clean clip with an audio PID, each PES start is a video packet FFmpeg demuxes (its position, its pts), whole,
    in TS and in M2TS (192-byte packets: a timestamp before each, where FFmpeg's packet position points)."""
    from tests.test_video_mpegts_cut import _write_ts_with_audio

    clip = _write_ts_with_audio(tmp_path / "a.ts")
    if m2ts:  # the same packets, each after a 4-byte arrival timestamp
        data = clip.read_bytes()
        clip = tmp_path / "a.m2ts"
        clip.write_bytes(b"".join((k * 300).to_bytes(4, "big") + data[at:at + 188]
                                  for k, at in enumerate(range(0, len(data), 188))))
    with av.open(str(clip)) as c:
        stream = c.streams.video[0]
        want = [(p.pos + 4 * m2ts, p.pts, True) for p in c.demux(stream) if p.size]  # (M2TS: its timestamp's)
        audio = c.streams.audio[0].id
    assert len(want) == 40 and pes_starts(clip, av_pid(clip)) == want
    assert len(pes_starts(clip, audio)) > 10 and not set(pes_starts(clip, audio)) & set(want)
