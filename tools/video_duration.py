"""The duration a video header states, and the check that the frames reach it (part of ``tools.video_scan``).

Matroska / WebM / FLV declare no frame count, so a file cut short is found by its header's duration running past
the frames' end: the last frame's time plus its own duration where the demuxer gives one (a Matroska block's; a
last frame held for a second was called truncated), else one frame (1 / fps). FLV gives its frames no duration: one
as long as the size its header states is whole, whatever its duration says (`tools.flv_meta`).
"""

from __future__ import annotations

from pathlib import Path

import av

from tools.flv_meta import whole_flv
from tools.mp4_boxes import fragmented_duration
from tools.video_errors import VideoDecodeError

Source = str | Path | bytes


# formats whose header states the video's duration and no frame count: Matroska / WebM (the track's DURATION
# tag, or the Segment duration) and FLV (onMetaData). A file cut short keeps its header; elsewhere the
# duration FFmpeg gives is estimated from the frames that are there (MPEG-TS / PS) or from the bit rate.
HEADER_DURATION = {"matroska", "webm", "flv"}


def header_duration(container: av.container.InputContainer, stream: av.video.stream.VideoStream,
                    src: Source | None = None) -> float | None:
    """Seconds of video the container's header states, when the header says it and it is the video's own
    (the track's Matroska DURATION tag; the whole file's duration only when the video is its only stream:
    a longer audio track sets that; so for a fragmented MP4's ``mehd`` box, read from ``src``). None otherwise."""
    formats = set(container.format.name.split(","))
    if "mov" in formats:
        return fragmented_duration(src) if src is not None and len(container.streams) == 1 else None
    if not HEADER_DURATION & formats:
        return None
    tag = stream.metadata.get("DURATION")
    if tag:
        try:
            hours, minutes, seconds = tag.split(":")
            return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        except ValueError:
            return None
    if len(container.streams) == 1 and container.duration:
        return container.duration / av.time_base
    return None


def check_duration(container: av.container.InputContainer, stream: av.video.stream.VideoStream, name: str,
                   start: float, times: tuple[float, ...] | float, fps: float, src: Source | None = None,
                   last_hold: float = 0.0) -> None:
    """Raise when the header's duration runs past the last frame's end (``times``: the frames' times, or the last
    one's) by more than `duration_slack`: the frames of a cut Matroska / WebM / FLV file, or of a fragmented MP4
    cut between two fragments, read as a shorter clip before."""
    claimed = header_duration(container, stream, src)
    if claimed is None:
        return
    if "flv" in container.format.name.split(",") and src is not None and whole_flv(src):
        return  # as long as its onMetaData's filesize: whole, its last frame held longer (tools.flv_meta)
    last = times[-1] if isinstance(times, tuple) else times
    end = start + last + max(1 / fps, last_hold)  # a last frame shown longer (its own duration, when known)
    if claimed - end > duration_slack(times, fps, claimed):
        says = "its 'mehd' box says the fragments last" if "mov" in container.format.name.split(",") else \
            "the video stream's header says"
        raise VideoDecodeError(f"{name}: truncated file: {says} {claimed:.2f} s, but its frames end at {end:.2f} s")


TIMESTAMP_SLACK_S = 0.005
"""Rounding between a header's duration and the frames' timestamps (Matroska and FLV count milliseconds)."""


def duration_slack(times: tuple[float, ...] | float, fps: float, claimed: float) -> float:
    """How far a complete clip's header duration may run past its last frame's end (start + last time + 1 / fps).

    With timestamps (``times`` a tuple) the last frame lasts at most the longest gap between frames (a variable-rate
    clip may hold it that long), so a complete file's header exceeds that end by at most that gap minus
    1 / fps; half a frame more, and rounding, is the slack: a cut file lacks at least one whole frame. (A fixed
    max(0.5 s, 5%) let a 2 s clip at 16 fps lose its last 8 frames unnoticed.) Without them (``times`` the
    last frame's estimated time, (frames - 1) / fps) the end is a guess: max(0.5 s, 5%) as before."""
    if not isinstance(times, tuple):
        return max(0.5, 0.05 * claimed)
    hold = max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)
    return max(0.0, hold - 1 / fps) + 0.5 / fps + TIMESTAMP_SLACK_S
