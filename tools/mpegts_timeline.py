"""MPEG-TS video timestamps that go back: a discontinuity, which the reader refuses (a check of `tools.video_scan.scan`).

A transport stream may restart its clock (two files joined, ``cat a.ts b.ts``; a broadcast splice): legal in TS, but
the reader cannot index such a file safely, so it refuses it with an error naming where the timestamps go back.

Why: the reader's index is the frames' presentation timestamps, sorted (``FrameIndex.pts``); it finds each frame the
decoder gives by its timestamp, and its seeks land by timestamp (FFmpeg's MPEG-TS seek searches the file for them as
if they rose through it). After a restart the second part's timestamps fall among (or before) the first's, so the
sorted order is no presentation order: reads failed with "got pts ... instead" or a mid-GOP error on an undamaged clip,
and frames came out under another's index (measured: two 24-frame x264 parts, the second's timestamps one tick off the
first's: 46 of 48 frames read one by one failed or showed another frame's pixels). Where the restart repeats the
first part's timestamps exactly they are unusable and the reader counts the decoder's output, which decodes across the
join as one stream: a second part that starts on an open GOP (a non-IDR I picture with leading B-frames) had its first
frames decoded against the first part's pictures and handed out as good (measured: a 40-frame x264 open-GOP clip, then
itself cut to its second keyframe, from pts 0 again: frames 40 and 42 of 73 showed ids 11 and 39; the cut clip alone
fails its first frame and shows 9). Reading across a restart would need an index, seeks and a decoder reset per part;
so the reader refuses it.

Back (`restart`): a PES's own decode timestamp below an earlier one, or a frame shown before more frames decoded
earlier than any decoder holds back. Not FFmpeg's guessed decode timestamps (a stream whose PES give only a PTS), which
step back within the stream's reorder: the reader reads such a stream whole, and refused it at first.

A jump forward keeps the frames' order by timestamp, and the file reads (each frame equal to decoding its part
alone, measured for parts that start on an IDR picture). A wrap of the 33-bit clock is no discontinuity: FFmpeg's
demuxer unwraps it. Not seen: a join whose timestamps run on, or jump forward, into a part that starts on an open GOP
(its leading frames decode against the first part's pictures, as above): nothing in the timestamps tells it from one
stream; nor a restart into a part whose PES give no DTS of their own that goes back by `MAX_REORDER_DEPTH` frames or
fewer (its first frames sorted among the first part's last ones).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from tools.video_errors import VideoDecodeError
from tools.video_reorder import MAX_REORDER_DEPTH


def restart(packets: Sequence[tuple[int | None, int | None, int | None]]) -> tuple[int | None, str] | None:
    """(byte offset, what went back) of the first video packet (decode order) where the timestamps go back; None
    when they never do. ``packets``: (byte offset, dts, pts) of each demuxed video packet, decode order.

    Back: a decode timestamp of the PES's own below an earlier one (they rise through one stream, ISO 13818-1): a dts
    that is not its pts. One equal to its pts may be FFmpeg's copy of the pts of a PES that gives only a PTS, and the
    demuxer's guesses then step back by a B-frame within the stream's reorder (measured: x264 B-pyramid, PES with PTS
    only, in the scan's demux); so, also back: a frame shown before more than `MAX_REORDER_DEPTH` frames decoded before
    it, which no decoder's order does (the sign of a restart where no frame is reordered)."""
    last: int | None = None
    largest: list[int] = []  # the MAX_REORDER_DEPTH + 1 largest pts so far (a heap: its first, the smallest of them)
    for at, dts, pts in packets:
        if dts is not None and last is not None and dts < last and dts != pts:
            return at, f"decode timestamps go back (dts {dts} after {last})"
        if pts is not None and len(largest) > MAX_REORDER_DEPTH and pts < largest[0]:
            return at, (f"presentation timestamps go back (pts {pts} before that of {len(largest)} frames decoded "
                        f"before it, up to {max(largest)})")
        if pts is not None:
            (heapq.heappushpop if len(largest) > MAX_REORDER_DEPTH else heapq.heappush)(largest, pts)
        last = dts if last is None or (dts is not None and dts > last) else last
    return None


def check_timeline(name: str, packets: Sequence[tuple[int | None, int | None, int | None]]) -> None:
    """``VideoDecodeError`` naming the discontinuity where the video's timestamps go back (`restart`), else nothing."""
    found = restart(packets)
    if found is None:
        return
    at, what = found
    where = f"at byte {at}" if at is not None and at >= 0 else "at a packet of unknown position"
    raise VideoDecodeError(
        f"{name}: unsupported MPEG-TS timestamp discontinuity: the video's {what} {where}: transport streams joined "
        "or spliced (or a damaged PES header); the reader places frames by timestamps that rise through the file and "
        "cannot index the frames across it")
