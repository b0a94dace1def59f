"""Feeding a read's decoder (``tools.video_reader.VideoReader``): each packet tagged with its place in decode order,
each failure and each discarded frame told to the read's ``DamageWatch``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import av
from av.codec.context import CodecContext
from av.video.codeccontext import VideoCodecContext

from tools.video_damage import (
    DISCARDED,
    HASH_CHECKED,
    DamageWatch,
    ErrorLag,
    frame_tag,
    frame_threaded,
    tag_discarded,
    tag_packet,
    watched_decoder,
)
from tools.video_scan import Source, demux, wrapped
from tools.video_slices import fed_with_pictures, joined


def flushable(stream: av.video.stream.VideoStream) -> bool:
    """Whether flushing the decoder gives every frame it holds. Not with frame threads: a failed packet's error
    comes back among the held frames, and PyAV's ``decode`` ends there, the error dropped when a frame came before
    it in the same call; the flush's reset then lost the frames after it (a flagged reference among them). (MPEG-1 / 2
    video, whose context says FRAME, runs slice threads: flushable.)"""
    return not frame_threaded(stream.codec_context)


def fresh_decoder(ctx: VideoCodecContext) -> VideoCodecContext:
    """A new, unopened decoder set up as the open ``ctx`` is (its codec, headers, threads, flags, reorder depth) and
    watched as it is (``watched_decoder``: FFmpeg took the options ``ctx`` was opened with)."""
    fresh = CodecContext.create(ctx.codec, "r")
    assert isinstance(fresh, VideoCodecContext)  # (a video codec's)
    fresh.extradata = ctx.extradata
    fresh.width, fresh.height = ctx.width, ctx.height
    fresh.thread_type, fresh.thread_count = ctx.thread_type, ctx.thread_count
    fresh.flags, fresh.flags2, fresh.reorder_depth = ctx.flags, ctx.flags2, ctx.reorder_depth
    watched_decoder(fresh)
    return fresh


@dataclass
class Lapse:
    """Whether a stream's own decoder (``stream.codec_context``) failed a packet in ``HASH_CHECKED``, its checks lapsed
    for good (a flush, a seek's, does not bring them back): kept over the ``frames_fed`` calls of one read (a seek
    between them), each of which then decodes on a fresh decoder from its first keyframe."""

    lapsed: bool = False


def frames_fed(container: av.container.InputContainer, stream: av.video.stream.VideoStream, name: str, src: Source,
               watch: DamageWatch, *, failed: Callable[[int, str], None] | None = None,
               settling: Callable[[], bool] | None = None, lapse: Lapse | None = None,
               ) -> Iterator[tuple[av.VideoFrame, int]]:
    """Decode the stream from where it stands: each frame with the count of packets fed when it came out, each
    packet tagged with its index in decode order (``tag_packet``). Packets marked discard (an MP4 edit list's
    trimmed frames, whose frames are dropped) are not counted, as in the scan's count (``tag_discarded``). A
    packet whose decode fails on corrupt data (FFmpeg's InvalidDataError: H.264 gives no frame for it, and decodes
    on) is told to ``watch`` (the packets its error may be that of: ``ErrorLag``) and to ``failed`` (the last packet's
    tag, the error), and the decode goes on: that one failure failed the whole read, the frames before it and those
    past the next keyframe included (``tools.video_damage`` fails the frames it reaches).
    Once ``settling`` says so (after a packet's frames), the decoder is fed no more packets where a flush gives
    every frame it holds (``flushable``: not with frame threads): flushed, it gives them, decoded already, and the
    iteration ends (``tools.video_decode.frames_by_pts``: a read that has its frames decodes none past them to
    settle them).
    After a failed packet, a decoder in ``HASH_CHECKED`` is replaced by a fresh one at the next keyframe, the frames
    the old one held given first: FFmpeg's HEVC decoder, once a packet failed, failed no later picture's hash (a
    damaged keyframe 12 after a failed packet 1 decoded with no error, and its GOP was handed out as good); a flush
    does not bring its checks back, a new decoder does, and ``lapse`` tells the next call on the same stream (a read
    of frames 22 and 24 failed keyframe 24's packet decoding to 22, and after the seek to 24 the same decoder handed
    its damaged frame out as good). Not with frame threads (not ``flushable``): drained, such a
    decoder lost the frames after a failed packet's error (PyAV), a read of frames before the failure among them."""
    fed, ctx = 0, stream.codec_context
    lag = ErrorLag(ctx)
    # a packet failed on a decoder whose checks then lapse: a fresh one at the next keyframe
    renew = lapse is not None and lapse.lapsed

    def decoded(packet: av.Packet | None) -> list[av.VideoFrame]:
        """The frames the decoder gives for ``packet`` (None: the end of the stream, the frames it holds); none where it
        fails on corrupt data; not the frame of a discarded packet, told to the watch (its flag) and dropped."""
        try:
            frames = ctx.decode(packet)
        except av.error.InvalidDataError as exc:
            nonlocal renew
            # (one frame thread runs none: FFmpeg decodes in the caller's thread)
            renew = ctx.name in HASH_CHECKED and (flushable(stream) or ctx.thread_count == 1)
            if renew and lapse is not None and ctx is stream.codec_context:
                lapse.lapsed = True
            error = f"{type(exc).__name__}: {exc}"
            first, tag = lag.blame(end=packet is None or not packet.size)
            watch.failed(tag, error, first)
            if failed is not None:
                failed(tag, error)
            return []
        kept = []
        for frame in frames:
            if frame_tag(frame) == DISCARDED:
                watch.discarded(frame)
            else:
                kept.append(frame)
        return kept

    try:
        with wrapped(name, "decoding failed (truncated or corrupt data)", src):
            for packet, carried, discard in fed_with_pictures(demux(container, stream), ctx.name, ctx.extradata):
                if renew and packet.is_keyframe and packet.size and not discard:
                    # the old decoder's frames, then a fresh one from this keyframe (none fed yet: flushed by a seek)
                    held = decoded(None) if fed else []
                    ctx.flush_buffers()  # (its frame threads joined before it is freed: `release_decoder`)
                    ctx, renew = fresh_decoder(ctx), False
                    lag = ErrorLag(ctx)
                    yield from ((frame, fed) for frame in held)
                fed += carried  # (packets of no picture whose data heads this one: tagged as the scan counts them)
                if discard:  # fed unmarked (FFmpeg would drop its frame, flag and all): the reader drops it
                    packet = joined(b"", packet) if packet.is_discard else packet
                    tag_discarded(packet, fed)
                    lag.fed(fed, discarded=True)
                elif packet.size:  # (not the end-of-stream flush packet)
                    tag_packet(packet, fed, carried)
                    lag.fed(fed)
                    fed += 1
                for frame in decoded(packet):
                    yield frame, fed
                # (after the flush packet: drained already; not flushable: it decodes on, as long as the watch waits)
                if packet.size and settling is not None and settling() and flushable(stream):
                    held = decoded(None)
                    # drained, it takes no packet until reset (PyAV 18's `InputContainer.seek` resets every stream's)
                    ctx.flush_buffers()
                    yield from ((frame, fed) for frame in held)
                    return
    finally:
        if ctx is not stream.codec_context:  # a fresh decoder: its frame threads joined before it is freed
            ctx.flush_buffers()
