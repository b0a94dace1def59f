"""The frame-accurate part of `VideoReader.read` (tools/video_reader.py; tools/video.py gives the decisions):
decode a demuxer's video stream forward, seeking to keyframes when allowed, and hand out each wanted frame under
the index its timestamp gives it, checking every decoded frame against the scan. A surprise is an exception the
reader answers: ``SeekFailed`` / ``SeekMissed`` (decode again from the start), ``OutOfOrder`` (count the
decoder's output order instead), ``VideoDecodeError`` (the frame cannot be had). Counting the output, ``CountCheck``
finds the frames a drop would shift."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterator

import av
from av.video.frame import PictureType

from tools.video_scan import MAX_REORDER_DEPTH, FrameIndex, Source, VideoDecodeError, mid_gop_error
from tools.video_seek import SeekFailed, SeekMissed, seek_keyframe, seek_landed


class OutOfOrder(Exception):
    """Decoding from the start, timestamps out of presentation order (AVI): count output order."""


def ended_early(name: str, target: int, total: int) -> VideoDecodeError:
    """The error for frame ``target`` of a clip of ``total`` frames that a decode from the start never reached."""
    return VideoDecodeError(f"{name}: frame {target} of {total} could not be decoded (stream ended early)")


def frames_by_pts(container: av.container.InputContainer, stream: av.video.stream.VideoStream, wanted: list[int],
                  index: FrameIndex, mapping: dict[int, int], *, allow_seek: bool, name: str, src: Source, total: int,
                  packets: Callable[[av.container.InputContainer, av.video.stream.VideoStream], Iterator[av.VideoFrame]],
                  ) -> Iterator[tuple[int, av.VideoFrame]]:
    """Yield ``(index, frame)`` for each sorted ``wanted`` index of a clip of ``total`` frames from ``container``
    (positioned at its start), ``mapping`` giving each pts its frame index; ``packets`` decodes the container's
    stream from where it stands (the reader's, so that a test can stand in for it)."""
    pts, keys, lead = index.pts, index.keyframes, index.lead
    assert pts is not None  # `mapping` is built from them (VideoReader._decode)
    frames: Iterator[av.VideoFrame] | None = None
    last = -1  # index of the last frame produced by `frames`
    lost = False  # decoding a clip cut mid-GOP from its start: no keyframe has come out yet
    landed: int | None = None  # the keyframe a seek went to, until its frame has come out intra-coded
    for target in wanted:
        k = keys[bisect.bisect_right(keys, target) - 1] if keys and keys[0] <= target else 0
        if frames is None or (allow_seek and k > last + 1):
            if allow_seek and k > 0:
                if not seek_keyframe(container, stream, pts[k], name, src):
                    raise SeekFailed  # FFmpeg failed the seek: decode from the start instead
                landed = k
            frames, last, lost = packets(container, stream), -1, lead > 0 and k == 0
        while last < target:
            frame = next(frames, None)
            if frame is None:
                if lost and target < lead:  # no keyframe came out (H.264 drops the frames before it)
                    raise mid_gop_error(name, target, total, lead)
                if allow_seek:  # a seek (or the rewind) that landed past its frames (MPEG-TS)
                    raise SeekMissed
                raise ended_early(name, target, total)
            i = mapping.get(frame.pts) if frame.pts is not None else None
            if lost:
                if i is not None and i < lead and not (frame.key_frame or frame.pict_type == PictureType.I):
                    continue  # decoded on lost references (MPEG-4 part 2: gray ones): not that frame
                lost = False
            if i is None or (last >= 0 and i != last + 1):  # unknown pts, or not the next frame
                if allow_seek:
                    raise SeekMissed
                if i is None or i <= last:  # timestamps out of presentation order
                    raise OutOfOrder
                # a gap from the start: frames the decoder dropped; the timestamps still label the rest
            if i > target:  # the first frame decoded lies past the target
                if target < lead:
                    raise mid_gop_error(name, target, total, lead)
                if allow_seek:
                    raise SeekMissed
                raise VideoDecodeError(f"{name}: frame {target} of {total} "
                                       f"could not be decoded (got pts {frame.pts} instead)")
            if landed is not None and i >= landed:
                if not seek_landed(frame, i, landed):
                    raise SeekMissed
                landed = None
            last = i
            if i == target:
                yield i, frame


class FrameDropped(VideoDecodeError):
    """Counting the decoder's output, frame ``index`` could not be had: the decoder gave no frame for ``packet``
    (decode order), fed before that frame came out."""

    def __init__(self, name: str, index: int, total: int, packet: int) -> None:
        self.name, self.index, self.total, self.packet = name, index, total, packet
        super().__init__(self._message(index))

    def at(self, index: int) -> VideoDecodeError:
        """A read's error for frame ``index`` (at or after this one: its count is no surer): a VideoDecodeError, as
        the reader's other decode failures, whose class the tool service's client raises again and which pickles
        (this class, built from its fields, is neither)."""
        return VideoDecodeError(self._message(index))

    def _message(self, index: int) -> str:
        return (f"{self.name}: frame {index} of {self.total} could not be decoded: the decoder dropped the frame of "
                f"packet {self.packet} (in decode order; corrupt data?), decoded before it came out, and without "
                "timestamps the frames from there on cannot be counted")


FRAME_THREADS = 16
"""The most frame threads FFmpeg's automatic thread count takes (``MAX_AUTO_THREADS``; 16 from 15 cores on): each
one past the first holds a frame back after the decoder's own reorder delay."""

DROP_HORIZON = 2 * MAX_REORDER_DEPTH + FRAME_THREADS
"""Frames out after one that waits on a packet fed before it came out: a frame the decoder still holds back comes out
within the frames its buffer holds (MAX_REORDER_DEPTH), those it reorders past them and those the frame threads hold
back (x264 with 16 B-frames, a reorder depth of 16 and 16 frame threads: 47); later, it was dropped."""


def tag_packet(packet: av.Packet, index: int) -> None:
    """Tag ``packet`` with its ``index`` in decode order, which its frame gives back (``CountCheck``) where the decoder
    copies it (``Flags.copy_opaque``). A new object for each: PyAV keeps an opaque value under its id() and forgets
    it when any packet or frame holding it is freed, so a shared one (a cached small int) in two decodes at once was
    lost to the one that freed it first."""
    packet.opaque = (index,)


def _frame_tag(frame: av.VideoFrame) -> int | None:
    value = frame.opaque
    return value[0] if isinstance(value, tuple) else None  # (None: not tagged)


class CountCheck:
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
        self._out = 0  # frames out
        self._held: deque[tuple[int, av.VideoFrame, set[int], int]] = deque()  # (index, frame, waited on, out then)

    def came_out(self, frame: av.VideoFrame, fed: int) -> None:
        """``frame`` came out of the decoder after ``fed`` packets were fed."""
        self._pending.update(t for t in range(self._fed, fed) if t not in self._second and not self._lost(t))
        self._fed, self._out = fed, self._out + 1
        tag = _frame_tag(frame)  # (None: none is taken off, so what waits fails, never shifts)
        self._pending.discard(tag)
        for _, _, waiting, _ in self._held:
            waiting.discard(tag)
        if self._held and self._held[0][2] and self._out - self._held[0][3] > DROP_HORIZON:
            raise self._dropped()

    def started(self, frame: av.VideoFrame) -> None:
        """``frame`` is the first keyframe, after a lead: the packets before it and its leading pictures (tags up to
        the lead) may give no frame."""
        self._start = _frame_tag(frame)
        self._pending = {t for t in self._pending if not self._lost(t)}

    def hold(self, index: int, frame: av.VideoFrame) -> None:
        """Hand out ``frame`` as frame ``index`` once the packets fed before it came out have given their frames."""
        self._held.append((index, frame, set(self._pending), self._out))

    def ready(self) -> Iterator[tuple[int, av.VideoFrame]]:
        while self._held and not self._held[0][2]:
            index, frame, _, _ = self._held.popleft()
            yield index, frame

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
        return FrameDropped(self._name, index, self._total, min(waiting))
