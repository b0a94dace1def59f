"""`VideoMeta.duration` is the video's own length: Matroska / WebM / FLV give FFmpeg no stream duration, and the
file's duration is the longest stream's end time, not the video's span."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_video import id_frames, write_raw
from tests.test_video_truncation import _write
from tools.video import probe, read_all_frames


@pytest.mark.parametrize("name", ["a.mkv", "a.flv"])
def test_a_longer_audio_track_is_not_the_videos_duration(tmp_path: Path, name: str) -> None:
    """16 frames at 16 fps beside 3 s of audio: probed as a 3 s video (the audio's end)."""
    meta = probe(_write(tmp_path / name, 16, audio_s=3.0))
    assert meta.frames == 16
    assert meta.duration == pytest.approx(1.0, abs=0.07)


def test_timestamps_that_start_late_do_not_lengthen_the_video(tmp_path: Path) -> None:
    """50 frames at 16 fps whose timestamps start at 5 s (a stream copy cut from a longer recording): Matroska's
    duration is the last frame's end time, and the clip probed as 8.1 s long."""
    n = 50
    path = write_raw(tmp_path / "late.mkv", id_frames(n), pts_ms=[5000 + 62 * i for i in range(n)])
    meta = probe(path)
    assert meta.frames == n and read_all_frames(path).shape[0] == n
    assert meta.duration == pytest.approx(n * 0.062, abs=0.07)
    assert meta.times is not None and meta.times[0] == 0.0 and meta.times[-1] == pytest.approx(49 * 0.062)


def test_the_duration_of_a_clip_starting_at_zero_is_unchanged(tmp_path: Path) -> None:
    meta = probe(_write(tmp_path / "b.mkv", 32))
    assert meta.duration == pytest.approx(2.0, abs=0.01)




@pytest.mark.parametrize("index", [-1, 5, 99])
def test_time_of_an_index_outside_the_clip_is_an_error(tmp_path, index):
    """With timestamps, time_of(-1) gave the last frame's time (a label "frame -1 of 5, t=0.25s") and time_of(5)
    an IndexError naming nothing; without them, index / fps: a time for a frame the clip does not have."""
    from tools.video import FrameIndexError, probe, write_video
    from tools.video_scan import VideoMeta

    meta = probe(write_video(tmp_path / "c.mp4", id_frames(5)))
    untimed = VideoMeta(source="u.mp4", frames=5, fps=16.0, width=16, height=16, duration=5 / 16)
    for m in (meta, untimed):
        assert m.time_of(4) == pytest.approx(4 / 16)
        with pytest.raises(FrameIndexError, match=rf"{m.source}: frame index {index} is out of range"):
            m.time_of(index)
        with pytest.raises(FrameIndexError):
            m.label(index)


@pytest.mark.parametrize("codec", ["mpeg2video", "libx264"])
def test_an_mpeg_ps_clip_without_usable_timestamps_lasts_its_frames(tmp_path, codec):
    """MPEG-PS (.mpg) leaves timestamps off some packets, so the scan has none to span; its duration then came from
    FFmpeg's bit-rate estimate: 17 frames at 16 fps lasted 0.06 s (x264: 0.03 s), 48 frames 2.16 s."""
    from tools.video import write_video

    for n in (17, 48):
        meta = probe(write_video(tmp_path / f"c{n}.mpg", id_frames(n), codec=codec, gop=4))
        assert meta.frames == n and meta.fps == pytest.approx(16.0)
        assert meta.duration == pytest.approx(n / 16, rel=0.02)
