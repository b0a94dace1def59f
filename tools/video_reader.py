"""``VideoReader``: a clip's scan, then frame reads by index (the decoding half of ``tools.video``, whose module
docstring gives the decisions; import it from there). A read maps the decoder's frames to indices by their timestamps
(``tools.video_decode``) or, where they are unusable, counts the decoder's output (``iter_frames``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import av
import numpy as np
from av.codec.context import Flags2
from av.video.reformatter import Interpolation

from tools.video_damage import DamageWatch, Place
from tools.video_decode import CountCheck, FrameDropped, OutOfOrder, ended_early, frames_by_pts
from tools.video_feed import Lapse, frames_fed
from tools.video_hdr import hdr_transfer, keyframe_hdr, stated_hdr
from tools.video_limits import DecodeLimit, check_decode_size
from tools.video_reformat import reformatter
from tools.video_rotation import clip_rotation
from tools.video_scan import (
    FrameIndex,
    Probe,
    Source,
    VideoDecodeError,
    VideoError,
    check_indices,
    demux,
    describe,
    mid_gop_error,
    open_container,
    reorder_decoder,
    scan,
    video_stream,
    wrapped,
)
from tools.video_seek import SEEK_FAILURES, SeekDamaged, SeekFailed, SeekMissed, seek_keyframe
from tools.video_threads import frame_threaded, release_decoder, watched_decoder


class VideoReader:
    """Decode chosen frames of a video path or bytes without holding the whole clip.

    Use as a context manager; ``meta`` is available after construction. The scan's demuxer stays
    open for the first ``read`` (``close`` or ``close_spare`` release it if no read comes); every
    later ``read`` opens its own, so memory is bounded by the requested frames plus the decoder's
    buffers and one reader may serve several threads.
    """

    def __init__(self, src: Source, *, decode_limit: int | DecodeLimit | None = None) -> None:
        self._src, self._limit = src, decode_limit  # bytes one read may decode (None: tools.video_limits')
        self._name = describe(src)
        container = open_container(src, self._name)
        try:  # the scan's and rotation's own reads of the file (its boxes, its tail) fail as FFmpeg's reads do
            with wrapped(self._name, "reading its container structure failed", src):
                meta, index = scan(container, self._name, src)
                rotation = clip_rotation(src, self._name, container)
                # (settled, transfer), swapped as one value; unsettled: the first decoded frame's (`hdr`)
                self._hdr = stated_hdr(video_stream(container, self._name).codec_context)
        except BaseException:
            container.close()
            raise
        self._coded = (meta.width, meta.height)  # the decoder's frame size, before the rotation
        if rotation in (90, 270):
            meta = replace(meta, width=meta.height, height=meta.width)
        self.meta = replace(meta, rotation=rotation)
        # (index, pts -> frame) swapped as one value: a read in another thread sees the old pair or the new
        self._order: tuple[FrameIndex, dict[int, int] | None] = (
            index, {p: i for i, p in enumerate(index.pts)} if index.pts is not None else None)
        self._seeks = True  # False once a seek missed: the container's seeking is not frame-accurate
        self._seek_failures = 0  # reads whose seek FFmpeg failed (SEEK_FAILURES of them also stop the seeking)
        self._closed, self._spare_lock = False, threading.Lock()
        self._spare: av.container.InputContainer | None = container  # the first read's demuxer
        if self.meta.frames < 2:  # the agent never decodes these: hold no open file for them
            self.close_spare()

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the reader (idempotent); later reads raise ``VideoError``."""
        self._closed = True
        self.close_spare()

    def close_spare(self) -> None:
        """Close the kept scan demuxer, if no read has taken it (a cached reader holds no open file)."""
        spare = self._take_spare()
        if spare is not None:
            spare.close()

    def _take_spare(self) -> av.container.InputContainer | None:
        with self._spare_lock:
            spare, self._spare = self._spare, None
        return spare

    def read(self, indices: Sequence[int], *, size: tuple[int, int] | None = None) -> np.ndarray:
        """Frames at ``indices`` (any order, repeats allowed) as uint8 RGB ``[K, H, W, 3]``; ``size``
        ``(width, height)`` converts them to that size instead of the stream's."""
        wanted_list = self._wanted(indices)
        width, height = self._size(size)
        check_decode_size(self._name, len(wanted_list), (width, height), self._limit)  # before allocating
        out = np.empty((len(wanted_list), height, width, 3), dtype=np.uint8)
        slots: dict[int, list[int]] = {}
        for pos, i in enumerate(wanted_list):
            slots.setdefault(i, []).append(pos)

        def put(i: int, rgb: np.ndarray) -> None:
            out[slots[i]] = rgb

        self._convert(sorted(slots), (width, height), put)
        return out

    def read_list(self, indices: Sequence[int], *, size: tuple[int, int] | None = None) -> list[np.ndarray]:
        """Like ``read``, as a list of separate ``[H, W, 3]`` arrays (a repeated index gives the same
        array): a cache can keep or drop each frame on its own, where views of one ``read`` array
        would keep the whole array alive while any of them is kept."""
        wanted_list = self._wanted(indices)
        frames: dict[int, np.ndarray] = {}

        def put(i: int, rgb: np.ndarray) -> None:
            frames[i] = np.ascontiguousarray(rgb)  # rows padded to FFmpeg's line alignment: one copy

        self._convert(sorted(set(wanted_list)), self._size(size), put)
        return [frames[i] for i in wanted_list]

    def hdr(self) -> str | None:
        """"PQ" or "HLG" for an HDR clip (its frames come back as decoded, not tone-mapped: ``tools.video_hdr``), None
        for SDR: from the headers, else from the first frame a read decoded, else (no read yet) from the first keyframe
        decoded now, once, within the decode limit (``VideoTooLargeError``; a keyframe that does not decode alone: None)."""
        if self._closed:
            raise VideoError(f"{self._name}: reader is closed")
        if not self._hdr[0]:
            check_decode_size(self._name, 1, self._coded, self._limit)
            container = open_container(self._src, self._name)
            try:
                with wrapped(self._name, "decoding failed (truncated or corrupt data)", self._src):
                    stream = video_stream(container, self._name)
                    self._hdr = (True, keyframe_hdr(stream, demux(container, stream), annex_b=self._order[0].annex_b))
            finally:
                container.close()
        return self._hdr[1]

    def _wanted(self, indices: Sequence[int]) -> list[int]:
        if self._closed:
            raise VideoError(f"{self._name}: reader is closed")
        wanted = check_indices(indices, self.meta)
        shifted = self._order[0].shifted
        late = [i for i in wanted if shifted is not None and i >= shifted[0]]
        if shifted is not None and late:
            raise VideoDecodeError(f"{self._name}: frame {late[0]} of {self.meta.frames} cannot be read: {shifted[1]}, "
                                   f"so the frames from {shifted[0]} on may come out under the wrong index or "
                                   "without their references")
        return wanted

    def _convert(self, wanted: list[int], size: tuple[int, int], put: Callable[[int, np.ndarray], None]) -> None:
        """Decode the sorted ``wanted`` frames and hand each one, as RGB at ``size``, to ``put``
        (again from the start when a seek or the timestamps turn out unusable)."""
        if not wanted:
            return
        check_decode_size(self._name, len(wanted), size, self._limit)  # read_list's (read checks its own)

        def fill(allow_seek: bool) -> None:
            for i, frame in self._decode(wanted, allow_seek=allow_seek):
                if not self._hdr[0]:  # the transfer the headers did not state (`hdr`)
                    self._hdr = (True, hdr_transfer(frame.color_trc))
                put(i, self.to_rgb(frame, size))

        try:
            if self._seeks:
                try:
                    fill(True)
                    return
                except SeekFailed:  # once may be a disk's passing error: a later read seeks again
                    self._seek_failures += 1
                    self._seeks = self._seek_failures < SEEK_FAILURES
                except SeekMissed as e:  # (SeekDamaged: corrupt data, the seek may be right)
                    self._seeks = self._seeks and isinstance(e, SeekDamaged)
            fill(False)
        except OutOfOrder:
            self._order = (replace(self._order[0], pts=None, keyframes=(), reorder=None), None)
            fill(False)

    def iter_frames(self, limit: int | None = None) -> Iterator[tuple[int, av.VideoFrame]]:
        """Decode from the start, yielding ``(index, frame)`` with ``index`` counting the decoder's output
        (the reader's order when the timestamps are unusable; ``read`` maps timestamps otherwise). The frames shown
        before the first keyframe (a clip cut mid-GOP, an open GOP's leading frames) are not yielded: its count starts
        there, at ``FrameIndex.lead`` or at the frames the decoder gave before it, whichever is more. The decoder drops
        some of them (HEVC; the scan counts those) or builds them on lost references (MPEG-4 part 2; H.264, told to
        show them all), and a count that missed one shifted every later frame. So did a frame the decoder drops later
        (corrupt data): each frame is yielded once the packets fed before it came out have given theirs, and one that
        cannot be is a ``VideoDecodeError`` (``tools.video_decode.CountCheck``). So is a frame the decoder damaged
        (``tools.video_damage.DamageWatch``): the iteration ends there, with a plain ``VideoDecodeError`` (which
        pickles, and whose class the tool service's client knows)."""
        try:
            for i, frame, damage in self._counted(limit):
                if damage is not None:
                    raise damage
                assert frame is not None  # (every frame is kept)
                yield i, frame
        except FrameDropped as e:
            raise e.at(e.index) from None

    def _counted(self, limit: int | None = None, keep: Callable[[int], bool] | None = None,
                 ) -> Iterator[tuple[int, av.VideoFrame | None, VideoDecodeError | None]]:
        """``iter_frames``' count, a frame the decoder damaged given with its error (the count goes on past it): each
        ``(index, frame, error)``, the frame None where ``keep`` (else every one) does not want it, so that the count
        check holds no frame it need not (``CountCheck``: up to ``DROP_HORIZON`` of them)."""
        index = self._order[0]
        known = index.reorder is not None  # else FFmpeg's probe guesses the reorder depth
        container, stream = self._decoder(index, probe="headers" if known else "decode")
        try:
            # a clip that starts on a keyframe has lost frames only where H.264 shows an open GOP's leading ones (not
            # after a keyframe an edit list discards: `FrameIndex.primed`)
            i, lost = 0, index.lead > 0 or (stream.codec_context.name == "h264" and not index.primed)
            # a frame the decoder drops shifts the count; each held as (the frame if kept, its place for the damage)
            check: CountCheck[tuple[av.VideoFrame | None, Place]] = CountCheck(self._name, self.meta.frames, index.lead,
                                                                               index.fields)
            mapping, misplaced = self._order[1], set[int]()  # (None: timestamps unusable); see `_settled`
            # without them no frame's place can be checked: after a failed packet, frame threads' order is no surer
            unchecked: dict[int, int] | None = {} if mapping is None and frame_threaded(stream.codec_context) else None
            watch = DamageWatch.of(self._name, self.meta.frames, stream, lead=index.lead)
            for frame, fed in self._frames_fed(container, stream, watch=watch, failed=check.failed):
                check.came_out(frame, fed)
                if lost:
                    if not frame.key_frame:  # (an intra frame too: the lead, counted to the keyframe, would misplace it)
                        watch.came_out(frame, lost=True)
                        i += 1
                        continue  # decoded on lost references, or not the frame its count would name
                    i, lost = max(i, index.lead), False
                    check.started(frame)
                place = watch.came_out(frame, i)
                # its timestamp names another frame: after damage, the decoder may put frames out of order (`_settled`)
                if mapping is not None and (mapping.get(frame.pts) if frame.pts is not None else None) != i:
                    misplaced.add(i)
                if limit is None or i < limit:
                    check.hold(i, (frame if keep is None or keep(i) else None, place))
                    if unchecked is not None:
                        unchecked[i] = fed
                i += 1
                yield from self._settled(check, watch, misplaced, unchecked)
                if limit is not None and i >= limit and not check.holding:
                    return
            yield from self._settled(check, watch, misplaced, unchecked)
            check.end()
            if i < self.meta.frames and (met := watch.failures()) is not None:  # the damage ended the decode early
                raise FrameDropped(self._name, i, self.meta.frames, -1, damage=met)
        finally:
            release_decoder(container, stream)

    @staticmethod
    def _settled(check: CountCheck[tuple[av.VideoFrame | None, Place]], watch: DamageWatch, misplaced: set[int],
                 unchecked: dict[int, int] | None = None,
                 ) -> Iterator[tuple[int, av.VideoFrame | None, VideoDecodeError | None]]:
        """The frames the count hands out now, each with its error: its damage, or, its index in ``misplaced`` (its
        timestamp names another frame than its count), once the decoder failed a packet or flagged a frame, that: after
        a failed packet HEVC's decoder with frame threads puts frames out of order (frame 2 before frame 1), and a
        frame decoded before the failed one, undamaged, was counted as another (the failed packet's blame,
        ``ErrorLag``, does not reach it). ``unchecked`` (no timestamps, frame threads; each held frame's index -> the
        packets fed when it came out): no place can be checked, and a frame that came out once a failed packet had
        gone in fails so (a raw HEVC stream handed out frame 2 as frame 1, and past the next keyframe frames 23-26 as
        others); one out before it is the decoder's output of the packets before the failure, in its order
        (``DamageWatch.failed_by``)."""
        for i, (frame, place) in check.ready():  # every packet decoded before it came out: its damage is known
            what = watch.damage(place)
            if what is None and i in misplaced and (met := watch.failures()) is not None:
                what = f"{met}; after it, frames came out of order (this one's timestamp is another frame's)"
            fed = unchecked.pop(i) if unchecked is not None else 0
            if what is None and unchecked is not None and watch.failed_by(fed) and (met := watch.failures()):
                what = (f"{met}; after a failed packet the decoder's frame threads may put frames out of order, and "
                        "without timestamps this one's place cannot be checked")
            yield i, frame, watch.error(i, what) if what is not None else None

    def _decoder(self, index: FrameIndex, container: av.container.InputContainer | None = None, *,
                 probe: Probe = "headers") -> tuple[av.container.InputContainer, av.video.stream.VideoStream]:
        """``container`` (else a fresh demuxer of the clip, opened with ``probe``) and its video stream, the decoder set
        up as the scan's ``index`` says (threads for its slices, its reorder depth); the demuxer closed on a failure."""
        container = container or open_container(self._src, self._name, probe)
        try:
            stream = video_stream(container, self._name, index.slices)
            reorder_decoder(stream, index)
            watched_decoder(stream.codec_context)  # frames name their packets' tags; HEVC's hashes checked
            # the reader counts its output: H.264 then gives the frames it has no references for (an open GOP's leading
            # ones), not dropping them; HEVC's decoder, told so, puts out every picture after a cut on lost references
            if index.pts is None and stream.codec_context.name == "h264":
                stream.codec_context.flags2 |= Flags2.show_all
        except BaseException:
            container.close()
            raise
        return container, stream

    def _size(self, size: tuple[int, int] | None) -> tuple[int, int]:
        if size is None:
            return self.meta.width, self.meta.height
        width, height = (int(v) for v in size)
        if width < 1 or height < 1:
            raise ValueError(f"size must be (width, height) of at least 1 pixel, got {size!r}")
        return width, height

    def to_rgb(self, frame: av.VideoFrame, size: tuple[int, int] | None = None) -> np.ndarray:
        """One decoded frame as uint8 RGB, upright, at the stream's size or at ``size`` (width, height)."""
        width, height = self._size(size)
        turns = self.meta.rotation // 90
        coded = (height, width) if turns % 2 else (width, height)
        with wrapped(self._name, "frame conversion to RGB failed"):
            rgb = reformatter().reformat(frame, format="rgb24", width=coded[0], height=coded[1],
                                          interpolation=Interpolation.AREA if coded != self._coded else None,
                                          threads=1)  # no swscale slice threads: tools/video_reformat.py
            out = rgb.to_ndarray()
        return np.ascontiguousarray(np.rot90(out, turns)) if turns else out

    def _packets_to_frames(self, container: av.container.InputContainer, stream: av.video.stream.VideoStream,
                           watch: DamageWatch, settling: Callable[[], bool], lapse: Lapse) -> Iterator[av.VideoFrame]:
        return (frame for frame, _ in self._frames_fed(container, stream, watch=watch, settling=settling, lapse=lapse))

    def _frames_fed(self, container: av.container.InputContainer, stream: av.video.stream.VideoStream, *,
                    watch: DamageWatch, failed: Callable[[int, str], None] | None = None,
                    settling: Callable[[], bool] | None = None, lapse: Lapse | None = None,
                    ) -> Iterator[tuple[av.VideoFrame, int]]:
        """The clip's decode from where ``container`` stands (``tools.video_feed.frames_fed``)."""
        return frames_fed(container, stream, self._name, self._src, watch, failed=failed, settling=settling, lapse=lapse,
                          annex_b=self._order[0].annex_b)

    def _decode(self, wanted: list[int], *, allow_seek: bool) -> Iterator[tuple[int, av.VideoFrame]]:
        """Yield ``(index, frame)`` for each sorted wanted index, seeking to keyframes when useful."""
        index, mapping = self._order
        if mapping is None or index.pts is None:  # (the mapping is of the pts: both or neither)
            self.close_spare()
            yield from self._decode_sequential(wanted)
            return
        pts, lead = index.pts, index.lead
        # its rewind to the start is a seek; a clip cut mid-GOP starts its decode on a fresh demuxer
        container = self._take_spare() if allow_seek and not lead else None
        if container is None:
            self.close_spare()
        rewind = container is not None
        container, stream = self._decoder(index, container)
        try:
            # the scan left it at the end; no keyframe at or before the first frame (a clip cut mid-GOP: EPERM
            if rewind and not seek_keyframe(container, stream, pts[0], self._name, self._src):  # from MP4) to seek
                release_decoder(container, stream)  # back to: a fresh demuxer instead
                container, stream = self._decoder(index)
            lapse = Lapse()  # (each of its decodes, a seek before it, on the same decoder: `frames_fed`)
            yield from frames_by_pts(container, stream, wanted, index, mapping, allow_seek=allow_seek,
                                     name=self._name, src=self._src, total=self.meta.frames,
                                     packets=lambda c, s, w, settle: self._packets_to_frames(c, s, w, settle, lapse))
        finally:
            release_decoder(container, stream)

    def _decode_sequential(self, wanted: list[int]) -> Iterator[tuple[int, av.VideoFrame]]:
        pending = iter(wanted)
        target = next(pending)
        keep = set(wanted).__contains__
        try:
            for i, frame, damage in self._counted(keep=keep):  # no limit: the first keyframe's count may pass the last
                if i > target:  # the first keyframe's count passed it: shown before the keyframe (lead: a lower bound)
                    raise mid_gop_error(self._name, target, self.meta.frames, i)
                if i == target:
                    if damage is not None:
                        raise damage
                    assert frame is not None  # (kept)
                    yield i, frame
                    following = next(pending, None)
                    if following is None:
                        return
                    target = following
        except FrameDropped as e:  # named for the frame the count could not confirm: the one wanted is no surer
            raise e.at(target) from None
        lead = self._order[0].lead  # (no keyframe came out: each frame lacks its references)
        raise mid_gop_error(self._name, target, self.meta.frames, lead) if target < lead else \
            ended_early(self._name, target, self.meta.frames)
