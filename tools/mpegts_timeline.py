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
fails its first frame and shows 9). Reading across a restart would need an index, seeks and
a decoder reset per part; so the reader refuses it.

A jump forward keeps the frames' order by timestamp, and the file reads (each frame equal to decoding its part
alone, measured for parts that start on an IDR picture). A wrap of the 33-bit clock is no discontinuity: FFmpeg's
demuxer unwraps it. Not seen: a join whose timestamps run on, or jump forward, into a part that starts on an open GOP
(its leading frames decode against the first part's pictures, as above): nothing in the timestamps tells it from one
stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from tools.video_errors import VideoDecodeError


def restart(packets: Sequence[tuple[int | None, int | None, int | None]]) -> tuple[int | None, int, int] | None:
    """(byte offset, dts, the largest dts before it) of the first video packet (decode order) whose decode timestamp is
    smaller than one before it; None when they never go back. ``packets``: (byte offset, dts, pts) of each demuxed
    video packet, decode order (those without a dts are skipped). One stream's decode timestamps rise packet by
    packet."""
    last: int | None = None
    for at, dts, _ in packets:
        if dts is None:
            continue
        if last is not None and dts < last:
            return at, dts, last
        last = dts
    return None


def check_timeline(name: str, packets: Sequence[tuple[int | None, int | None, int | None]]) -> None:
    """``VideoDecodeError`` naming the discontinuity where the video's timestamps go back (`restart`), else nothing."""
    found = restart(packets)
    if found is None:
        return
    at, dts, last = found
    where = f"at byte {at}" if at is not None and at >= 0 else "at a packet of unknown position"
    raise VideoDecodeError(
        f"{name}: unsupported MPEG-TS timestamp discontinuity: the video's decode timestamps go back {where} (dts "
        f"{dts} after {last}): transport streams joined or spliced (or a damaged PES header); the reader places "
        "frames by timestamps that rise through the file and cannot index the frames across it")
