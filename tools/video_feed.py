"""Feeding a read's decoder (``tools.video_reader.VideoReader``): each packet tagged with its place in decode order,
each failure and each discarded frame told to the read's ``DamageWatch``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import av
from av.codec.context import CodecContext
from av.video.codeccontext import VideoCodecContext

from tools.video_damage import DROP_HORIZON, DamageWatch
from tools.video_nal_check import broken_headers, framing, unreferenced, zero_run_damage
from tools.video_nonref import demoted_damage
from tools.video_scan import Source, demux, wrapped
from tools.video_slices import fed_with_pictures, joined
from tools.video_tags import DISCARDED, earlier_decode, frame_tag, tag_discarded, tag_packet
from tools.video_threads import HASH_CHECKED, ErrorLag, frame_threaded, watched_decoder

LEADING_SKIPPED = frozenset({"hevc", "h264"})
"""Decoders that, from a keyframe with no frame before it (a seek's, a cut clip's first), may skip its leading
pictures (shown before it, decoded after it, referencing the frames before it) with no frame and no error: HEVC's RASL
pictures, H.264's open-GOP B-frames (FFmpeg puts out no frame before the stream's recovery point). The watch is told
(``DamageWatch.skipped``): a frame handed out no longer waits on them (with frame threads it waited ``DROP_HORIZON``
frames: a seek's read of frame 30 of a 60-frame H.264 open-GOP clip decoded to its end)."""


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
    between them), each of which then decodes on a fresh decoder from its first keyframe. So does one that, frame-threaded,
    was left (a seek) with packets fed whose frames had not come out (``in_flight``): one of them may have failed, its
    error dropped by the seek's flush, and the checks lapsed with it (packet 13 damaged, a read of [10, 13]: the decode
    from keyframe 0 fed it to settle frame 10, and after the seek to 12 the same decoder gave its frame 13 with no
    error)."""

    lapsed: bool = False
    in_flight: bool = False


_Tagged = tuple[av.Packet, int, int, bool]
"""A packet as tagged for the decoder (``fed_with_pictures``): the packet, its tag (a discarded one's: the next
one's), the packets of no picture it carries, whether it is discarded."""


@dataclass
class _Handover:
    """A fresh decoder's start at keyframe ``key`` where the old one runs frame threads: the old one decodes on (its
    frames from the keyframe dropped) until every packet before it fed and ``waits`` gave its frame, or it was fed
    ``DROP_HORIZON`` packets since (one gave none: the reader fails what waits on it); then the fresh one is fed the
    packets from the keyframe (``replay``) again. ``shown``: the keyframe's pts (its leading pictures, decoded after it
    and shown before it: the old decoder's frames of them are kept, as the fresh one may skip them: ``_Leading``)."""

    key: int
    shown: int | None
    waits: set[int]
    replay: list[_Tagged] = field(default_factory=list)

    @classmethod
    def at(cls, key: int, shown: int | None, unseen: set[int], replay: list[_Tagged]) -> _Handover:
        """From keyframe ``key`` (pts ``shown``), fed ``replay`` since: it waits on the packets fed before the keyframe
        whose frame has not come out (``unseen``)."""
        return cls(key, shown, {t for t in unseen if t < key}, replay)

    def done(self) -> bool:
        return not self.waits or len(self.replay) > DROP_HORIZON


@dataclass
class _Leading:
    """The old decoder's frames of a handover's keyframe's leading pictures (shown before it, decoded after it): a fresh
    decoder from an open GOP's keyframe (HEVC's CRA) skips those that reference the GOP before (RASL), and the frames
    handed out before them waited on them to the end of the stream (a read by a seek of an intact frame of an earlier
    GOP failed: no frame 34). Each goes out once the fresh decoder gives a frame shown after it without giving it (the
    failed packet before the keyframe damages it, the watch's place for it in that GOP), else the fresh one's."""

    frames: list[tuple[int, av.VideoFrame]] = field(default_factory=list)  # (pts, frame)

    def held(self, frame: av.VideoFrame, shown: int | None) -> bool:
        """Keep ``frame`` (the old decoder's, from the keyframe on) where it is a leading picture of the keyframe."""
        if frame.pts is None or shown is None or frame.pts >= shown or frame_tag(frame) == DISCARDED:
            return False
        self.frames.append((frame.pts, frame))
        return True

    def merged(self, frames: list[av.VideoFrame], *, end: bool = False) -> list[av.VideoFrame]:
        """The fresh decoder's ``frames``, after the held ones shown before them that it did not give (``end``: all)."""
        if not self.frames:
            return frames
        given = {frame.pts for frame in frames}
        first = min((pts for pts in given if pts is not None), default=None)
        due = [end or (first is not None and pts < first) for pts, _ in self.frames]
        out = [held for held, now in zip(self.frames, due, strict=True) if now and held[0] not in given]
        self.frames = [held for held, now in zip(self.frames, due, strict=True) if not now and held[0] not in given]
        return [frame for _, frame in sorted(out, key=lambda held: held[0])] + frames


def frames_fed(container: av.container.InputContainer, stream: av.video.stream.VideoStream, name: str, src: Source,
               watch: DamageWatch, *, failed: Callable[[int, str], None] | None = None,
               settling: Callable[[], bool] | None = None, lapse: Lapse | None = None, annex_b: bool = False,
               ) -> Iterator[tuple[av.VideoFrame, int]]:
    """Decode the stream from where it stands: each frame with the count of packets tagged when it came out, each
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
    its damaged frame out as good). With frame threads (not ``flushable``) the old decoder is not drained, which lost
    the frames after a failed packet's error (PyAV): it hands over (``_Handover``), and a keyframe fed to it before
    its error came back (packets late) hands over too (``hand_over``). ``annex_b``: the file's samples are framed by
    start codes behind its avcC record (``tools.video_nal_check.start_code_file``, decided once for the file): every
    packet is split so, on every call (each decided anew from the packets it met, a seek's first one as likely
    neither as a start code, and the fresh call took as length-prefixed what the file's decoder took as Annex B)."""
    tagged, ctx = 0, stream.codec_context  # (packets tagged so far: the next one's tag)
    extradata = ctx.extradata  # (a fresh decoder's too: `fresh_decoder`)
    lag = ErrorLag(ctx)
    decode = object()  # this call's decode, in each packet's tag: a frame of an earlier one (before a seek) is dropped
    # a packet failed on a decoder whose checks then lapse: a fresh one at the next keyframe
    renew = lapse is not None and (lapse.lapsed or lapse.in_flight)
    # with frame threads, from the keyframe a fresh decoder starts at: its tag, and the packets fed since (to feed the
    # fresh one once the old one gave every frame of the packets before it: `_Handover`)
    handover: _Handover | None = None
    # a decoder whose checks lapse that runs frame threads hands over (one frame thread runs none: FFmpeg decodes in
    # the caller's thread, and tells a packet's error as it goes in); only there are packets and frames followed
    hands_over = ctx.name in HASH_CHECKED and not flushable(stream) and ctx.thread_count != 1
    unseen: set[int] = set()  # tags fed whose frame has not come out (the last DROP_HORIZON's)
    recent: list[_Tagged] = []  # the last packets fed to the decoder in use (DROP_HORIZON of them)
    leading = _Leading()
    # the pts of the keyframe the decode starts at while its leading pictures are fed (`LEADING_SKIPPED`)
    opening: int | None = None
    started = False  # a picture was fed

    def decoded(packet: av.Packet | None, *, before: int | None = None) -> list[av.VideoFrame]:
        """The frames the decoder gives for ``packet`` (None: the end of the stream, the frames it holds); none where it
        fails on corrupt data; not the frame of a discarded packet, told to the watch (its flag) and dropped.
        ``before``: the decoder is the old one of a handover, whose frames and errors count only for the packets
        before that tag (those from it on go to the fresh decoder again)."""
        try:
            frames = ctx.decode(packet)
        except av.error.InvalidDataError as exc:
            nonlocal renew
            first, tag = lag.blame(end=packet is None or not packet.size)
            if before is not None:  # (an error of a packet from the keyframe on: the fresh decoder tells it again)
                if first >= before:
                    return []
                tag = min(tag, before - 1)
            renew = ctx.name in HASH_CHECKED
            if renew and lapse is not None and ctx is stream.codec_context:
                lapse.lapsed = True
            error = f"{type(exc).__name__}: {exc}"
            watch.failed(tag, error, first)
            if failed is not None:
                failed(tag, error)
            if renew and hands_over:
                hand_over(min(first, tag))
            return []
        kept = []
        for frame in frames:
            if earlier_decode(frame, decode):  # (the seek's flush kept it: its tag numbers another packet here)
                continue
            if before is not None and (frame_tag(frame) or 0) >= before:
                if handover is not None:  # (but a leading picture's, which it may skip: `_Leading`)
                    leading.held(frame, handover.shown)
                continue  # (the old decoder's, its checks lapsed: the fresh decoder gives it)
            if frame_tag(frame) == DISCARDED:
                watch.discarded(frame)
            else:
                kept.append(frame)
        return kept

    def hand_over(first: int) -> None:
        """The decoder, frame-threaded, told the failure of a packet from the one tagged ``first`` on, packets late: a
        keyframe fed since went to a decoder whose checks had lapsed (a damaged keyframe 24 decoded with no error where
        packet 12's error came after it): a fresh decoder starts from the first such keyframe (``_Handover``)."""
        nonlocal handover
        at = next((j for j, (packet, tag, _, discard) in enumerate(recent)
                   if tag > first and packet.is_keyframe and not discard), None)
        if at is not None and (handover is None or recent[at][1] < handover.key):
            key = recent[at][1]
            handover = _Handover.at(key, recent[at][0].pts, unseen, recent[at:])

    def send(item: _Tagged) -> list[av.VideoFrame]:
        """Tag ``item``'s packet and feed it to the decoder (to the old one of a handover: its frames before it)."""
        packet, at, carried, discard = item
        if discard:  # fed unmarked (FFmpeg would drop its frame, flag and all): the reader drops it
            packet = joined(b"", packet) if packet.is_discard else packet
            tag_discarded(packet, at, decode=decode)
            lag.fed(at, discarded=True)
        elif packet.size:  # (not the end-of-stream flush packet)
            tag_packet(packet, at, carried, decode=decode)
            lag.fed(at)
            if hands_over:
                unseen.add(at)
        data = bytes(packet) if packet.size else b""
        if data and watch.references is not None:  # (H.264 / HEVC: which pictures no other references, and header
            # damage; a discarded one: H.264's not kept, `H264References.skipped`; HEVC's kept, its set counting)
            for demoted in watch.references.fed(at, data, extradata, annex_b=annex_b, discarded=discard):
                watch.broken(demoted, demoted_damage(demoted))
        if data and (broken := broken_headers(data, ctx.name, extradata, annex_b=annex_b)):  # (decoded unseen)
            alone = not discard and unreferenced(broken, ctx.name)  # (a discarded one's: told unconfirmed)
            if alone and ctx.name == "hevc" and watch.references is not None:  # (its TemporalId the highest)
                alone = watch.references.says_unreferenced(at)
            watch.broken(at, zero_run_damage(at, alone, ctx.name), discarded=discard, alone=alone)
        frames = decoded(packet, before=None if handover is None else handover.key)
        if handover is None:  # (the fresh decoder's: the old one's leading pictures it skipped go out before them)
            frames = leading.merged(frames)
        for frame in frames if hands_over else ():
            if (tag := frame_tag(frame)) is not None:
                unseen.difference_update([tag, *(t for t in unseen if t < tag - DROP_HORIZON)])
                if handover is not None:
                    handover.waits.discard(tag)
        if hands_over and lapse is not None and ctx is stream.codec_context:  # (as it stands if the decode is left)
            lapse.in_flight = bool(unseen)
        return frames

    def feed(item: _Tagged) -> Iterator[tuple[av.VideoFrame, int]]:
        """Feed ``item`` (a packet, not the end's) to the decoder in use; the fresh one once a handover is done."""
        if hands_over:
            recent.append(item)
            del recent[:-DROP_HORIZON]
        if handover is not None:
            handover.replay.append(item)
        yield from ((frame, tagged) for frame in send(item))
        if handover is not None and handover.done():
            yield from renewed()

    def renewed() -> Iterator[tuple[av.VideoFrame, int]]:
        """A fresh decoder in place of the old one (its frames given), fed the packets of the handover, if any."""
        nonlocal ctx, lag, renew, handover
        ctx.flush_buffers()  # (its frame threads joined before it is freed: `release_decoder`)
        ctx, renew = fresh_decoder(ctx), False
        lag = ErrorLag(ctx)
        replay, handover = handover.replay if handover is not None else [], None
        recent.clear()
        for item in replay:
            yield from feed(item)

    try:
        with wrapped(name, "decoding failed (truncated or corrupt data)", src):
            for packet, carried, discard in fed_with_pictures(demux(container, stream), ctx.name,
                                                                 framing(extradata, annex_b)):
                if renew and handover is None and packet.is_keyframe and packet.size and not discard:
                    if tagged and hands_over:  # drained, a frame-threaded decoder loses the frames after a failed
                        # packet's error (PyAV's `decode` ends at the error, and takes no packet after the flush):
                        # it decodes on instead, its frames from the keyframe dropped
                        handover = _Handover.at(tagged + carried, packet.pts, unseen, [])
                    else:  # the old decoder's frames, then a fresh one from this keyframe (none fed: a seek's flush)
                        held = decoded(None) if tagged else []
                        yield from ((frame, tagged) for frame in held)
                        yield from renewed()
                tagged += carried  # (packets of no picture whose data heads this one: tagged as the scan counts them)
                item = (packet, tagged, carried, discard)
                if packet.size and not discard:
                    if not started:
                        started, opening = True, packet.pts if packet.is_keyframe and ctx.name in LEADING_SKIPPED else None
                    elif opening is not None and packet.pts is not None and packet.pts < opening:
                        watch.skipped(tagged)
                    else:
                        opening = None
                    tagged += 1
                if packet.size:
                    yield from feed(item)
                else:  # the end: the old decoder's frames (a handover's), then the fresh one's
                    while handover is not None:
                        yield from ((frame, tagged) for frame in decoded(None, before=handover.key))
                        yield from renewed()
                    yield from ((frame, tagged) for frame in send(item))
                    yield from ((frame, tagged) for frame in leading.merged([], end=True))
                # (after the flush packet: drained already; not flushable: it decodes on, as long as the watch waits)
                if packet.size and settling is not None and settling() and flushable(stream):
                    held = decoded(None)
                    # drained, it takes no packet until reset (PyAV 18's `InputContainer.seek` resets every stream's)
                    ctx.flush_buffers()
                    yield from ((frame, tagged) for frame in held)
                    return
    finally:
        if ctx is not stream.codec_context:  # a fresh decoder: its frame threads joined before it is freed
            ctx.flush_buffers()
