"""Display rotation of MP4 / MOV tracks (phone clips): the tkhd parser against PyAV's decoded-frame
rotation, and the reader's upright frames against OpenCV's auto-oriented VideoCapture."""

from __future__ import annotations

import struct
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from tools.video import VideoReader, probe, read_all_frames, read_frames
from tools.video_rotation import display_rotation, quarter_turns


def marked(n: int = 6, h: int = 48, w: int = 64) -> np.ndarray:
    """Frames with a white block in the top-left corner and the frame index as a grey level below it."""
    frames = np.zeros((n, h, w, 3), np.uint8)
    frames[:, :12, :16] = 255
    for t in range(n):
        frames[t, 30:, 40:] = 40 * t
    return frames


def write_turned(path: Path, frames: np.ndarray, degrees: int | None, *, hflip: bool = False) -> Path:
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=8)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv444p"
        s.options = {"crf": "0"}
        if degrees is not None:
            s.set_display_rotation(degrees, hflip=hflip)
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def pyav_rotation(path: Path) -> int:
    with av.open(str(path)) as c:
        return int(next(c.decode(c.streams.video[0])).rotation) % 360


@pytest.mark.parametrize("degrees", [0, 90, 180, 270, -90])
@pytest.mark.parametrize("suffix", [".mp4", ".mov"])
def test_parser_agrees_with_pyav_decoded_frames(tmp_path, degrees, suffix):
    path = write_turned(tmp_path / f"r{suffix}", marked(3), degrees)
    assert display_rotation(path) == pyav_rotation(path) == degrees % 360
    assert display_rotation(path.read_bytes()) == degrees % 360
    with av.open(str(path)) as c:
        assert display_rotation(path, c.streams.video[0].id) == degrees % 360


def test_quarter_turns_of_hand_written_matrices():
    one = 1 << 16
    assert quarter_turns((one, 0, 0, 0, one, 0, 0, 0, 1 << 30)) == 0
    assert quarter_turns((0, one, 0, -one, 0, 0, 0, 0, 1 << 30)) == 270  # FFmpeg: -90, "rotate=90"
    assert quarter_turns((0, -one, 0, one, 0, 0, 0, 0, 1 << 30)) == 90
    assert quarter_turns((-one, 0, 0, 0, -one, 0, 0, 0, 1 << 30)) == 180
    assert quarter_turns((-one, 0, 0, 0, one, 0, 0, 0, 1 << 30)) == 0  # mirrored: left as stored
    c45 = round(one * 0.7071)
    assert quarter_turns((c45, c45, 0, -c45, c45, 0, 0, 0, 1 << 30)) == 0  # 45 degrees: not a quarter turn


def test_unreadable_or_foreign_files_have_no_rotation(tmp_path):
    assert display_rotation(b"") == 0 and display_rotation(b"\x00\x00\x00\x08moov") == 0
    (tmp_path / "junk.mp4").write_bytes(b"\x00\x00\x00\x10ftypisom" + b"\xff" * 40)
    assert display_rotation(tmp_path / "junk.mp4") == 0
    assert display_rotation(tmp_path / "missing.mp4") == 0
    truncated = write_turned(tmp_path / "t.mp4", marked(3), 90).read_bytes()
    moov = truncated.find(b"moov") - 4
    assert display_rotation(truncated[:moov + 40]) == 0  # moov cut short


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_reader_returns_upright_frames_like_opencv(tmp_path, degrees):
    frames = marked()
    path = write_turned(tmp_path / "phone.mp4", frames, degrees)
    meta = probe(path)
    upright = np.rot90(frames, degrees // 90, axes=(1, 2))
    assert (meta.width, meta.height, meta.rotation) == (upright.shape[2], upright.shape[1], degrees)
    got = read_frames(path, [5, 0, 3])
    assert got.shape == (3, *upright.shape[1:]) and np.abs(got.astype(int) - upright[[5, 0, 3]]).max() <= 3
    assert np.array_equal(read_all_frames(path)[[5, 0, 3]], got)
    cap = cv2.VideoCapture(str(path))  # OpenCV orients by the display matrix by default
    ok, first = cap.read()
    cap.release()
    assert ok and np.abs(cv2.cvtColor(first, cv2.COLOR_BGR2RGB).astype(int) - got[1]).max() <= 3
    with VideoReader(path) as reader:  # sizes are upright too: (width, height) of the turned frames
        half = (upright.shape[2] // 2, upright.shape[1] // 2)
        small = reader.read([0], size=half)
        assert small.shape == (1, half[1], half[0], 3)
        ref = cv2.resize(np.ascontiguousarray(upright[0]), half, interpolation=cv2.INTER_AREA)
        assert np.abs(small[0].astype(int) - ref).mean() < 3  # the same picture, turned, then halved
        assert [f.flags["C_CONTIGUOUS"] for f in reader.read_list([1, 2])] == [True, True]


def test_mirrored_and_unrotated_clips_are_returned_as_stored(tmp_path):
    frames = marked()
    for path in (write_turned(tmp_path / "plain.mp4", frames, None),
                 write_turned(tmp_path / "mirror.mp4", frames, 0, hflip=True)):
        meta = probe(path)
        assert (meta.width, meta.height, meta.rotation) == (64, 48, 0)
        assert np.abs(read_frames(path, [2]).astype(int) - frames[2]).max() <= 3


def test_a_rotated_clip_in_bytes_reads_the_same(tmp_path):
    path = write_turned(tmp_path / "phone.mov", marked(), 90)
    assert np.array_equal(read_frames(path.read_bytes(), [1, 4]), read_frames(path, [1, 4]))


def test_box_headers_with_64_bit_sizes(tmp_path):
    data = write_turned(tmp_path / "phone.mp4", marked(3), 270).read_bytes()
    # rewrite the leading ftyp box with a 64-bit "largesize" header: size field 1, then the real size
    size, kind = struct.unpack_from(">I4s", data, 0)
    large = struct.pack(">I4sQ", 1, kind, size + 8) + data[8:size] + data[size:]
    (tmp_path / "large.mp4").write_bytes(large)
    assert display_rotation(tmp_path / "large.mp4") == 270 == display_rotation(large)


@pytest.mark.parametrize("suffix", [".mkv", ".webm"])
def test_matroska_rotation_is_applied(tmp_path, suffix):
    """Matroska / WebM keep the display matrix as the track's ProjectionPoseRoll (FFmpeg writes and reads it;
    PyAV shows it on decoded frames): the reader read rotation only from MP4 / MOV and gave these sideways."""
    frames = marked()
    path = tmp_path / f"turned{suffix}"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libvpx" if suffix == ".webm" else "libx264", rate=8)
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        s.options = {"deadline": "realtime", "cpu-used": "8", "b": "2M"} if suffix == ".webm" else {"crf": "0"}
        s.set_display_rotation(90)
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    assert pyav_rotation(path) == 90
    upright = np.rot90(frames, 1, axes=(1, 2))
    for src in (path, path.read_bytes()):
        meta = probe(src)
        assert (meta.width, meta.height, meta.rotation) == (48, 64, 90)
        got = read_frames(src, [5, 0])
        assert got.shape == (2, 64, 48, 3) and np.abs(got.astype(int) - upright[[5, 0]]).mean() < 8
    mirror = tmp_path / "mirror.mkv"
    write_turned(mirror, frames, 90, hflip=True)
    assert probe(mirror).rotation == 0  # mirrored: as stored, as for MP4


def _with_movie_matrix(data: bytes, matrix: tuple[int, ...]) -> bytes:
    """`data` (an MP4 whose mvhd is version 0) with the movie header's display matrix set to `matrix`."""
    out = bytearray(data)
    at = out.find(b"mvhd") + 4
    assert out[at] == 0
    struct.pack_into(">9i", out, at + 36, *matrix)
    return bytes(out)


@pytest.mark.parametrize(("track", "expected"), [(None, 270), (90, 0), (180, 90)])
def test_the_movie_header_matrix_turns_every_track(tmp_path, track, expected):
    """FFmpeg (PyAV's frame.rotation, players) multiplies each track's matrix by the movie header's (mvhd):
    a clip turned there alone was read sideways (rotation 0), and a track turn it undoes was applied."""
    one = 1 << 16
    turned = (0, one, 0, -one, 0, 0, 0, 0, 1 << 30)  # 270 degrees (FFmpeg: -90)
    path = tmp_path / "movie.mp4"
    path.write_bytes(_with_movie_matrix(write_turned(tmp_path / "t.mp4", marked(), track).read_bytes(), turned))
    assert pyav_rotation(path) == expected
    assert display_rotation(path) == display_rotation(path.read_bytes()) == expected
    meta = probe(path)
    upright = np.rot90(marked(), expected // 90, axes=(1, 2))
    assert (meta.width, meta.height, meta.rotation) == (upright.shape[2], upright.shape[1], expected)
    assert np.abs(read_frames(path, [4]).astype(int) - upright[4]).max() <= 3
