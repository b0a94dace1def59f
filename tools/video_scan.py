"""Opening a video with PyAV and its metadata scan (the container half of ``tools.video``).

Errors, ``VideoMeta``, the frame index check and the one demux pass that gives the frame count, the presentation-order
timestamps and the keyframe positions (decisions: see ``tools.video``; its checks that the file is whole:
``tools.video_complete``). Everything public here is
re-exported by ``tools.video``; import from there.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Literal

import av
import numpy as np

from tools.h264_field_pairs import FieldPairs
from tools.hevc_output import HevcOutput
from tools.matroska_tail import segment_shortfall
from tools.mpeg_pictures import B_PICTURE, MPEG_VIDEO, closed_gop, picture_type, without_b_pictures
from tools.mpegts_pes import untrusted_from
from tools.mpegts_timeline import check_timeline
from tools.video_complete import check_complete, declared_count
from tools.video_duration import HEADER_DURATION, check_duration, header_duration
from tools.video_edits import kept_frames, late_empty_edit
from tools.video_errors import (  # noqa: F401  (re-exported by tools.video)
    EmptyVideoError,
    FrameIndexError,
    VideoDecodeError,
    VideoError,
    VideoNotFoundError,
    clip_file,
    wrapped,
)
from tools.video_nal_check import framing, start_code_file
from tools.video_open import av_open
from tools.video_reorder import MAX_REORDER_DEPTH, reorder_decoder, reorder_depth  # noqa: F401  (re-exported)
from tools.video_slices import (
    HEVC_LEADING,
    HEVC_RADL,
    codes_no_picture,
    frame_threads,
    slice_thread_count,
    slices_per_frame,
    vcl_nal_types,
)

Source = str | Path | bytes


@dataclass(frozen=True)
class VideoMeta:
    """Stream metadata. ``duration`` is in seconds (the stream's or container's; Matroska / WebM / FLV: the video's
    end time in the header, from its first frame; never shorter than the frames' timestamps span plus one frame, or
    than frames / fps without timestamps);
    ``source`` is the path or ``<N bytes>``."""

    source: str
    frames: int
    fps: float
    width: int
    height: int
    duration: float
    rotation: int = 0
    """Quarter turns of the display matrix (0, 90, 180 or 270 degrees counterclockwise): frames are
    returned upright, and ``width`` x ``height`` is their upright size."""
    times: tuple[float, ...] | None = field(default=None, repr=False)
    """Presentation time of each frame in seconds from the first, from the container's timestamps (None
    when they are unusable). Variable-rate clips need it: ``index / fps`` was seconds off there."""

    def time_of(self, index: int) -> float:
        """Seconds from the first frame to frame ``index`` (its timestamp, else ``index / fps``); ``FrameIndexError``
        for an index outside the clip."""
        i = check_indices([index], self)[0]  # times[-1] was the last frame's time, index / fps a frame not there
        return self.times[i] if self.times is not None else i / self.fps

    def label(self, index: int) -> str:
        """`tools.frames.frame_label` of frame ``index`` at its time (`time_of`: right for variable-rate clips)."""
        from tools.frames import frame_label

        return frame_label(int(index), self.frames, self.fps, self.time_of(int(index)))


@dataclass(frozen=True)
class FrameIndex:
    """Presentation-order pts of every frame (None: unusable timestamps), keyframe positions, and
    the reorder depth the packets' decode order needs (None when the timestamps are unusable)."""

    pts: tuple[int, ...] | None
    keyframes: tuple[int, ...]
    reorder: int | None = None
    slices: int | None = None
    """Slices of the first keyframe (H.264 / HEVC; None otherwise): picks the decoder's threads."""
    lead: int = 0
    """Frames shown before the first keyframe (every frame when there is none): those of a clip cut mid-GOP, and an
    open GOP's leading frames, decoded after the keyframe (x264 ``open-gop``, HEVC's CRA). They reference lost frames,
    so a decode from the start trusts none of them before a keyframe (or an intra frame) comes out. In presentation
    order; without usable timestamps (``pts`` None) the frames before the keyframe in decode order and the HEVC /
    MPEG-1 / 2 leading pictures after it: at least this many, where the reader's count of the decoder's output finds
    the rest. Not those that decode whole where the clip starts on their keyframe: HEVC's RADL pictures, and an MPEG-1 /
    2 closed GOP's B pictures."""
    fields: tuple[int, ...] = ()
    """The packets (decode order, from 0, those an edit list discards not counted) that code the second field of an
    H.264 field pair (the decoder gives one frame for the pair, on the first field's packet) or a field without its
    pair, which it shows by no frame (``tools.h264_field_pairs.FieldPairs``), an HEVC picture not for output
    (``tools.hevc_output``), or no picture at all (an H.264 / HEVC access unit delimiter alone:
    ``tools.video_slices.codes_no_picture``): they are no frames."""
    primed: bool = False
    """The decode from the start begins on a keyframe an MP4 / MOV edit list discards (a clip trimmed mid-GOP): the
    decoder decodes it and drops its frame, so the frames it gives after it have their references (the keyframe's own
    leading ones lie before the edit too, discarded), and the first one out is no keyframe but no lost frame either."""
    shifted: tuple[int, str] | None = None
    """The first frame (presentation order) whose index a frame the demuxer lost may have shifted, and how it was lost
    (an MPEG-TS PES dropped or joined to another: `tools.mpegts_pes.untrusted_from`); the reader fails their reads."""
    annex_b: bool = False  # H.264 samples framed by start codes behind the avcC record (the reads': `start_code_file`)


def check_indices(indices: Sequence[int], meta: VideoMeta) -> list[int]:
    """``indices`` as ints, each checked to be an integer frame index of ``meta`` (``FrameIndexError`` else)."""
    out = []
    for raw in indices:
        if isinstance(raw, bool | np.bool_) or not isinstance(raw, int | np.integer):
            raise FrameIndexError(f"{meta.source}: frame index must be an integer, got {raw!r}")
        i = int(raw)
        if not 0 <= i < meta.frames:
            raise FrameIndexError(
                f"{meta.source}: frame index {i} is out of range for a {meta.frames}-frame video "
                f"(valid: 0..{meta.frames - 1})")
        out.append(i)
    return out


def mid_gop_error(name: str, target: int, frames: int, lead: int) -> VideoDecodeError:
    """The error for frame ``target`` of a clip cut mid-GOP (``FrameIndex.lead``: ``frames`` when no keyframe
    follows the cut)."""
    where = "has no keyframe: its frames" if lead >= frames else \
        f"its frames before the first keyframe (frame {lead})"
    return VideoDecodeError(f"{name}: frame {target} of {frames} could not be decoded: the clip starts mid-GOP "
                            f"and {where} reference frames it lacks")


def describe(src: Source) -> str:
    if isinstance(src, bytes | bytearray | memoryview):
        return f"<{len(src)} bytes>"
    return str(src)


Probe = Literal["headers", "decode"]


def open_container(src: Source, name: str, probe: Probe = "headers") -> av.container.InputContainer:
    """Open ``src`` for reading.

    ``probe="headers"`` asks FFmpeg's stream probe to demux without decoding (``skip_frame=all``):
    by default it decodes the first frames of an H.264 stream (about a third of the decode time of a
    33-frame 256x256 clip) only to guess the decoder's reorder depth, which ``scan`` measures from the
    packets instead (``reorder_decoder``). A stream that then has no frame size is reopened with
    ``probe="decode"`` (FFmpeg's default probe), as is every read of a clip whose timestamps are unusable.
    """
    if probe == "headers":
        container = _open(src, name, {"skip_frame": "all"})
        sized = all(s.codec_context is not None and (s.codec_context.width or 0) > 0
                    and (s.codec_context.height or 0) > 0 for s in container.streams.video)
        if sized:
            return container
        container.close()
    return _open(src, name, None)


def _open(src: Source, name: str, options: dict[str, str] | None) -> av.container.InputContainer:
    if isinstance(src, bytes | bytearray | memoryview):
        if len(src) == 0:
            raise EmptyVideoError(f"{name}: video input is empty (0 bytes)")
    elif clip_file(Path(src), name).st_size == 0:
        raise EmptyVideoError(f"{name}: video file is empty (0 bytes)")
    with wrapped(name, "cannot be opened as a video (not a video file, or truncated/corrupt)", src):
        return av_open(src, options)


def video_stream(container: av.container.InputContainer, name: str,
                 slices: int | None = None) -> av.video.stream.VideoStream:
    """The first video stream that is no cover picture, its decoder set to frame threads when
    `tools.video_slices.frame_threads` says so for its codec, size and `slices` per frame (None: unknown), else to
    slice threads (`slice_thread_count`: one thread for H.264, whose slice threads hide damage)."""
    # a cover picture (an MP4's udta/covr, a Matroska image attachment) is a video stream marked attached_pic
    moving = [s for s in container.streams.video if not s.disposition & av.stream.Disposition.attached_pic]
    if not moving:
        raise VideoDecodeError(f"{name}: contains no video stream (not a video file"
                               f"{', only a cover picture' if container.streams.video else ''})")
    stream = moving[0]
    ctx = stream.codec_context
    if ctx is None:  # PyAV gives none when FFmpeg found no codec for the stream (e.g. a moov cut inside it)
        raise VideoDecodeError(f"{name}: its video stream has no codec FFmpeg can decode (unknown codec, or "
                               "a truncated or corrupt header)")
    # set both ways: the scan's demuxer, opened before the slices were counted, serves the first read
    framed = frame_threads(ctx.name, ctx.width or 0, ctx.height or 0, slices)
    stream.thread_type = "AUTO" if framed else "SLICE"
    ctx.thread_count = 0 if framed else slice_thread_count(ctx.name)  # (0: FFmpeg's automatic count)
    return stream


def demux(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> Iterator[av.Packet]:
    """``container.demux(stream)``, ending quietly where PyAV's end-of-demux flush fails on streams the demuxer found
    mid-file (an MPEG-TS PID that appears after the probe): PyAV indexes its stream list, made at open, with the new
    count (an IndexError, which escaped the reader as no ``VideoError``). Every packet was read by then, and the
    stream's own flush packet, whose index comes before any new stream's, given."""
    packets = container.demux(stream)
    while True:
        try:
            packet = next(packets)
        except (StopIteration, IndexError):
            return
        yield packet


def scan(container: av.container.InputContainer, name: str,
         src: Source | None = None) -> tuple[VideoMeta, FrameIndex]:
    """One demux pass (no decoding): frame count, timestamps, keyframes, rate and duration. ``src`` (the
    path or bytes) lets an MP4 / MOV whose edit list trims frames pass the declared-count check."""
    stream = video_stream(container, name)
    width, height = stream.codec_context.width, stream.codec_context.height
    if width <= 0 or height <= 0:
        raise VideoDecodeError(f"{name}: video stream has no frame size ({width}x{height})")
    pts: list[int | None] = []  # None: a packet without a timestamp
    packets, key_pts, slices, last_dts, cut, step = 0, [], None, None, False, None
    max_pts, last_hold, key_at = -(2**63), 0, None  # key_at: frames before the first keyframe, in decode order (one
    # an edit list discards included: the decoder starts on it all the same, `FrameIndex.primed`)
    leading, radl, after_key = 0, 0, False  # HEVC / MPEG-1 / 2 pictures right after the first keyframe shown before it
    # (those of them it alone references: radl; MPEG's B pictures of a closed GOP); counting them
    first_key_pts, primed, closed = None, False, False  # first keyframe (decode order, a cut one too); closed: MPEG GOP
    codec, extradata = stream.codec_context.name, stream.codec_context.extradata
    fields: list[int] = []  # second fields, and packets of no picture
    output = HevcOutput(extradata) if codec == "hevc" else None  # pictures not for output (and its PPS in band)
    types: list[int | None] | None = [] if stream.codec_context.name in MPEG_VIDEO else None  # MPEG-1 / 2 pictures
    # (byte offset, dts, pts) of each packet, for the MPEG-TS check of lost PES (`untrusted_from`); other files: None
    heads: list[tuple[int | None, int | None, int | None]] | None = (
        [] if src is not None and "mpegts" in container.format.name.split(",") else None)
    with wrapped(name, "demuxing failed (truncated or corrupt file)", src):
        packets_of, annex_b = start_code_file(demux(container, stream), codec, extradata, name)
        pairs = FieldPairs(extradata, annex_b=annex_b) if codec == "h264" else None
        extradata = framing(extradata, annex_b)  # (the packets' NAL units split by it, every reader's alike)
        for packet, no_frame in pairs.frames(packets_of) if pairs else ((p, False) for p in packets_of):
            if packet.size == 0:
                continue  # PyAV's end-of-stream flush packet
            packets += 1
            if heads is not None:
                heads.append((packet.pos, packet.dts, packet.pts))
            cut = packet.is_corrupt  # FFmpeg flags a packet read short: its data ends at the end of the file
            if packet.dts is not None:
                if last_dts is not None and packet.dts > last_dts:  # the shortest frame: the last one's chunks (AVI)
                    step = packet.dts - last_dts if step is None else min(step, packet.dts - last_dts)
                last_dts = packet.dts if last_dts is None else max(last_dts, packet.dts)
            no_frame = no_frame or (output is not None and not output.shown(packet))
            empty = codes_no_picture(packet, codec, extradata)  # (no keyframe: a keyframe-flagged sample of the
            key = packet.is_keyframe and key_at is None and not empty  # parameter sets, a phone's codec config)
            if key:  # (its slices: one an edit list discards too, a start-trimmed clip's, and one after a mid-GOP cut)
                first_key_pts, key_at, primed = packet.pts, len(pts), packet.is_discard and not pts
                slices = slices_per_frame(bytes(packet), codec, extradata)
            if packet.is_discard:
                continue
            if no_frame or empty:  # a second field, one without its pair, an
                # HEVC picture not for output, or a packet of no picture (a raw stream's trailing access unit delimiter)
                fields.append(len(pts) + len(fields))  # (among the packets not discarded, as the reader tags them)
                if pts and pts[-1] == max_pts and packet.pts is not None and packet.duration:  # the last frame lasts
                    last_hold = max(last_hold, packet.pts + packet.duration - max_pts)  # to the end of its fields
                continue
            pts.append(packet.pts)
            if types is not None and (not types or types[-1] not in (None, B_PICTURE)):  # until a B picture (or none found)
                types.append(picture_type(packet))
            if packet.pts is not None and packet.pts >= max_pts:  # the last frame's own duration (Matroska gives it)
                max_pts, last_hold = packet.pts, packet.duration or 0
            if packet.is_keyframe and packet.pts is not None:
                key_pts.append(packet.pts)
            if after_key and types is None:
                nal_types = vcl_nal_types(bytes(packet), codec, extradata) or [-1]
                after_key = all(t in HEVC_LEADING for t in nal_types)
                leading, radl = leading + after_key, radl + (after_key and all(t in HEVC_RADL for t in nal_types))
            elif after_key:  # (MPEG-1 / 2: a B picture after an I one in decode order is shown before it)
                after_key = picture_type(packet) == B_PICTURE
                leading, radl = leading + after_key, radl + (after_key and closed)
            if key:
                after_key, closed = codec == "hevc" or types is not None, types is not None and closed_gop(packet)
    frames, declared = len(pts), int(stream.frames or 0)
    if frames == 0:  # a header that declares frames (an MP4 cut before its media data) is a truncated file
        raise VideoDecodeError(f"{name}: truncated file: the container declares {declared_count(declared)} "
                               "but only 0 could be read") if declared else EmptyVideoError(f"{name}: video stream contains no frames")
    formats = container.format.name.split(",")
    if src is not None and "mov" in formats and (pause := late_empty_edit(src, stream.id)) is not None:
        kept = kept_frames(src, stream.id)
        raise VideoDecodeError(f"{name}: unsupported edit list: its entry {pause[0]} of {pause[1]} is an empty edit (a "
                               "pause, media time -1) after media: FFmpeg shows the clip's first frames again in its "
                               f"place ({frames} frames where the edit list keeps {kept})")
    check_complete(container, stream, name, src, packets, cut, last_dts, step)
    known = [p for p in pts if p is not None]
    usable = len(known) == len(pts) and len(set(known)) == frames  # every frame has its own timestamp
    # without timestamps the reader counts the decoder's output: the frames shown before the first keyframe (those of
    # a clip cut mid-GOP before it in decode order, and HEVC's leading pictures after it, which the decoder drops) are
    # its lead; H.264's leading pictures, which only the decoder places, it counts as they come out (`iter_frames`).
    # RADL pictures (and a closed GOP's MPEG-1 / 2 B pictures) decode: out of the lead where the clip starts on their
    # keyframe with no RASL ones (nothing before them dropped); after dropped frames a count cannot place them, and
    # both leads keep them (the reader falls back from the timestamps' to the count with the same lead:
    # `VideoReader._convert`). An open GOP's MPEG-1 / 2 B pictures FFmpeg drops, as HEVC's RASL ones
    whole = radl if key_at == 0 and leading == radl else 0
    unordered = FrameIndex(None, (), slices=slices, lead=frames if key_at is None else key_at + leading - whole,
                           primed=primed, fields=tuple(fields), annex_b=annex_b)
    index = unordered
    if usable:
        ordered = sorted(known)
        keys = sorted({bisect.bisect_left(ordered, p) for p in key_pts})
        # shown before the first keyframe a decode from the start reaches: a mid-GOP cut's frames, or an open GOP's
        # leading ones (decoded after it; not those of a keyframe an edit list drops, nor RADL ones, shown last and
        # whole); no keyframe: every frame
        lead = max(0, bisect.bisect_left(ordered, first_key_pts) - whole) if first_key_pts is not None else \
            keys[0] if keys else frames
        index = FrameIndex(tuple(ordered), tuple(keys), reorder_depth(known), slices, lead, tuple(fields),
                           primed, annex_b=annex_b)
        if index.reorder == 0 and (stream.codec_context.reorder_depth or 0) > 0 and not (
                types is not None and without_b_pictures(types)):  # MPEG-1 / 2 without B pictures: never reordered
            # the codec reorders frames but the timestamps never do: decode-order timestamps (AVI with
            # B-frames), which would label frames by decode position. Count the decoder's output instead.
            index = unordered
    if heads is not None and src is not None:  # a PES the demuxer dropped or joined to another: a frame lost
        check_timeline(name, heads)  # (first: timestamps that go back, a discontinuity, index no frame)
        index = replace(index, shifted=untrusted_from(src, stream.id, heads, index.pts))
    if index.pts is None and pairs is not None and pairs.unsure:  # (with timestamps each frame is found by its own)
        raise VideoDecodeError(f"{name}: H.264 fields without their pairs, two or more in a row: the decoder shows "
                               "some alone and some twice, and without timestamps its frames cannot be counted")
    time_base = stream.time_base or Fraction(0)
    start = max(0.0, float(index.pts[0] * time_base)) if index.pts is not None and time_base else 0.0
    duration = 0.0
    if HEADER_DURATION & set(formats):  # the video's end time, not the file's (a longer audio's): FFmpeg gives
        duration = max(0.0, (header_duration(container, stream) or 0.0) - start)  # the stream the file's duration
    elif stream.duration and time_base:
        duration = float(stream.duration * time_base)
    elif container.duration:
        duration = container.duration / av.time_base
    # no timestamps at all (raw H.264 / HEVC): the demuxer's rate is its 25 fps default, the guess has the bitstream's
    untimed = all(p is None for p in pts)
    rate = (untimed and stream.guessed_rate) or stream.average_rate or stream.guessed_rate or stream.base_rate
    fps = float(rate) if rate and float(rate) > 0 and math.isfinite(float(rate)) else 0.0
    if fps <= 0 and duration > 0:
        fps = frames / duration
    times = None
    if index.pts is not None and frames > 1 and time_base and index.pts[-1] > index.pts[0]:
        times = tuple(float((p - index.pts[0]) * time_base) for p in index.pts)
        mean_rate = (frames - 1) / times[-1]
        if fps <= 0 or abs(mean_rate - fps) > 0.05 * fps:  # variable rate, or a nominal rate the frames do not keep
            fps = mean_rate
    if fps <= 0 or not math.isfinite(fps):
        raise VideoDecodeError(f"{name}: frame rate is unknown (no rate, duration or timestamps)")
    if times is not None:  # never shorter than the frames (MPEG-PS states its bit rate's guess: 2.5 s of them as 1.5 s)
        duration = max(duration, times[-1] + 1 / fps)
    else:  # no timestamps to span (MPEG-PS leaves them off packets): its bit rate's guess was 17 frames in 0.06 s
        duration = max(duration, frames / fps)
    if declared == 0 or "mov" in formats:  # no frame count to check the packets against (a fragmented MP4's moov
        # counts only the samples it holds itself): the header's duration instead
        hold = float(last_hold * time_base) if time_base else 0.0
        check_duration(container, stream, name, start, times if times is not None else (frames - 1) / fps, fps, src, hold)
    segment = segment_shortfall(src) if src is not None and {"matroska", "webm"} & set(formats) else None
    if segment is not None:  # cut at a block's edge: FFmpeg flags nothing, and a few lost frames pass the duration check
        raise VideoDecodeError(f"{name}: truncated file: its Matroska Segment ends at byte {segment[0]}, but the file "
                               f"ends {segment[0] - segment[1]} bytes short of it (frames after the {packets} read "
                               "are missing)")
    meta = VideoMeta(source=name, frames=frames, fps=fps, width=width, height=height, duration=duration,
                     times=times)
    return meta, index
