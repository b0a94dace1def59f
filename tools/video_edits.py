"""Frames an MP4 / MOV edit list keeps (``edts/elst``), for the scan's truncation check.

The container's declared frame count (the sample table's, FFmpeg's ``nb_frames``) counts every sample
in the file. An edit list that starts after the first frame or ends before the last (a trimmed clip:
editors and ``-ss`` / ``-t`` stream copies write one) makes FFmpeg drop the samples outside it, so a
complete file demuxes fewer packets than it declares. ``kept_frames`` counts the samples whose
presentation time (``stts`` durations plus ``ctts`` offsets) lies inside the edits: a complete file
demuxes at least that many (FFmpeg also keeps, marked discard, the frames a kept one needs to decode).

Decisions where the issue was silent:
- An edit list that keeps every sample (x264's usual one, which only moves the first frame to 0) changes
  nothing: the declared count stands, and a cut file is still reported.
- An edit with a rate other than 1 (a dwell or a slow-motion edit) is not modelled: it keeps an unknown
  number of frames, given as 0 (no check), never a reason to reject a file.
- No ``moov``, no edit list, or an unreadable box gives None: the declared count stands, as before. Except a read
  the machine failed (``tools.video_errors.machine_failed``: EIO, too many open files): that OSError escapes to the
  reader, which names the clip and leaves it to be retried, as ``tools.video_rotation`` does. Read as "no edit list",
  a clip trimmed by an edit list (``ffmpeg -ss ... -c copy``) was a final "truncated file", and one with a pause in
  its edit list passed, its first frames shown again.
- Overlapping edits (a replay) are counted once per edit, as FFmpeg and the spec show them. An empty edit
  after media is one FFmpeg gets wrong (``late_empty_edit``): the scan refuses the file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from tools.mp4_boxes import child_boxes, read_moov
from tools.video_errors import machine_failed

T = TypeVar("T")


def _child(body: memoryview, kind: bytes) -> memoryview:
    for child, payload in child_boxes(body):
        if child == kind:
            return payload
    raise ValueError(f"no {kind!r} box")


def _entries(box: memoryview, fmt: str) -> list[tuple[int, ...]]:
    """The entries of a full box whose payload is a 32-bit count then fixed-size entries."""
    count = struct.unpack_from(">I", box, 4)[0]
    size = struct.calcsize(fmt)
    if 8 + count * size > len(box):
        raise ValueError("box shorter than its entry count")
    return [struct.unpack_from(fmt, box, 8 + k * size) for k in range(count)]


def _video_track(moov: memoryview, track_id: int | None) -> memoryview | None:
    """The ``trak`` of video track ``track_id`` (PyAV's ``stream.id``), else of the first video track."""
    video = []
    for kind, trak in child_boxes(moov):
        if kind != b"trak":
            continue
        tkhd = _child(trak, b"tkhd")
        tid = struct.unpack_from(">I", tkhd, 20 if tkhd[0] == 1 else 12)[0]
        if bytes(_child(_child(trak, b"mdia"), b"hdlr")[8:12]) == b"vide":
            video.append((tid, trak))
    chosen = [t for t in video if t[0] == track_id] or video
    return chosen[0][1] if chosen else None


def _sample_count(stbl: memoryview) -> int:
    """The track's number of samples, from its ``stsz`` (or ``stz2``) box: FFmpeg's declared frame count."""
    box = next((body for kind, body in child_boxes(stbl) if kind in (b"stsz", b"stz2")), None)
    if box is None or len(box) < 12:
        raise ValueError("no sample size box")
    return struct.unpack_from(">I", box, 8)[0]


def _capped(counts: np.ndarray, total: int) -> np.ndarray:
    """Run lengths cut to add up to at most ``total`` samples (FFmpeg reads no run past the track's samples)."""
    ends = np.minimum(np.cumsum(np.maximum(counts, 0)), total)
    return np.diff(ends, prepend=0)


def _presentation_times(stbl: memoryview) -> np.ndarray:
    """Composition time of every sample, in the media's timescale. Run lengths past the track's sample count (a
    corrupt ``stts`` / ``ctts`` count up to 2**32 - 1) are cut there: expanded whole, one corrupt count asked numpy
    for tens of GB (a MemoryError escaping the reader, or swap and the OOM killer for a few GB)."""
    samples = _sample_count(stbl)
    stts = np.array(_entries(_child(stbl, b"stts"), ">II"), dtype=np.int64).reshape(-1, 2)
    durations = np.repeat(stts[:, 1], _capped(stts[:, 0], samples))
    pts = np.cumsum(durations) - durations
    ctts = next((body for kind, body in child_boxes(stbl) if kind == b"ctts"), None)
    if ctts is not None:  # offsets are signed in version 1 and read signed by FFmpeg in both
        runs = np.array(_entries(ctts, ">Ii"), dtype=np.int64).reshape(-1, 2)
        offsets = np.repeat(runs[:, 1], _capped(runs[:, 0], len(pts)))
        pts[: len(offsets)] += offsets
    return pts


def _edit_list(moov: memoryview, track_id: int | None) -> tuple[memoryview, list[tuple[int, ...]]] | None:
    """(the ``trak``, its edits: segment duration, media time, rate, rate fraction); None without an edit list."""
    trak = _video_track(moov, track_id)
    edts = next((body for kind, body in child_boxes(trak) if kind == b"edts"), None) if trak is not None else None
    if trak is None or edts is None:
        return None
    elst = _child(edts, b"elst")
    return trak, _entries(elst, ">Qqhh" if elst[0] == 1 else ">Iihh")


def _kept(moov: memoryview, track_id: int | None) -> int | None:
    found = _edit_list(moov, track_id)
    if found is None:
        return None
    trak, edits = found
    mvhd = _child(moov, b"mvhd")
    movie_scale = struct.unpack_from(">I", mvhd, 20 if mvhd[0] == 1 else 12)[0]
    mdia = _child(trak, b"mdia")
    mdhd = _child(mdia, b"mdhd")
    media_scale = struct.unpack_from(">I", mdhd, 20 if mdhd[0] == 1 else 12)[0]
    if not movie_scale or not media_scale:
        return None
    pts = _presentation_times(_child(_child(mdia, b"minf"), b"stbl"))
    kept = 0
    for duration, media_time, rate, fraction in edits:
        if media_time == -1:  # an empty edit: a delay before the next one, no samples
            continue
        if (rate, fraction) != (1, 0):
            return 0
        # the segment's length is in the movie's timescale; rounded down, a frame starting at its end is out
        end = media_time + duration * media_scale // movie_scale if duration else np.iinfo(np.int64).max
        kept += int(np.count_nonzero((pts >= media_time) & (pts < end)))
    return kept


def _from_moov(src: str | Path | bytes | bytearray | memoryview, read: Callable[[memoryview], T]) -> T | None:
    """``read`` of the file's ``moov`` box; None without one or where it cannot be read, except a read the machine
    failed (``machine_failed``: its OSError escapes, module docstring)."""
    try:
        moov = read_moov(src)
        return read(moov) if moov is not None else None
    except OSError as exc:
        if machine_failed(exc):
            raise
        return None
    except (struct.error, ValueError):
        return None


def kept_frames(src: str | Path | bytes | bytearray | memoryview, track_id: int | None = None) -> int | None:
    """Samples of video track ``track_id`` (else the first video track) inside its edit list; None when
    the track has no edit list or it cannot be read."""
    return _from_moov(src, lambda moov: _kept(moov, track_id))


def late_empty_edit(src: str | Path | bytes | bytearray | memoryview,
                    track_id: int | None = None) -> tuple[int, int] | None:
    """(1-based entry, number of entries) of the first empty edit (media time -1, a duration) of video track
    ``track_id``'s edit list that comes after an edit showing media; None when there is none or the list cannot
    be read.

    The spec shows nothing for an empty edit (a pause, or an empty tail). FFmpeg handles one only before the
    media (a delay): after media it shows the samples from media time 0 in its place, so the clip's first
    frames come back in the middle or at the end (a 40-frame clip with a 0.5 s pause read as 46 frames). The
    scan refuses such a file by name rather than return those frames as the clip's."""
    found = _from_moov(src, lambda moov: _edit_list(moov, track_id))
    if found is None:
        return None
    edits, media = found[1], False
    for k, (duration, media_time, _, _) in enumerate(edits):
        if media_time == -1 and duration and media:
            return k + 1, len(edits)
        media = media or media_time != -1
    return None
