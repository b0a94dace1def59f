"""The frame-accurate part of `VideoReader.read` (tools/video_reader.py; tools/video.py gives the decisions):
decode a demuxer's video stream forward, seeking to keyframes when allowed, and hand out each wanted frame under
the index its timestamp gives it, checking every decoded frame against the scan. A surprise is an exception the
reader answers: ``SeekFailed`` / ``SeekMissed`` / ``SeekDamaged`` (decode again from the start), ``OutOfOrder``
(count the decoder's output order instead), ``VideoDecodeError`` (the frame cannot be had). Counting the output, ``CountCheck``
finds the frames a drop would shift."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import av
from av.video.frame import PictureType

from tools.video_damage import DROP_HORIZON, UNREFERENCED_B, DamageWatch
from tools.video_scan import FrameIndex, Source, VideoDecodeError, mid_gop_error
from tools.video_seek import SeekDamaged, SeekFailed, SeekMissed, seek_keyframe, seek_landed
from tools.video_tags import frame_tag
from tools.video_threads import frame_threaded

T = TypeVar("T")


class OutOfOrder(Exception):
    """Decoding from the start, timestamps out of presentation order (AVI): count output order."""


def ended_early(name: str, target: int, total: int) -> VideoDecodeError:
    """The error for frame ``target`` of a clip of ``total`` frames that a decode from the start never reached."""
    return VideoDecodeError(f"{name}: frame {target} of {total} could not be decoded (stream ended early)")


Packets = Callable[[av.container.InputContainer, av.video.stream.VideoStream, DamageWatch, Callable[[], bool]],
                   Iterator[av.VideoFrame]]
"""Decodes a container's stream from where it stands, each packet tagged (``tag_packet``), telling the watch of a
packet whose decode fails on corrupt data (``DamageWatch.failed``) and going on; once the callback says so (checked
after each packet's frames), it feeds no more packets where a flush gives every frame the decoder holds (not with frame
threads: ``tools.video_feed.flushable``): it flushes the decoder, gives the frames it held and ends."""


def may_be_key(i: int | None, keys: frozenset[int]) -> bool:
    """Whether frame ``i`` (None: a pts the scan did not map) out of the decoder may count as a key frame
    (``DamageWatch.came_out``'s ``keyed``): where nothing is known (no index, or a scan that found no keyframe),
    else only one of the scan's keyframes ``keys`` (a key frame elsewhere is none)."""
    return i is None or not keys or i in keys


def _drain(frames: Iterator[av.VideoFrame], watch: DamageWatch, mapping: dict[int, int], keyed: frozenset[int],
           last: int, total: int | None) -> None:
    """Take the decoder's frames until no frame handed out waits on a frame decoded before it (``DamageWatch.check``
    fails one the damage shows in); ``frames`` is settling (``Packets``): it decodes no packet past those fed. With
    frame threads it ends at the end of the stream only (``total`` given, the clip's frames; None: it ends at a
    flush): where the decoder gave not every frame past ``last`` (the last one out before), one that still waits
    fails: PyAV drops an error the decoder gives after a frame in one call (the end's flush), and the frames it held
    after it, its reference among them, flagged or not (``DamageWatch.end``). ``keyed``: the scan's keyframes."""
    out: set[int | None] = set()
    while watch.waiting:
        frame = next(frames, None)
        if frame is None:
            gone = next((i for i in range(last + 1, total) if i not in out), None) if total is not None else None
            watch.end(None if gone is None else f"near the end of the clip, where it gave no frame {gone} and no error "
                      "(with frame threads PyAV drops an error the decoder gives after a frame, and the frames after "
                      "it): a frame decoded before this one and shown after it, which it may reference, is among them")
            return
        i = mapping.get(frame.pts) if frame.pts is not None else None
        out.add(i)
        watch.came_out(frame, i, keyed=may_be_key(i, keyed))
        watch.check()


def _dropped(watch: DamageWatch, gone: int, i: int) -> None:
    """Frame ``i``, just out, came after frames from ``gone`` that the decoder gave no frame for, with no error: in
    ``UNREFERENCED_B``'s codecs the decoder skips a B-frame it cannot place (MPEG-4 part 2: a P-frame damaged into a
    B-frame, and the B-frames after it), and decodes the frames after it against the reference before it, wrong, with
    no flag; where the timestamps are a parser's, from the picture types (AVI gives MPEG-4 part 2 its parser's), they
    are another frame's from there on (``DamageWatch.dropped``). (H.264 / HEVC field pairs and leading pictures give
    no frame of their own where nothing is damaged.)"""
    watch.dropped(f"in {f'frame {gone}' if i == gone + 1 else f'frames {gone}-{i - 1}'}, for which it gave no frame "
                  "and no error: the frames decoded after it up to the next keyframe may reference it, and their "
                  "timestamps may be another frame's")


def _got_instead(name: str, target: int, total: int, frame: av.VideoFrame, watch: DamageWatch) -> VideoDecodeError:
    """The error for frame ``target`` where another frame came out, naming the damage the watch saw (if any)."""
    met = watch.failures()
    return VideoDecodeError(f"{name}: frame {target} of {total} could not be decoded (got pts {frame.pts} instead)"
                            + (f": the decoder met corrupt data {met}" if met else ""))


def _missed(watch: DamageWatch) -> SeekMissed:
    """The signal for a frame a seek's decode lacks: the decoder's (``SeekDamaged``) where it failed on a packet."""
    return SeekDamaged() if watch.packets_failed else SeekMissed()


def frames_by_pts(container: av.container.InputContainer, stream: av.video.stream.VideoStream, wanted: list[int],
                  index: FrameIndex, mapping: dict[int, int], *, allow_seek: bool, name: str, src: Source, total: int,
                  packets: Packets) -> Iterator[tuple[int, av.VideoFrame]]:
    """Yield ``(index, frame)`` for each sorted ``wanted`` index of a clip of ``total`` frames from ``container``
    (positioned at its start), ``mapping`` giving each pts its frame index; ``packets`` decodes the container's
    stream from where it stands (the reader's, so that a test can stand in for it). A frame the decoder damaged (a
    ``DamageWatch``) is a ``VideoDecodeError``, raised once it shows: before the generator ends, which takes the decoder's frames until every frame decoded before one it yielded came out: by
    flushing the decoder, which gives the frames it holds back (its reorder delay) and decodes no further packet, or
    with frame threads by decoding on (``Packets``)."""
    pts, keys, lead = index.pts, index.keyframes, index.lead
    keyed = frozenset(keys)  # (a key frame elsewhere is none: `DamageWatch.came_out`)
    assert pts is not None  # `mapping` is built from them (VideoReader._decode)
    frames: Iterator[av.VideoFrame] | None = None
    watch = DamageWatch.of(name, total, stream)  # (a new one with each `frames`: the tags start again)
    last = -1  # index of the last frame produced by `frames`
    lost = False  # decoding a clip cut mid-GOP from its start: no keyframe has come out yet
    landed: int | None = None  # the keyframe a seek went to, until its frame has come out intra-coded
    settling = False  # `frames` feeds no more packets (`_drain`)
    threaded = frame_threaded(stream.codec_context)  # (settling, `frames` decodes to the end: not `flushable`)

    def settle() -> bool:
        return settling

    # a clip cut mid-GOP decodes its first GOP from the start: a seek to its first keyframe may land there (MPEG-TS),
    # and the failures of the lead's packets damage nothing only where the watch counts from the start (its `lead`)
    first = keys[0] if lead and keys else 0
    for target in wanted:
        k = keys[bisect.bisect_right(keys, target) - 1] if keys and keys[0] <= target else 0
        seek = allow_seek and k > max(last + 1, first)
        if frames is None or seek:
            if frames is not None:  # the decoder's frames are gone after a seek: settle the ones handed out
                settling = True
                _drain(frames, watch, mapping, keyed, last, total if threaded else None)
                settling = False
            if seek:
                if not seek_keyframe(container, stream, pts[k], name, src):
                    raise SeekFailed  # FFmpeg failed the seek: decode from the start instead
                landed = k
            watch = DamageWatch.of(name, total, stream, lead=0 if seek else lead)  # (from the start: its lead)
            frames, last, lost = packets(container, stream, watch, settle), -1, lead > 0 and not seek
        while last < target:
            frame = next(frames, None)
            if frame is None:
                if lost and target < lead:  # no keyframe came out (H.264 drops the frames before it)
                    raise mid_gop_error(name, target, total, lead)
                if allow_seek:  # a seek (or the rewind) that landed past its frames (MPEG-TS), or a failed packet
                    raise _missed(watch)
                raise ended_early(name, target, total)
            i = mapping.get(frame.pts) if frame.pts is not None else None
            if lost:
                if i is not None and i < lead and not (frame.key_frame or frame.pict_type == PictureType.I):
                    watch.came_out(frame, i, lost=True)
                    continue  # decoded on lost references (MPEG-4 part 2: gray ones): not that frame
                lost = False
            # (a frame before the keyframe a seek landed on: its references were before the seek, whatever its flags)
            place = watch.came_out(frame, i, lost=landed is not None and (i is None or i < landed),
                                   keyed=may_be_key(i, keyed))
            watch.check()
            if i is None or (last >= 0 and i != last + 1):  # unknown pts, or not the next frame
                if allow_seek:
                    raise _missed(watch)
                if i is not None and i != target and stream.codec_context.name == "hevc" and \
                        watch.damage(place) is not None:  # a damaged HEVC frame out of its place (a broken POC put it
                    continue  # out early): not handed out, no place passed (counting from it would shift the rest)
                if i is None or i <= last:  # timestamps out of presentation order: unusable, unless
                    if watch.packets_failed:  # the damage put frames out early (HEVC's DPB, frame threads)
                        if i is not None and watch.damage(place) is not None:
                            continue  # a damaged frame put out late (after the next keyframe's): never handed out
                        if i is not None and watch.before_failure(place):  # one decoded before the failed packet,
                            continue  # put out late by its error (frame threads): its own place passed, none wanted
                        raise _got_instead(name, target, total, frame, watch)
                    raise OutOfOrder
                # a gap from the start: frames the decoder dropped; the timestamps still label the rest, unless
                if stream.codec_context.name in UNREFERENCED_B:  # the decoder skipped a frame it could not place
                    _dropped(watch, last + 1, i)
            if i > target:  # the first frame decoded lies past the target
                if target < lead:
                    raise mid_gop_error(name, target, total, lead)
                if allow_seek:
                    raise _missed(watch)
                raise _got_instead(name, target, total, frame, watch)  # (no frame for a packet it fails on)
            if landed is not None and i >= landed:
                if not seek_landed(frame, i, landed):
                    raise SeekMissed
                landed = None
            last = i
            if i == target:
                watch.handed(i)
                watch.check()
                yield i, frame
    if frames is not None:
        settling = True
        _drain(frames, watch, mapping, keyed, last, total if threaded else None)


class FrameDropped(VideoDecodeError):
    """Counting the decoder's output, frame ``index`` could not be had: the decoder gave no frame for ``packet``
    (decode order), fed before that frame came out; ``error``, the decoder's error for that packet, if it gave one.
    Or (``damage``: what the damage watch saw, ``DamageWatch.failures``) the decoder gave no frame from ``index`` on,
    after failing a packet or flagging a frame."""

    def __init__(self, name: str, index: int, total: int, packet: int, error: str | None = None, *,
                 damage: str | None = None) -> None:
        self.name, self.index, self.total, self.packet, self.error = name, index, total, packet, error
        self.damage = damage
        super().__init__(self._message(index))

    def at(self, index: int) -> VideoDecodeError:
        """A read's error for frame ``index`` (at or after this one: its count is no surer): a VideoDecodeError, as
        the reader's other decode failures, whose class the tool service's client raises again and which pickles
        (this class, built from its fields, is neither)."""
        return VideoDecodeError(self._message(index))

    def _message(self, index: int) -> str:
        if self.damage is not None:
            return (f"{self.name}: frame {index} of {self.total} could not be decoded: the decoder met corrupt data "
                    f"{self.damage}, and gave no frame from frame {self.index} on")
        why = (f"failed on packet {self.packet} (in decode order; {self.error})" if self.error else
               f"dropped the frame of packet {self.packet} (in decode order; corrupt data?)")
        return (f"{self.name}: frame {index} of {self.total} could not be decoded: the decoder {why}, decoded before it "
                "came out, and without timestamps the frames from there on cannot be counted")


class CountCheck(Generic[T]):
    """Checks a count of the decoder's output (the reader's order without usable timestamps) against the packets fed:
    a frame the decoder drops without an error (FFmpeg's HEVC decoder, a picture whose slice header is corrupt) put
    every later frame under the index of the one before it. Each packet is tagged with its index in decode order
    (``tag_packet``). A counted frame is handed out (``ready``)
    once every packet fed before it came out has given its frame: the frames shown before it are among those; one
    that never comes out (by the end, or ``DROP_HORIZON`` frames later) is a ``VideoDecodeError`` for the frame.
    The frames shown before the first keyframe that the decoder may drop (``FrameIndex.lead``) are not waited on, nor
    the second field of a field pair (``FrameIndex.fields``), whose frame comes out on the first field's tag."""

    def __init__(self, name: str, total: int, lead: int, fields: tuple[int, ...] = ()) -> None:
        self._name, self._total, self._lead = name, total, lead
        self._fields, self._second = fields, frozenset(fields)  # (sorted, to count them; to look one up)
        self._start: int | None = None  # the first keyframe's tag, once it came out after a lead
        self._fed = 0  # packets fed whose tags are in `_pending` (or were)
        self._pending: set[int] = set()  # tags fed that have given no frame
        self._errors: dict[int, str] = {}  # tag -> the decoder's error for its packet (`failed`)
        self._out = 0  # frames out
        self._held: deque[tuple[int, T, set[int], int]] = deque()  # (index, what is handed out, waited on, out then)

    def came_out(self, frame: av.VideoFrame, fed: int) -> None:
        """``frame`` came out of the decoder after ``fed`` packets were fed."""
        self._pending.update(t for t in range(self._fed, fed) if t not in self._second and not self._lost(t))
        self._fed, self._out = fed, self._out + 1
        tag = frame_tag(frame)  # (None: none is taken off, so what waits fails, never shifts)
        self._pending.discard(tag)
        for _, _, waiting, _ in self._held:
            waiting.discard(tag)
        if self._held and self._held[0][2] and self._out - self._held[0][3] > DROP_HORIZON:
            raise self._dropped()

    def failed(self, tag: int, error: str) -> None:
        """The decoder failed the packet of ``tag`` with ``error``: it still waits (whether it was a frame, only the
        frames' count after it could tell), and a frame that waits on it names the error."""
        self._errors[tag] = error

    def started(self, frame: av.VideoFrame) -> None:
        """``frame`` is the first keyframe, after a lead: the packets before it and its leading pictures (tags up to
        the lead) may give no frame."""
        self._start = frame_tag(frame)
        self._pending = {t for t in self._pending if not self._lost(t)}

    def hold(self, index: int, item: T) -> None:
        """Hand out ``item`` (the frame just out, or what stands for it) as frame ``index`` once the packets fed
        before the frame came out have given their frames."""
        self._held.append((index, item, set(self._pending), self._out))

    def ready(self) -> Iterator[tuple[int, T]]:
        while self._held and not self._held[0][2]:
            index, item, _, _ = self._held.popleft()
            yield index, item

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def end(self) -> None:
        """The decoder gave its last frame: a frame still held waits on a packet that gave none."""
        if self._held:
            raise self._dropped()

    def _lost(self, tag: int) -> bool:  # (the lead counts frames: a tag's packet is frame tag - second fields before it)
        return self._start is not None and tag - bisect.bisect_left(self._fields, tag) <= self._lead \
            and tag != self._start

    def _dropped(self) -> FrameDropped:
        index, _, waiting, _ = self._held[0]
        packet = min(waiting)
        return FrameDropped(self._name, index, self._total, packet, self._errors.get(packet))
