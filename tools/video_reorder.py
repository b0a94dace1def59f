"""How far a decoder reorders: the depth the scan measures over every packet's timestamps (``reorder_depth``), the
cap a decoder may be given (``MAX_REORDER_DEPTH``) and handing the measured depth to the decoder (``reorder_decoder``).
Moved out of ``tools.video_scan`` (which re-exports the three), whose one demux pass measures the depth."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import av.video.stream

    from tools.video_scan import FrameIndex


def reorder_depth(decode_order_pts: list[int]) -> int:
    """Frames a decoder must hold back to output in presentation order: the most packets decoded
    before a frame whose pts is larger than the frame's (0 for streams without B-frames)."""
    seen: list[int] = []
    depth = 0
    for p in decode_order_pts:
        depth = max(depth, len(seen) - bisect.bisect_right(seen, p))
        bisect.insort(seen, p)
    return depth


MAX_REORDER_DEPTH = 16
"""The deepest reorder a decoder is given (FFmpeg's ``MAX_DELAYED_PIC_COUNT``, the most frames H.264 / HEVC may hold
back): the H.264 decoder given more aborts the process (``Assertion pics <= H264_MAX_DPB_FRAMES failed``)."""


def reorder_decoder(stream: av.video.stream.VideoStream, index: FrameIndex) -> None:
    """Give the decoder the reorder depth the scan measured, when its own is smaller.

    FFmpeg's H.264 decoder takes the depth from the stream headers (VUI) or, without them, from the
    guess its stream probe makes by decoding; with a depth too small it drops frames that arrive out of
    order. A container opened with ``probe="headers"`` has no guess, so the depth measured over every
    packet replaces it (the probe's guess sees only the first few frames). The depth is capped at
    `MAX_REORDER_DEPTH`: timestamps that reorder deeper (a corrupt or odd mux; no decoder outputs that order)
    killed the whole process in an FFmpeg assertion; now the decoder's order fails the timestamp check, as any
    order the timestamps do not keep (``tools.video``: the reader counts the decoder's output).
    """
    depth = min(index.reorder, MAX_REORDER_DEPTH) if index.reorder is not None else None
    if depth is not None and stream.codec_context.reorder_depth < depth:
        stream.codec_context.reorder_depth = depth
