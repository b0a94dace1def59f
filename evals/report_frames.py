"""Frames of one run's clip for its HTML report (`evals.report`): decoded once, only those the page shows.

Decision where the issue was silent: at most `MAX_DECODED` frames are decoded per page (the sample, the
frames judgments, tool calls, motion evidence, extra tools and the final check cite, the first and last frames
of the observed events, the frames repairs re-viewed, and the frames of each track the page redraws: every frame
`evals.report_frame_section` gives a figure; the event frames were left out, so their links led to a figure
without a picture); a clip that cannot be decoded any more yields an empty store with the reason,
and the page still renders its text parts.

Frames are decoded at most `DECODE_LONG_SIDE` pixels on their long side (smaller clips at their own size):
the page shows them at 96 to `evals.report.WIDE_SIDE` (384) pixels, and twice that keeps a crop of half the
frame at full detail. Decoded at the clip's size, the 400 frames of a 1080p clip took 2.5 GB (a 4K clip
10 GB); at this bound they take at most 400 x 1.7 MB. A crop of a smaller part of a larger clip shows fewer
source pixels than the agent saw, and overlay tracks are computed again on the decoded frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graph.nodes.tracking import track_frames

MAX_DECODED = 400
DECODE_LONG_SIDE = 768
THUMB_SIDE = 256


@dataclass
class FrameStore:
    """Decoded frames of one clip (only the indices a report needs)."""

    frames: dict[int, np.ndarray] = field(default_factory=dict)
    """Frame index -> RGB uint8 [H,W,3]."""
    total: int = 0
    """Frames in the clip."""
    fps: float = 0.0
    """Frames per second."""
    error: str | None = None
    """Why frames are missing (decode failure), if they are."""
    times: tuple[float, ...] | None = None
    """Each frame's time in seconds (`VideoMeta.times`; None: index / fps)."""

    def url(self, index: int, long_side: int = THUMB_SIDE, box: Any = None) -> str | None:
        """JPEG data URL of one frame (optionally cropped to a normalised box), or None when absent."""
        from tools.video import crop_frame, encode_jpeg_data_url, normalize_crop, resize_long_side

        frame = self.frames.get(int(index))
        if frame is None:
            return None
        if box is not None:
            frame = crop_frame(frame, normalize_crop(box).box)
        return encode_jpeg_data_url(resize_long_side(frame, long_side), 80)

    def label(self, index: int) -> str:
        from tools.video import frame_label

        if not self.total:
            return f"frame {index}"
        t = self.times[int(index)] if self.times is not None and 0 <= int(index) < len(self.times) else None
        return frame_label(int(index), self.total, self.fps, t)


def load_frames(video: str | None, indices: Any, stamp: Any = None) -> FrameStore:
    """Decode the wanted frames of `video` (at most MAX_DECODED); never raises for a bad clip. `stamp`: the file
    the run judged (`graph.clip_stamp`, the run's `meta["file"]`): none are shown when the file is another now."""
    from graph.clip_stamp import clip_change
    from tools.video import VideoReader

    if not video:
        return FrameStore(error="the run has no video path")
    if (changed := clip_change(video, stamp)) is not None:  # another clip's frames are no evidence of this run
        return FrameStore(error=f"frames not shown: {changed}")
    try:
        with VideoReader(video) as reader:
            meta = reader.meta
            wanted = sorted({int(i) for i in indices if 0 <= int(i) < meta.frames})[:MAX_DECODED]
            size = decode_size(meta.width, meta.height, DECODE_LONG_SIDE)
            arr = reader.read(wanted, size=size) if wanted else np.zeros((0, 1, 1, 3), np.uint8)
        return FrameStore(dict(zip(wanted, arr, strict=True)), meta.frames, meta.fps, times=meta.times)
    except Exception as exc:  # noqa: BLE001 - the report still renders its text parts
        return FrameStore(error=f"frames unavailable: {type(exc).__name__}: {exc}")


def decode_size(width: int, height: int, long_side: int) -> tuple[int, int]:
    """(width, height) scaled so the long side is at most `long_side` (unchanged when it already is), aspect
    kept, each side at least 1 pixel: the size `tools.video.resize_long_side` gives (`tools.coords.shown_size`)."""
    from tools.coords import shown_size

    return shown_size(width, height, long_side)


def track_span(args: Any) -> tuple[int, int] | None:
    """The (start_frame, end_frame) of a track call's raw arguments, or None when they are not frame numbers.

    The arguments are the model's, recorded as it wrote them even when the call was refused as invalid
    (`"start_frame": "begin"`, null): such a call tracked nothing, so there is no track to redraw.
    """
    if not isinstance(args, dict):
        return None
    try:
        return int(args.get("start_frame", 0)), int(args.get("end_frame", 0))
    except (TypeError, ValueError, OverflowError):
        return None


def wanted_indices(v: dict[str, Any]) -> set[int]:
    """The frame indices a run's report shows (see the module docstring)."""
    n = int((v.get("meta") or {}).get("frames") or 0)
    idx = set(v.get("sample") or [])
    for ex in v.get("exchanges") or []:
        span = track_span(ex.get("args") or {})
        if n and span is not None and (ex.get("overlay") or ex.get("name") == "track_motion"):
            idx.update(track_frames(n, *span))
    for a in [v.get("assessment") or {}, *(v.get("assessments") or [])]:
        for j in a.get("judgments") or []:
            idx.update(j.get("evidence_frames") or [])
    for ex in v.get("exchanges") or []:
        idx.update(ex.get("frames") or [])
    idx.update((v.get("motion") or {}).get("frames") or [])
    for r in v.get("extra_evidence") or []:
        idx.update(r.get("frames") or [])
    idx.update((v.get("final_check") or {}).get("evidence_frames") or [])
    for e in (v.get("observation") or {}).get("events") or []:  # the observation's event links (report_frame_section)
        idx.update((e.get("start_frame", 0), e.get("end_frame", 0)))
    for s in v.get("steps") or []:  # frames a repair re-viewed (the report links them)
        if s.get("node") == "repair":
            idx.update(s.get("frames") or [])
    return {int(i) for i in idx}
