"""Two MPEG-TS files joined (``cat a.ts b.ts``, a broadcast splice): the second's timestamps restart or jump
(`tools.mpegts_timeline`).

A jump forward keeps the frames' order by timestamp, which is the reader's index: the clip reads, every frame equal to
decoding each part alone. Timestamps that go back put the second part's frames among (or before) the first's in that
order: frames handed out under another's index, or reads failing with "got pts ... instead" or a mid-GOP error on an
undamaged clip. The reader refuses such a file, naming the discontinuity.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids
from tests.test_video_open_gop import _drop, _open_gop
from tools.video import VideoDecodeError, VideoReader, probe, read_all_frames, read_frames

STEP = 5625
"""A frame's duration at 16 fps in MPEG-TS's 90 kHz clock."""


def _part(path: Path, first: int, frames: int = 24, bframes: str = "bframes=2") -> Path:
    """`frames` id frames from id `first`, x264 with B-frames (`bframes`) and a closed GOP every 8 frames, in
    MPEG-TS."""
    with av.open(str(path), "w", format="mpegts") as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.options = {"x264-params": f"keyint=8:min-keyint=8:{bframes}:b-adapt=0:scenecut=0:log-level=error"}
        for f in id_frames(first + frames)[first:]:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


def _shifted(src: Path, path: Path, offset: int) -> Path:
    """`src` remuxed with every timestamp moved by `offset` (90 kHz ticks)."""
    with av.open(str(src)) as i, av.open(str(path), "w", format="mpegts") as o:
        si = i.streams.video[0]
        so = o.add_stream_from_template(si)
        for p in i.demux(si):
            if p.size:
                p.stream, p.pts, p.dts = so, p.pts + offset, p.dts + offset
                o.mux(p)
    return path


def _pts_only(src: Path, path: Path) -> Path:
    """`src` with each video PES header's DTS turned into stuffing bytes (PTS only, as some muxers write every PES):
    FFmpeg's demuxer then guesses the decode timestamps."""
    data = bytearray(src.read_bytes())
    with av.open(str(src)) as c:
        pid = c.streams.video[0].id
    for at in range(0, len(data), 188):
        if (data[at + 1] & 0x1F) << 8 | data[at + 2] == pid and data[at + 1] & 0x40:
            pes = at + (5 + data[at + 4] if (data[at + 3] >> 4) & 3 == 3 else 4)
            if data[pes + 7] & 0xC0 == 0xC0:
                data[pes + 7], data[pes + 9] = data[pes + 7] & 0x3F | 0x80, data[pes + 9] & 0x0F | 0x20
                data[pes + 14:pes + 19] = b"\xff" * 5
    path.write_bytes(bytes(data))
    return path


def _joined(tmp_path: Path, offset: int, second: Path | None = None, lead: int = 0) -> tuple[Path, Path, Path]:
    """(a, b, a + b): a (frames 0..23) moved by `lead` ticks, b (frames 24..47, or `second`) by `offset`, both from
    the muxer's timestamps (each from 0 plus the B-frames' delay), b appended to a."""
    a = _part(tmp_path / "a0.ts", 0)
    a = _shifted(a, tmp_path / "a.ts", lead) if lead else a
    b = _shifted(second or _part(tmp_path / "b0.ts", 24), tmp_path / "b.ts", offset)
    joined = tmp_path / "ab.ts"
    joined.write_bytes(a.read_bytes() + b.read_bytes())
    return a, b, joined


@pytest.mark.parametrize(("offset", "lead"), [(0, 0), (1, 0), (0, 30 * STEP + 1), (3 * STEP + 1, 0)],
                         ids=["restart", "restart_off_phase", "back", "overlap"])
def test_timestamps_that_go_back_are_refused_naming_the_discontinuity(tmp_path: Path, offset: int, lead: int) -> None:
    """Was: "got pts ... instead" (restart_off_phase, overlap: frame 1 of 48, and 46 of 48 read one by one), a mid-GOP
    error on frame 0 (back: the second part sorted first), or read through the decoder's count (restart: equal
    timestamps, unusable; right here, where the second part starts on an IDR picture, but wrong frames handed out
    where it starts on an open GOP: `test_a_restart_into_an_open_gop_is_refused`)."""
    a, _, joined = _joined(tmp_path, offset, lead=lead)
    with pytest.raises(VideoDecodeError, match="discontinuity") as caught:
        probe(joined)
    with av.open(str(a)) as c:
        last = max(p.dts for p in c.demux(c.streams.video[0]) if p.size)
    assert f"after {last}" in str(caught.value) and "ab.ts" in str(caught.value)
    with pytest.raises(VideoDecodeError, match="discontinuity"):
        read_all_frames(joined.read_bytes())


def test_a_restart_into_an_open_gop_is_refused(tmp_path: Path) -> None:
    """The second part cut to start on an open GOP's non-IDR I picture, its timestamps from 0 again: equal timestamps,
    so the reader counted the decoder's output, which decoded the second part's first frames against the first part's
    pictures (measured: frame 24 of 57, its leading B-frame, which alone fails, showed id 20, handed out as good)."""
    second = _drop(_open_gop(tmp_path, "libx264", suffix=".ts"), 7)
    with pytest.raises(VideoDecodeError, match="discontinuity"):
        probe(_joined(tmp_path, 0, second)[2])


@pytest.mark.parametrize("offset", [24 * STEP, 24 * STEP + 9_000_000], ids=["continuing", "jump"])
def test_timestamps_that_jump_forward_read_each_part_as_alone(tmp_path: Path, offset: int) -> None:
    """Every frame of the joined file equals the frame decoding its part alone gives, read whole and one by one
    (random order: the reader's seeks)."""
    a, b, joined = _joined(tmp_path, offset)
    want = np.concatenate([read_all_frames(a), read_all_frames(b)])
    assert read_ids(want) == list(range(48))
    assert probe(joined).frames == 48
    assert np.array_equal(read_all_frames(joined), want)
    order = np.random.default_rng(7).permutation(48)
    with VideoReader(joined) as r:
        for i in order:
            assert np.array_equal(r.read([int(i)])[0], want[i]), i
    assert np.array_equal(read_frames(joined, [3, 20, 30, 47]), want[[3, 20, 30, 47]])


def test_timestamps_that_wrap_at_2_to_the_33_are_no_discontinuity(tmp_path: Path) -> None:
    """PES timestamps count modulo 2^33: FFmpeg's demuxer unwraps them (the packets before the wrap negative), so a
    clip across the wrap reads whole."""
    a = _part(tmp_path / "a.ts", 0)
    wrapped = _shifted(a, tmp_path / "w.ts", 2**33 - 10 * STEP)
    assert read_ids(read_all_frames(wrapped)) == list(range(24))
    assert np.array_equal(read_all_frames(wrapped), read_all_frames(a))


def test_a_restart_into_a_part_without_b_frames_is_refused(tmp_path: Path) -> None:
    """Without B-frames each packet's decode timestamp is its presentation one: the second part's first frame shown
    before 24 frames decoded earlier, deeper than any decoder reorders, is the discontinuity."""
    second = _part(tmp_path / "p.ts", 24, bframes="bframes=0")
    with pytest.raises(VideoDecodeError, match="discontinuity"):
        probe(_joined(tmp_path, 0, second)[2])


def test_guessed_decode_timestamps_that_step_back_are_no_discontinuity(tmp_path: Path) -> None:
    """A stream whose PES carry only a PTS, with a B-pyramid: FFmpeg's guessed decode timestamps step back (a
    B-frame's own pts) within the stream's reorder. Was refused as a discontinuity; the reader had read it whole."""
    clip = _pts_only(_part(tmp_path / "a.ts", 0, 48, "bframes=3:b-pyramid=normal"), tmp_path / "pts_only.ts")
    assert read_ids(read_all_frames(clip)) == list(range(48))
    with VideoReader(clip) as r:
        assert [read_ids(r.read([i]))[0] for i in (40, 5, 17)] == [40, 5, 17]
