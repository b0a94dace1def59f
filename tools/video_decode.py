"""The frame-accurate part of `VideoReader.read` (tools/video_reader.py; tools/video.py gives the decisions):
decode a demuxer's video stream forward, seeking to keyframes when allowed, and hand out each wanted frame under
the index its timestamp gives it, checking every decoded frame against the scan. A surprise is an exception the
reader answers: ``SeekFailed`` / ``SeekMissed`` (decode again from the start), ``OutOfOrder`` (count the
decoder's output order instead), ``VideoDecodeError`` (the frame cannot be had)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

import av
from av.video.frame import PictureType

from tools.video_scan import FrameIndex, Source, VideoDecodeError, mid_gop_error
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
