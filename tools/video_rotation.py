"""Display rotation of MP4 / MOV video tracks, read from the track header (``tkhd``) matrix.

Phones store a portrait video as landscape frames plus a rotation in the track's display matrix;
players, the ``ffmpeg`` command line and OpenCV's ``VideoCapture`` show it upright. PyAV exposes the
matrix only on decoded frames (``VideoFrame.rotation``), and the reader's scan decodes nothing, so
this module reads it from the file: the top-level boxes up to ``moov``, then each ``trak``'s ``tkhd``
(track id, matrix) and ``mdia/hdlr`` (handler type), and the movie header's (``mvhd``) matrix, which FFmpeg
multiplies into every track's (a clip turned there alone was read sideways). Only the ``moov`` box is read
into memory.

Decisions where the issue was silent:
- The angle follows FFmpeg's ``av_display_rotation_get`` (and PyAV's ``VideoFrame.rotation``):
  degrees counterclockwise, here normalised to 0, 90, 180 or 270; ``numpy.rot90(frame, angle // 90)``
  shows the frame upright.
- Only whole quarter turns are applied. A matrix that mirrors, scales unevenly or turns by another
  angle gives 0 (frames as stored): rare in practice, and guessing would be worse.
- Anything unreadable (no ``moov``, a truncated or odd box) gives 0: the reader decodes and reports
  errors as before; the rotation is a presentation detail, never a reason to reject a file. Except a read the
  machine failed (``tools.video_errors.machine_failed``: EIO, too many open files, out of memory): that error
  escapes to the reader, which names the clip and leaves it to be retried; read as "no rotation", a phone clip's
  frames came back sideways and were judged as if whole.
- Matroska / WebM store the rotation as the track's ``ProjectionPoseRoll`` (FFmpeg reads it into the
  same display matrix and writes it from one, e.g. PyAV's ``set_display_rotation``; a "rotate" tag is
  not rotation to FFmpeg, players or this reader). PyAV exposes that matrix only on decoded frames, so
  ``decoded_rotation`` decodes the first frame (one frame, Matroska / WebM only) and applies the rules
  above to its matrix; frames were returned sideways before, where ``ffmpeg`` shows them upright.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import av
import numpy as np

from tools.mp4_boxes import child_boxes, read_moov
from tools.video_errors import machine_failed, read_failed_by_machine
from tools.video_scan import Source, open_container, video_stream


def quarter_turns(matrix: tuple[int, ...]) -> int:
    """Rotation (0, 90, 180, 270 degrees counterclockwise) of a ``tkhd`` matrix ``(a, b, u, c, d, v, x, y, w)``
    (a..d in 16.16 fixed point), or 0 when it is not a pure quarter turn."""
    a, b, c, d = (v / 65536.0 for v in (matrix[0], matrix[1], matrix[3], matrix[4]))
    sx, sy = math.hypot(a, c), math.hypot(b, d)
    if sx == 0 or sy == 0 or a * d - b * c <= 0:  # degenerate or mirrored
        return 0
    angle = -math.degrees(math.atan2(b / sy, a / sx))  # av_display_rotation_get
    turns = round(angle / 90.0)
    if abs(angle - 90.0 * turns) > 1.0:
        return 0
    return (turns * 90) % 360


def _tracks(moov: memoryview) -> list[tuple[int, bytes, tuple[int, ...]]]:
    """(track id, handler type, matrix) of every ``trak`` with a readable ``tkhd``."""
    found = []
    for kind, trak in child_boxes(moov):
        if kind != b"trak":
            continue
        track_id, matrix, handler = None, None, b""
        for child, body in child_boxes(trak):
            if child == b"tkhd" and len(body) >= 4:
                version = body[0]
                id_at, matrix_at = (20, 52) if version == 1 else (12, 40)
                if len(body) >= matrix_at + 36:
                    track_id = struct.unpack_from(">I", body, id_at)[0]
                    matrix = struct.unpack_from(">9i", body, matrix_at)
            elif child == b"mdia":
                for grandchild, hdlr in child_boxes(body):
                    if grandchild == b"hdlr" and len(hdlr) >= 12:
                        handler = bytes(hdlr[8:12])
        if track_id is not None and matrix is not None:
            found.append((track_id, handler, matrix))
    return found


def _movie_matrix(moov: memoryview) -> tuple[int, ...] | None:
    """The display matrix of the movie header (``mvhd``), or None when it has none readable."""
    for kind, body in child_boxes(moov):
        if kind == b"mvhd" and len(body) >= 4:
            at = 48 if body[0] == 1 else 36  # after the times, timescale, duration, rate, volume and reserved
            return struct.unpack_from(">9i", body, at) if len(body) >= at + 36 else None
    return None


def compose(track: tuple[int, ...], movie: tuple[int, ...]) -> tuple[int, ...]:
    """The matrix FFmpeg displays a track with: its ``tkhd`` matrix times the movie header's (``track @ movie``,
    as ``mov_read_tkhd``), both ``(a, b, u, c, d, v, x, y, w)`` with u, v, w in 2.30 fixed point and the rest
    in 16.16; the result in the same form."""
    scale = [1 << 16, 1 << 16, 1 << 30] * 3
    a = np.array([v / s for v, s in zip(track, scale, strict=True)]).reshape(3, 3)
    b = np.array([v / s for v, s in zip(movie, scale, strict=True)]).reshape(3, 3)
    return tuple(round(v * s) for v, s in zip((a @ b).ravel(), scale, strict=True))


def display_rotation(src: str | Path | bytes | bytearray | memoryview, track_id: int | None = None) -> int:
    """Rotation (0, 90, 180, 270 degrees counterclockwise) of the video track ``track_id`` (PyAV's
    ``stream.id`` for MP4 / MOV), or of the first video track, with the movie header's matrix applied as
    FFmpeg applies it; 0 when there is none or it cannot be read, unless the machine failed the read
    (``machine_failed``: the OSError escapes, since frames left turned would be judged as if whole)."""
    try:
        moov = read_moov(src)
        if moov is None:
            return 0
        tracks, movie = _tracks(moov), _movie_matrix(moov)
    except OSError as exc:
        if machine_failed(exc):
            raise
        return 0
    except (struct.error, ValueError):
        return 0
    video = [t for t in tracks if t[1] == b"vide"]
    chosen = [t for t in video if t[0] == track_id] or video
    if not chosen:
        return 0
    return quarter_turns(compose(chosen[0][2], movie) if movie is not None else chosen[0][2])


def decoded_rotation(container: av.container.InputContainer, index: int | None = None,
                     src: str | Path | bytes | bytearray | memoryview | None = None) -> int:
    """Rotation (as ``quarter_turns``) of the display matrix on the first frame the stream at ``index`` (None: the
    first video stream) of ``container`` (freshly opened from ``src``; closed here) decodes; 0 when there is none or
    decoding fails, unless the machine failed it (``read_failed_by_machine``: not FFmpeg's EIO on data ``src``
    holds): that error escapes, as in `display_rotation`."""
    try:
        with container:
            stream = container.streams.video[0] if index is None else container.streams[index]
            frame = next(container.decode(stream), None)
            # the side data by its type's name: iterating Frame.side_data gave SideData up to PyAV 18.1.0 and gives
            # their types (a Mapping's keys) from 18.1.1; `get` by name answers the same in both
            found = frame.side_data.get("DISPLAYMATRIX") if isinstance(frame, av.VideoFrame) else None
            matrix = bytes(found) if found is not None else b""  # type: ignore[call-overload]  # (stub: object)
    except (av.error.FFmpegError, OSError, EOFError, ValueError, IndexError) as exc:
        if read_failed_by_machine(exc, src):
            raise
        return 0
    return quarter_turns(struct.unpack("=9i", matrix[:36])) if len(matrix) >= 36 else 0


def clip_rotation(src: Source, name: str, container: av.container.InputContainer) -> int:
    """Rotation of the clip's video stream (``video_stream``) in ``container``, opened from ``src``: an MP4 / MOV
    track's display matrix (phones store portrait clips turned), a Matroska / WebM one's on its first decoded frame
    (one frame's decode, on a demuxer of its own); 0 in other formats. An OSError reading the file escapes."""
    formats = set(container.format.name.split(","))
    if "mov" in formats:
        return display_rotation(src, video_stream(container, name).id)
    if formats & {"matroska", "webm"}:
        return decoded_rotation(open_container(src, name), video_stream(container, name).index, src)
    return 0
