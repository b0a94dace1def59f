"""``write_video`` pads sizes by the pixel format's chroma subsampling, at any bit depth or plane layout."""

from __future__ import annotations

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids
from tools.video import probe, read_frames, write_video
from tools.video_write import chroma_steps


def test_chroma_steps_come_from_the_format():
    assert chroma_steps("yuv420p") == chroma_steps("p010le") == chroma_steps("yuv420p10le") == (2, 2)
    assert chroma_steps("yuv422p10le") == chroma_steps("nv16") == (1, 2)
    assert chroma_steps("yuv411p") == (1, 4)
    assert chroma_steps("yuv444p") == chroma_steps("gray10le") == chroma_steps("rgb24") == (1, 1)


@pytest.mark.parametrize(("pix_fmt", "size"), [("yuv420p10le", (98, 62)), ("yuv422p10le", (98, 61)),
                                               ("nv16", (98, 61)), ("nv12", (98, 62))])
def test_odd_sizes_are_padded_for_every_subsampled_format(tmp_path, pix_fmt, size):
    """Only 8-bit yuv420p / yuv422p / nv12 / nv21 were padded: a 97x61 clip in yuv420p10le, yuv422p10le or
    nv16 failed in libx264's avcodec_open2 (EINVAL)."""
    path = write_video(tmp_path / f"{pix_fmt}.mkv", id_frames(4, h=61, w=97), pix_fmt=pix_fmt)
    meta = probe(path)
    assert (meta.width, meta.height) == size
    assert read_ids(read_frames(path, [3, 0])[:, :61, :97]) == [3, 0]


def test_a_format_the_encoder_does_not_take_is_named(tmp_path):
    with pytest.raises(ValueError, match="libx264 does not encode p010le; it takes yuv420p"):
        write_video(tmp_path / "p.mp4", id_frames(2), pix_fmt="p010le")


@pytest.mark.parametrize("codec", ["aac", "mov_text"])
def test_a_codec_that_is_no_video_encoder_is_named(tmp_path, codec):
    """An audio or subtitle encoder was opened as the clip's stream: a TypeError about an audio stream's rate
    (aac), or an AttributeError setting a subtitle stream's width, and no word that the codec was wrong."""
    path = tmp_path / "a.mp4"
    with pytest.raises(ValueError, match=f"{codec} is not a video encoder"):
        write_video(path, id_frames(2), codec=codec)
    assert not path.exists()


@pytest.mark.parametrize("shape", [(0, 8, 8, 3), (2, 0, 8, 3), (2, 8, 0)])
def test_no_frames_or_no_pixels_are_refused(tmp_path, shape):
    """0 frames returned the path of a file never written (PyAV writes nothing without a packet: the caller
    met FileNotFoundError later); a frame of 0 rows raised IndexError from PyAV."""
    path = tmp_path / "e.mp4"
    with pytest.raises(ValueError, match=r"write_video needs at least one frame of at least 1x1 pixels"):
        write_video(path, np.zeros(shape, np.uint8))
    assert not path.exists()


@pytest.mark.parametrize("fps", [float("inf"), 1e-4])
def test_a_rate_that_cannot_be_stored_is_refused(tmp_path, fps):
    """inf raised OverflowError from Fraction; 1e-4 fps became the rate 0 (nearest fraction with a denominator
    up to 1001), which libx264 replaced by 24 fps: a clip written at the wrong rate, no error."""
    with pytest.raises(ValueError, match=r"fps must be above 1/2002 and below 2\*\*31"):
        write_video(tmp_path / "r.mp4", id_frames(2), fps=fps)


@pytest.mark.parametrize("fps", [np.float32(12.5), np.float16(15), np.int64(24)])
def test_a_numpy_rate_is_a_rate(tmp_path, fps):
    """Was: TypeError "argument should be a string or a Rational instance" from Fraction(np.float32(12.5)) (a rate
    read from a float32 array)."""
    meta = probe(write_video(tmp_path / "np.mp4", id_frames(4), fps=fps))
    assert meta.fps == pytest.approx(float(fps))


@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch, existing):
    """An error mid-encode (disk full, an interrupt; here a frame conversion) left a half-written clip at the path,
    replacing any clip already there: a cache keyed on the path then served a file without its index (MP4's moov
    comes last), and the earlier good clip was lost. The clip is written beside the path and moved in at the end."""
    path = tmp_path / "c.mp4"
    if existing:
        write_video(path, id_frames(3), codec="mpeg4")
    before = path.read_bytes() if existing else None
    real, calls = av.VideoFrame.from_ndarray, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(av.VideoFrame, "from_ndarray", failing)
    with pytest.raises(OSError, match="No space left"):
        write_video(path, id_frames(6), codec="mpeg4", gop=1)
    assert len(calls) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == (["c.mp4"] if existing else [])
    if existing:
        assert path.read_bytes() == before


def test_a_written_clip_keeps_its_name_and_reads_back(tmp_path):
    path = write_video(tmp_path / "sub" / "ok.mkv", id_frames(5), fps=12.5)
    assert path == tmp_path / "sub" / "ok.mkv" and sorted(p.name for p in path.parent.iterdir()) == ["ok.mkv"]
    meta = probe(path)
    assert (meta.frames, meta.fps) == (5, 12.5) and read_ids(read_frames(path, range(5))) == list(range(5))


def test_a_clip_is_written_through_a_symlink_and_keeps_the_replaced_files_mode(tmp_path):
    """The move into place replaced a symlink at the path with the clip (its target, e.g. a run's clip behind a
    'latest.mp4' link, kept the old one), and a clip replacing a file had the umask's bits, not that file's (a
    group-writable clip became unwritable for the group), unlike writing into the file with open()."""
    import os

    target = tmp_path / "runs" / "a.mp4"
    write_video(target, id_frames(2), codec="mpeg4")
    os.chmod(target, 0o664)
    link = tmp_path / "latest.mp4"
    link.symlink_to(target)
    assert write_video(link, id_frames(5), codec="mpeg4") == link
    assert link.is_symlink() and probe(target).frames == 5
    assert oct(target.stat().st_mode & 0o777) == oct(0o664)
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.mp4"]
    fresh = write_video(tmp_path / "new.mp4", id_frames(2), codec="mpeg4")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask
