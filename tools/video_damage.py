"""Frames the decoder damaged and still gave: ``DamageWatch``.

A decoder that meets corrupt data in a picture conceals it (FFmpeg's error resilience: the damaged macroblocks
copied from a reference) and flags that one frame corrupt (``frame.is_corrupt``); or it fails the packet
(``InvalidDataError``) and gives no frame for it. Either way every frame decoded after it up to the next keyframe
may reference the damage (not a flagged B-frame's where no frame references one, ``UNREFERENCED_B``, once its
timestamps show it one; nor an H.264 or HEVC picture's that no other references, once the stream shows it one:
``tools.video_nonref``, ``tools.hevc_nonref``), and the decoder flags none of them: a reader that handed them out gave
a wrong picture under the frame's index, with no error. (Not a failed HEVC packet's, though: the decoder may put the
next packet's error out behind a frame, which PyAV then drops (``CodecContext.decode`` keeps the frames it has), so
that the frames after it are not checked.) The watch tags each packet with its place in decode order
(``tag_packet``) and calls a frame damaged when a flagged frame or a failed packet lies between the
last keyframe that came out before it and its own packet: its references (a frame shown before a keyframe but decoded
after it, an open GOP's leading picture, may reference the GOP before: it counts from the keyframe before).

Damage the decoder neither flags nor fails on (most bit flips in CABAC data decode as valid, wrong pictures) cannot
be seen here: nothing in an H.264 stream checks its pictures' data, nor in an HEVC one but its optional picture
hashes (``watched_decoder``); but for a run of zero bytes inside a NAL unit, which no stream may hold
(``tools.video_nal_check``, told to ``broken``). Nor can damage FFmpeg's H.264 slice threads
decode (they flag nothing): H.264 decodes without them (``tools.video_slices``)."""

from __future__ import annotations

import bisect

import av
from av.video.frame import PictureType

from tools.hevc_nonref import HevcReferences
from tools.video_nal_check import UNREFERENCED_NOTE
from tools.video_nonref import H264References
from tools.video_scan import MAX_REORDER_DEPTH, VideoDecodeError
from tools.video_tags import carried, frame_tag
from tools.video_threads import FRAME_THREADS, frame_threaded

DROP_HORIZON = 2 * MAX_REORDER_DEPTH + FRAME_THREADS
"""Frames out after one that waits on a packet fed before it came out: a frame the decoder still holds back comes out
within the frames its buffer holds (MAX_REORDER_DEPTH), those it reorders past them and those the frame threads hold
back (x264 with 16 B-frames, a reorder depth of 16 and 16 frame threads: 47); later, it was dropped."""


UNREFERENCED_B = frozenset({"mpeg1video", "mpeg2video", "mpeg4"})
"""Decoders of codecs in which no frame references a B-frame (MPEG-1 / MPEG-2 video, MPEG-4 part 2): a flagged one
damaged itself alone, once a frame decoded before it came out shown after it (a B-frame's later reference). Its type
is the damaged picture's own header: a P-frame whose coding type broke into B came out flagged as a B-frame, and the
frames after it were decoded against the reference before it, unflagged (its timestamp follows every frame decoded
before it). (H.264 / HEVC B-frames may be references: x264's B-pyramid.)"""


PARSED_TIMESTAMPS = frozenset({"mpegvideo", "m4v"})
"""FFmpeg's demuxers of raw MPEG-1 / 2 and MPEG-4 part 2 video: the timestamps are its parser's, from each picture
header's coding type (a damaged one's too), so they follow the decoder's output order and cannot show a flagged frame
a B-frame (``UNREFERENCED_B``): a P-frame broken into B came out before the P-frame held back, a later timestamp on
it."""


Place = tuple[int, int]
"""Where a frame that came out lies in decode order: its tag and that of the last keyframe out by then (-1: none),
from which its references run."""

_UNPLACED = (1 << 62, -1)  # (a frame without a tag: every damage so far is before it)


class DamageWatch:
    """Damage the decoder flagged or failed on, by decode-order tag, for one decode from where it started (a seek
    starts another). ``came_out`` for each frame out (not those a decode from a cut discards before its first
    keyframe) gives its ``Place``; ``failed`` for a packet whose decode raised. ``damage`` names what damaged a frame
    that came out, once every packet decoded before it came out (the count check, ``CountCheck``, waits for that);
    ``handed`` records the frame just out, handed out before then, which ``check`` fails once the damage shows
    (``waiting`` while some frame decoded before it has yet to come out)."""

    def __init__(self, name: str, total: int, *, b_referenced: bool = True, lead: int = 0, late: bool = True,
                 references: H264References | HevcReferences | None = None) -> None:
        self._name, self._total = name, total
        # the H.264 / HEVC pictures fed (``tools.video_feed``): a damaged one no other references damaged itself alone
        self.references = references
        self._says_unreferenced: set[int] = set()  # tags of such flagged pictures (`_unreferenced`)
        self._late = late  # the decoder may tell a packet's error packets late (frame threads: `_damaged`)
        self._lead = lead  # packets from the start whose failure damages nothing handed out (`failed`)
        self._b_referenced = b_referenced  # False: a flagged B-frame damaged itself alone (UNREFERENCED_B)
        self._keys: list[int] = []  # tags of the keyframes out
        self._out: set[int] = set()  # tags out, or failed (those before the last keyframe forgotten while none waits)
        # (lowest tag, highest tag, what, B): a flagged frame or failed packet; B, a flagged B-frame where nothing
        # references one: alone once a frame decoded before it came out shown after it (`_unreferenced`)
        self._bad: list[tuple[int, int, str, bool]] = []
        self._broken: list[tuple[int, int, str, bool]] = []  # (lowest tag, highest tag, what, its frame's alone):
        # damage the decoder did not tell (`broken`)
        self._unshown: dict[int, tuple[int, int]] = {}  # such a B-frame's tag -> (its floor, pts) until then
        self._last = _UNPLACED  # the place of the frame just out
        self._handed: list[tuple[int, Place, int]] = []  # (index, place, frames out then) handed before resolved
        self._count = 0  # frames out
        self._failed: int | None = None  # some packet's decode raised: the lowest tag it may have (`failed_by`)
        self._failed_key = -1  # the last keyframe out (its tag) when the last failure was told (`_damaged`)
        self._pending: list[tuple[int, str]] = []  # the lead's failures before a keyframe came out (`failed`)

    @classmethod
    def of(cls, name: str, total: int, stream: av.video.stream.VideoStream, *, lead: int = 0) -> DamageWatch:
        """A watch for a decode of ``stream`` (its decoder set up): a flagged B-frame fails alone where the demuxer read
        the timestamps (not ``PARSED_TIMESTAMPS``). ``lead``: a decode from the start of a clip that starts mid-GOP,
        its first ``lead`` frames shown before its first keyframe (``FrameIndex.lead``; `failed`)."""
        ctx = stream.codec_context
        parsed = not PARSED_TIMESTAMPS.isdisjoint(stream.container.format.name.split(","))
        references = H264References(ctx.extradata) if ctx.name == "h264" else \
            HevcReferences(ctx.extradata) if ctx.name == "hevc" else None
        return cls(name, total, b_referenced=ctx.name not in UNREFERENCED_B or parsed, lead=lead,
                   late=frame_threaded(ctx) and ctx.thread_count != 1, references=references)

    def came_out(self, frame: av.VideoFrame, index: int | None = None, *, lost: bool = False,
                 keyed: bool = True) -> Place:
        """``frame`` came out of the decoder (frame ``index`` of the clip, where known): its place. ``lost``: one the
        reader discards (decoded before the first keyframe of a decode from a cut), whose flags say nothing of later
        ones. Not ``keyed``: the scan knows no keyframe there, and a key frame is none (AV1 shows a frame again by a
        header alone: after a failed packet that should have replaced it, libdav1d shows the keyframe still in its
        slot, a key frame, under a later frame's timestamp)."""
        self._count += 1
        tag = frame_tag(frame)
        if tag is None:  # (every packet fed is tagged: a frame without one is no frame the watch can place)
            if frame.is_corrupt and not lost:
                self._bad.append((-1, _UNPLACED[0], self._what(index), False))
            self._last = _UNPLACED
            return self._last
        self._out.update(range(tag - carried(frame), tag + 1))
        if frame.pts is not None:  # shown after a flagged B-frame decoded after it: that one is a B-frame
            for b in [b for b, (floor, pts) in self._unshown.items() if floor <= tag < b and frame.pts > pts]:
                del self._unshown[b]
        if not lost and self._pending:  # the first frame of the decode's count: its keyframe, or it failed
            self._settle_lead(frame.key_frame or frame.pict_type == PictureType.I)
        if frame.key_frame and keyed and not lost:
            bisect.insort(self._keys, tag)
            if not self._handed:
                self._out = {t for t in self._out if t >= tag}
        at = bisect.bisect_right(self._keys, tag)
        self._last = (tag, self._keys[at - 1] if at else -1)
        if frame.is_corrupt and not lost:
            b, note = False, None
            if not self._b_referenced and frame.pict_type == PictureType.B and frame.pts is not None:
                self._unshown[tag], b = (self._last[1], frame.pts), True
            elif self.references is not None and self.references.says_unreferenced(tag):
                self._says_unreferenced.add(tag)
                b, note = True, UNREFERENCED_NOTE[self.references.codec]
            self._bad.append((tag, tag, self._what(index, b, note=note), b))
        return self._last

    def failed(self, tag: int, error: str, first: int | None = None) -> None:
        """The decode of the packet tagged ``tag`` raised ``error`` (corrupt data); with frame threads the error may
        be that of a packet fed before it, one from the one tagged ``first`` (``ErrorLag``); ``first`` past ``tag``: a
        discarded packet's, between the two. Not one of the first ``lead`` + 1 packets from the start (the
        first keyframe's and those of the frames shown before it, which no read hands out, as ``CountCheck`` counts
        them): their references are lost with the cut (HEVC's decoder, told to fail on what it finds
        (``watched_decoder``), fails them: no parameter set, no reference picture), and no frame from the keyframe on
        references them. But for the keyframe's own: while no keyframe has come out, such a failure waits
        (``_settle_lead``); a frame out of the count before one (the keyframe failed) makes it damage."""
        if self._lead and tag <= self._lead:  # (the lead frames and the keyframe: lead + 1 packets)
            self._out.add(tag)
            if not self._keys:
                self._pending.append((tag, error))
            return
        self._damaged(tag, error, tag if first is None else first)

    def _settle_lead(self, keyed: bool) -> None:
        """The first frame of the decode's count came out: ``keyed``, the first keyframe (or an intra frame), whose
        lead's failures damage nothing; else the keyframe's packet failed, which damages the frames after it."""
        pending, self._pending = self._pending, []
        for tag, error in pending if not keyed else ():
            self._damaged(tag, error, tag)

    def _damaged(self, tag: int, error: str, first: int) -> None:
        key = self._keys[-1] if self._keys else -1
        if self._late and self._failed is not None and key != self._failed_key:  # a failure in a GOP after one that
            # failed before: the frame threads still hold frames back (the damaged GOP's, put out late), and their
            # errors with them: this one may be that of any packet since the keyframe whose frame has not come out (one
            # thread tells a packet's error as it goes in: the reach would blame a keyframe held back to be shown late)
            first = min(first, next((t for t in range(max(key, 0), tag) if t not in self._out), first))
        self._failed_key = key
        where = f"packet {tag}" if first == tag else f"one of packets {first}-{tag}" if first < tag else \
            f"a discarded packet after packet {tag}"
        self._bad.append((first, tag, f"in {where} of the decode (decode order), which it failed on ({error}): the "
                                      "frames decoded after it up to the next keyframe may reference its frame", False))
        self._out.add(tag)
        low = min(first, tag)  # (a discarded packet's: after `tag`)
        self._failed = low if self._failed is None else min(self._failed, low)

    def broken(self, tag: int, what: str, *, discarded: bool = False, alone: bool = False) -> None:
        """The packet tagged ``tag`` is damaged (``what``) though the decoder may decode it with no flag and no error
        (``tools.video_nal_check``): the frames decoded from it (``discarded``: after it, as ``discarded``'s) up to the
        next keyframe, which reference its frame, are damaged (named where the decoder told nothing of them);
        ``alone``: a picture whose slices say no frame references it, its own frame only where the stream bears that
        out (``_confirmed``); never a discarded one, which the references do not keep (``H264References.skipped``): its
        nal_ref_idc may be the damage, and the frames after it then come out wrong (frame threads: unflagged)."""
        alone = alone and not discarded
        bad = (tag, tag if alone else tag - 1 if discarded else tag, what, alone)
        if bad not in self._broken:  # (a handover feeds a packet again)
            self._broken.append(bad)

    def discarded(self, frame: av.VideoFrame) -> None:
        """``frame``, of a packet tagged ``DISCARDED``, came out, and the reader drops it: flagged, it damages the
        frames decoded after it (a tag from the one it stood at) up to the next keyframe, which reference it."""
        value = frame.opaque
        if frame.is_corrupt and isinstance(value, tuple) and len(value) > 2:
            self._bad.append((value[2], value[2] - 1, "in a frame before the clip's start (an edit list's cut), which "
                              "it concealed and flagged: the frames decoded after it up to the next keyframe reference "
                              "it, not flagged", False))

    def dropped(self, what: str) -> None:
        """The decoder gave no frame, and no error, for a frame shown before the one just out (MPEG-4 part 2 skips a
        P-frame damaged into a B-frame, and the B-frames after it): ``what`` damages the frames decoded from the first
        packet since the last keyframe out that gave no frame yet (the dropped one's, or one before it), or else from
        the frame just out (its timestamp may be a parser's from the picture types, the damaged one's too (AVI): a
        frame decoded before the dropped one, under a later frame's timestamp), up to the next keyframe."""
        tag, floor = self._last
        gone = -1 if self._last == _UNPLACED else next(
            (t for t in range(max(floor, 0), tag) if t not in self._out), tag)
        self._bad.append((gone, gone, what, False))

    def skipped(self, tag: int) -> None:
        """The packet tagged ``tag`` is a leading picture (shown before it, decoded after it) of the keyframe the decode
        started at, which the decoder skips with no frame and no error where it references the GOP before (HEVC's
        RASL pictures; H.264's before the recovery point): no frame waits on it. HEVC's frames after a keyframe
        reference none of its leading pictures; H.264's decoder puts its frames out in presentation order, a leading
        one before the keyframe or never, and every frame handed out is shown from the keyframe on: once it is out,
        none is still to come (a flag or failure of one that came out is told as before)."""
        self._out.add(tag)

    def damage(self, place: Place, *, settled: bool = True) -> str | None:
        """What damaged the frame at ``place`` (every packet decoded before it out too: ``settled``), else None; not
        ``settled``, a flagged B-frame not yet shown to be one (``_unreferenced``) damages none but itself, and no
        damage the decoder did not tell (``broken``) is named yet."""
        tag, floor = place
        for lo, hi, what, b in self._bad:
            if b and lo != tag:
                alone = self._unreferenced(lo)
                if alone or (alone is None and not settled):
                    continue
            if lo <= tag and hi >= floor:
                return what
        if not settled:  # (a flag of a frame decoded before it, yet to come out, names the damage better)
            return None
        return next((what for lo, hi, what, alone in self._broken
                     if (lo == tag if alone and self._confirmed(lo) else lo <= tag and hi >= floor)), None)

    def _confirmed(self, tag: int) -> bool:
        """Whether the H.264 / HEVC picture of ``tag``, damaged with no flag (``broken``), whose slices say no picture
        references it, is one as the stream shows it (``H264References.confirmed``, ``HevcReferences.confirmed``): its
        header (nal_ref_idc, the NAL unit type) may be the damage."""
        return self.references is None or self.references.confirmed(tag) is True

    def _unreferenced(self, tag: int) -> bool | None:
        """Whether the flagged B-frame of ``tag`` is one: a frame decoded before it (from the last keyframe out then)
        came out shown after it; None while one of them has yet to come out (or was forgotten: `_out`). An H.264 / HEVC
        picture whose slices say no picture references it: whether the stream shows it one (``confirmed``)."""
        if tag in self._says_unreferenced and self.references is not None:
            return self.references.confirmed(tag)
        if tag not in self._unshown:
            return True
        return None if any(t not in self._out for t in range(max(self._unshown[tag][0], 0), tag)) else False

    def handed(self, index: int) -> None:
        """The frame just out goes out as frame ``index``; ``check`` fails it if damage before it shows later."""
        self._handed.append((index, self._last, self._count))

    @property
    def packets_failed(self) -> bool:
        """Whether the decode of some packet raised (``failed``): the decoder gave no frame for it."""
        return self._failed is not None

    def failed_by(self, fed: int) -> bool:
        """Whether a packet whose decode raised may have been among the first ``fed`` packets (tags below ``fed``): a
        frame that came out before then is the decoder's output of packets before the failure."""
        return self._failed is not None and fed > self._failed

    def before_failure(self, place: Place) -> bool:
        """Whether the frame at ``place`` was decoded before every packet whose decode raised (``failed``): with frame
        threads FFmpeg's HEVC decoder hands the failed packet's error back in the slot of the frame its thread put out
        (frame 7, decoded before failed packet 9), and that frame a round of the threads later, after frames 8-11:
        undamaged, shown out of order by the failure alone."""
        return self._failed is not None and place != _UNPLACED and place[0] < self._failed

    def failures(self) -> str | None:
        """What the decoder failed on or flagged so far, if anything (for an error that has another cause in sight)."""
        if self._bad:
            return self._bad[0][2]
        return f"in packet {self._pending[0][0]} of the decode ({self._pending[0][1]})" if self._pending else None

    @property
    def waiting(self) -> bool:
        return bool(self._handed)

    def check(self) -> None:
        """Fail the first frame handed out whose damage shows; forget those that can no longer be damaged."""
        keep = []
        for index, place, then in self._handed:
            what = self.damage(place, settled=False)
            if what is not None:
                raise self.error(index, what)
            tag, floor = place
            if self._count - then <= DROP_HORIZON and any(t not in self._out for t in range(max(floor, 0), tag)):
                keep.append((index, place, then))
            elif (what := self.damage(place)) is not None:
                raise self.error(index, what)
        self._handed = keep

    def end(self, lost: str | None = None) -> None:
        """The decoder gave its last frame: a frame handed out is resolved. ``lost``: what the decoder left out at the
        end (the clip's last frames, no error): a frame handed out that still waits on a frame decoded before it fails
        with it, as that frame may be among the lost ones, flagged."""
        self.check()
        if lost is not None:
            for index, (tag, floor), _ in self._handed:
                if any(t not in self._out for t in range(max(floor, 0), tag)):
                    raise self.error(index, lost)
        self._count += DROP_HORIZON + 1
        self.check()

    def error(self, index: int, what: str) -> VideoDecodeError:
        return VideoDecodeError(f"{self._name}: frame {index} of {self._total} could not be decoded: the decoder met "
                                f"corrupt data {what}")

    @staticmethod
    def _what(index: int | None, alone: bool = False, *, note: str | None = None) -> str:
        """``note``: the picture's slices say no frame references it (``UNREFERENCED_NOTE``)."""
        return (f"in {f'frame {index}' if index is not None else 'a frame'}, which it concealed and flagged"
                + (note if note is not None else
                   " (a B-frame, which no frame references, unless its header's picture type is the damage)" if alone
                   else ": the frames decoded after it up to the next keyframe reference it, not flagged"))
