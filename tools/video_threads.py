"""A decoder's threads as a ``tools.video_damage.DamageWatch`` needs them known: the decoder set up for the watch
(``watched_decoder``), whether it runs frame threads (``frame_threaded``), which hand a packet's result back packets
late (``ErrorLag`` names the packet an error is that of), and its release (``release_decoder``)."""

from __future__ import annotations

from collections import deque

import av
from av.codec.codec import Capabilities
from av.codec.context import CodecContext, Flags, ThreadType

FRAME_THREADS = 16
"""The most frame threads FFmpeg's automatic thread count takes (``MAX_AUTO_THREADS``; 16 from 15 cores on): each
one past the first holds a frame back after the decoder's own reorder delay."""


HASH_CHECKED = frozenset({"hevc"})
"""Decoders that check each picture against the hash its stream may carry (HEVC's decoded picture hash SEI, x265's
``hash``) where told to (``err_detect`` crccheck) and fail its packet on a mismatch where told to fail on what they
find (explode). FFmpeg's HEVC decoder conceals nothing and flags no frame, and by default swallows its errors (a slice
it cannot parse, a hash that does not match): its damaged pictures came out as good ones."""


def watched_decoder(ctx: CodecContext) -> None:
    """Set up the decoder ``ctx`` (not yet opened) for a ``DamageWatch``: each frame gives back its packet's tag
    (``Flags.copy_opaque``, ``tag_packet``); a decoder in ``HASH_CHECKED`` fails a packet whose picture does not match
    its hash, or that it fails to decode (``InvalidDataError``: ``DamageWatch.failed``). Released by
    ``release_decoder``."""
    ctx.flags |= Flags.copy_opaque
    if ctx.name in HASH_CHECKED:
        ctx.options = {**ctx.options, "err_detect": "crccheck+explode"}


def frame_threaded(ctx: CodecContext) -> bool:
    """Whether the decoder ``ctx`` runs frame threads, handing a packet's frames and error back packets late: its
    context asks for them and the codec runs them, FFmpeg's (``Capabilities.frame_threads``) or its own
    (``Capabilities.auto_threads``: libdav1d). Not MPEG-1 / 2 video: asked for "AUTO" it runs slice threads, and its
    context still says FRAME."""
    ran = Capabilities.frame_threads | Capabilities.auto_threads
    return ThreadType.FRAME in ctx.thread_type and bool(ctx.codec.capabilities & ran)


def release_decoder(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> None:
    """Close ``container`` once the decoder of its ``stream`` holds no packet: flushed first (``flush_buffers``, which
    waits for FFmpeg's frame threads with the GIL released). A frame thread that drops the last reference to a packet
    takes the GIL (to free its tag, PyAV's opaque value, or the Python bytes of a packet PyAV made:
    ``tools.video_slices.fed_with_pictures``), and PyAV frees the codec context (with the stream, later) holding the
    GIL while it joins those threads: a decoder freed while a thread still decoded such a packet hung the read (HEVC
    with frame threads, a failed packet; H.264, packets that gave no frame, the decode abandoned)."""
    stream.codec_context.flush_buffers()
    container.close()


class ErrorLag:
    """The last packets fed to a decoder, to name the one whose error it gives. With frame threads FFmpeg hands back a
    packet's result (its frames, its error) once each thread holds a packet: as the packet ``thread_count - 1`` after
    it goes in (the count FFmpeg picked, read once the decoder is open), or, at the end of the stream, with the results
    of every packet still held (the flush: any of them). Counted in packets fed, not tags: a packet carrying packets of
    no picture (``tag_packet``) skips their tags, and a discarded one (``tag_discarded``) has none: it stands between
    the tag before and the one after, ``(after, before)``, as the watch blames it (``DamageWatch.failed``). (A thread
    that fails to take its packet, the decoder state it copies from the one before, fails sooner: the blame then falls
    on a packet before the failed one, which itself fails in turn.) A decoder that runs threads of its own
    (``Capabilities.auto_threads``: libdav1d, whose frame delay FFmpeg does not report) blames every packet held, the
    last ``FRAME_THREADS``."""

    def __init__(self, ctx: CodecContext) -> None:
        self._ctx = ctx  # (before it opens, FFmpeg's automatic count, 0, picks at most FRAME_THREADS)
        self._fed: deque[tuple[int, int]] = deque(maxlen=max(ctx.thread_count, FRAME_THREADS))

    def fed(self, tag: int, *, discarded: bool = False) -> None:
        """A packet went to the decoder: ``tag`` (a discarded one's: the tag the next one gets)."""
        self._fed.append((tag, tag - 1) if discarded else (tag, tag))

    def blame(self, *, end: bool = False) -> tuple[int, int]:
        """The tags ``(first, last)`` of the packets whose error the decoder gave just now (``end``: on the flush)."""
        ctx, fed = self._ctx, self._fed
        if not fed:
            return 0, 0
        if ctx.codec.capabilities & Capabilities.auto_threads:  # threads of its own (libdav1d): a delay FFmpeg can't
            return fed[0][0], fed[-1][1]  # tell (dav1d's frame delay, up to 8 pictures, on any thread type)
        # (a decoder without frame threads, MPEG-1 / 2 video: its error is the packet's just fed)
        lag = max(ctx.thread_count - 1, 0) if frame_threaded(ctx) else 0
        first = fed[-1 - lag] if lag < len(fed) else fed[0]
        return (first[0], fed[-1][1]) if end else first

