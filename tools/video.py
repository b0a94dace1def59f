"""Video I/O with PyAV: metadata, bounded-memory frame sampling, crops, and image content blocks.

Frame ``i`` is the i-th frame in presentation order. Decisions taken where issue 2 was silent:

- Metadata comes from one demux pass (packets are read, never decoded): ``frames`` counts the
  video packets, so a container that declares 0 or a wrong frame count still gets the true
  one. If the container declares more frames than can be demuxed, the file is reported as
  truncated (``VideoDecodeError``) instead of being decoded partially.
- The same pass records every packet's presentation timestamp (pts); frame ``i`` is the frame
  whose pts is the i-th smallest. Variable frame rate therefore never shifts the index
  mapping. ``fps`` is the stream's average rate (frames / duration as a fallback), and frame
  labels use ``t = i / fps``; for variable-rate clips that time is approximate.
- Sampling decodes forward and converts only the wanted frames to RGB. When the next wanted
  frame lies past a keyframe that the decoder has not reached, the reader seeks to that
  keyframe, skipping whole GOPs. If the container's timestamps cannot be trusted (missing or
  duplicate pts, a seek landing after its target) it decodes from the start instead. Any decoder
  or demuxer error is a ``VideoDecodeError``; there is no silent partial decode.
- Each ``read`` opens its own demuxer (one reader may serve several threads); FFmpeg threading
  only from 640x360 up (below, it costs about 3x the CPU that concurrent agent runs need).
- Frames are rescaled to the stream's first size; rotation and pixel aspect ratio are ignored.
- ``uniform_indices`` rounds half to even (``uniform_indices(4, 3) == [0, 2, 3]``); -1 is a
  ``FrameIndexError``. Crops, resizing and labels live in ``tools.frames``, index sampling in
  ``tools.sampling`` (both re-exported here).
- RGB conversion reuses one swscale context per thread (a ``VideoReformatter``): converting each
  frame through its own fresh context spent ~0.2 ms per frame setting it up, half the decode time
  of a 256x256 clip. The pixels are bit-identical.
"""

from __future__ import annotations

import bisect
import io
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from tools.frames import (  # noqa: F401  (re-exported: the public video API)
    FULL_FRAME,
    MIN_CROP_SIZE,
    CropResult,
    crop_frame,
    encode_jpeg_data_url,
    frame_label,
    image_content_blocks,
    normalize_crop,
    resize_long_side,
)
from tools.sampling import (  # noqa: F401  (re-exported: the public video API)
    ALL_FRAMES_LIMIT,
    NEARBY_EXTRA_LIMIT,
    nearby_indices,
    uniform_indices,
)
from tools.video_write import write_video  # noqa: F401  (re-exported: the public video API)

THREADED_DECODE_PIXELS = 640 * 360

Source = str | Path | bytes


class VideoError(Exception):
    """Base class of every video input error; the message names the source and the problem."""


class VideoNotFoundError(VideoError):
    """The path does not exist or is not a regular file."""


class EmptyVideoError(VideoError):
    """The input has 0 bytes or contains no video frames."""


class VideoDecodeError(VideoError):
    """The input is not a video, is truncated or corrupt, or a frame could not be decoded."""


class FrameIndexError(VideoError):
    """A requested frame index is not an integer in ``[0, frames)``."""


@dataclass(frozen=True)
class VideoMeta:
    """Stream metadata. ``duration`` is in seconds; ``source`` is the path or ``<N bytes>``."""

    source: str
    frames: int
    fps: float
    width: int
    height: int
    duration: float


@dataclass(frozen=True)
class _Index:
    """Presentation-order pts of every frame (None: unusable timestamps) and keyframe positions."""

    pts: tuple[int, ...] | None
    keyframes: tuple[int, ...]


class _SeekMissed(Exception):
    """Internal: a wanted frame was skipped after seeking; decoding restarts without seeking."""


_THREAD = threading.local()


def _reformatter() -> VideoReformatter:
    """This thread's VideoReformatter (its swscale context is reused while frame sizes match)."""
    reformatter = _THREAD.__dict__.get("reformatter")
    if reformatter is None:
        reformatter = _THREAD.reformatter = VideoReformatter()
    return reformatter


def _describe(src: Source) -> str:
    if isinstance(src, bytes | bytearray | memoryview):
        return f"<{len(src)} bytes>"
    return str(src)


@contextmanager
def _wrapped(name: str, problem: str) -> Iterator[None]:
    """Turn PyAV / OS exceptions raised inside the block into typed ``VideoError``s."""
    try:
        yield
    except FileNotFoundError as exc:
        raise VideoNotFoundError(f"{name}: {problem}: no such file ({exc})") from exc
    except (av.error.FFmpegError, OSError, EOFError, ValueError, MemoryError) as exc:
        raise VideoDecodeError(f"{name}: {problem} ({type(exc).__name__}: {exc})") from exc


def _open(src: Source, name: str) -> av.container.InputContainer:
    if isinstance(src, bytes | bytearray | memoryview):
        if len(src) == 0:
            raise EmptyVideoError(f"{name}: video input is empty (0 bytes)")
        target: str | io.BytesIO = io.BytesIO(bytes(src))
    else:
        path = Path(src)
        if not path.exists():
            raise VideoNotFoundError(f"{name}: video file not found")
        if not path.is_file():
            raise VideoNotFoundError(f"{name}: not a regular file")
        if path.stat().st_size == 0:
            raise EmptyVideoError(f"{name}: video file is empty (0 bytes)")
        target = str(path)
    with _wrapped(name, "cannot be opened as a video (not a video file, or truncated/corrupt)"):
        return av.open(target, mode="r")


def _video_stream(container: av.container.InputContainer, name: str) -> av.video.stream.VideoStream:
    if not container.streams.video:
        raise VideoDecodeError(f"{name}: contains no video stream (not a video file)")
    stream = container.streams.video[0]
    # Frame threading pays off on large frames only; below 640x360 it triples the CPU per frame.
    if (stream.codec_context.width or 0) * (stream.codec_context.height or 0) >= THREADED_DECODE_PIXELS:
        stream.thread_type = "AUTO"
    return stream


def _scan(container: av.container.InputContainer, name: str) -> tuple[VideoMeta, _Index]:
    """One demux pass (no decoding): frame count, timestamps, keyframes, rate and duration."""
    stream = _video_stream(container, name)
    width, height = stream.codec_context.width, stream.codec_context.height
    if width <= 0 or height <= 0:
        raise VideoDecodeError(f"{name}: video stream has no frame size ({width}x{height})")
    packets, pts, key_pts = 0, [], []
    with _wrapped(name, "demuxing failed (truncated or corrupt file)"):
        for packet in container.demux(stream):
            if packet.size == 0:
                continue  # PyAV's end-of-stream flush packet
            packets += 1
            if packet.is_discard:
                continue
            pts.append(packet.pts)
            if packet.is_keyframe and packet.pts is not None:
                key_pts.append(packet.pts)
    frames = len(pts)
    if frames == 0:
        raise EmptyVideoError(f"{name}: video stream contains no frames")
    declared = int(stream.frames or 0)
    if declared > packets:
        raise VideoDecodeError(
            f"{name}: truncated file: the container declares {declared} frames but only {packets} "
            "could be read")
    usable = None not in pts and len(set(pts)) == frames
    index = _Index(None, ())
    if usable:
        ordered = sorted(pts)
        keys = sorted({bisect.bisect_left(ordered, p) for p in key_pts})
        index = _Index(tuple(ordered), tuple(keys))
    time_base = stream.time_base or Fraction(0)
    duration = 0.0
    if stream.duration and time_base:
        duration = float(stream.duration * time_base)
    elif container.duration:
        duration = container.duration / av.time_base
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    fps = float(rate) if rate and float(rate) > 0 and math.isfinite(float(rate)) else 0.0
    if fps <= 0 and duration > 0:
        fps = frames / duration
    if fps <= 0 and usable and frames > 1 and time_base:
        fps = (frames - 1) / float((index.pts[-1] - index.pts[0]) * time_base)
    if fps <= 0 or not math.isfinite(fps):
        raise VideoDecodeError(f"{name}: frame rate is unknown (no rate, duration or timestamps)")
    if duration <= 0:
        duration = frames / fps
    meta = VideoMeta(source=name, frames=frames, fps=fps, width=width, height=height, duration=duration)
    return meta, index


def probe(src: Source) -> VideoMeta:
    """Metadata of a video path or bytes (one demux pass, no decoding)."""
    with VideoReader(src) as reader:
        return reader.meta


def _check_indices(indices: Sequence[int], meta: VideoMeta) -> list[int]:
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


class VideoReader:
    """Decode chosen frames of a video path or bytes without holding the whole clip.

    Use as a context manager; ``meta`` is available after construction. Each ``read`` opens its
    own demuxer, so memory is bounded by the requested frames plus the decoder's buffers.
    """

    def __init__(self, src: Source) -> None:
        self._src = src
        self._name = _describe(src)
        container = _open(src, self._name)
        try:
            self.meta, self._index = _scan(container, self._name)
        finally:
            container.close()
        self._pts_to_index = ({p: i for i, p in enumerate(self._index.pts)}
                              if self._index.pts is not None else None)
        self._closed = False

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the reader (idempotent); later reads raise ``VideoError``."""
        self._closed = True

    def read(self, indices: Sequence[int]) -> np.ndarray:
        """Frames at ``indices`` (any order, repeats allowed) as uint8 RGB ``[K, H, W, 3]``."""
        if self._closed:
            raise VideoError(f"{self._name}: reader is closed")
        wanted_list = _check_indices(indices, self.meta)
        out = np.empty((len(wanted_list), self.meta.height, self.meta.width, 3), dtype=np.uint8)
        slots: dict[int, list[int]] = {}
        for pos, i in enumerate(wanted_list):
            slots.setdefault(i, []).append(pos)
        if not slots:
            return out
        wanted = sorted(slots)
        try:
            decoded = self._decode(wanted, allow_seek=True)
            for i, arr in decoded:
                out[slots[i]] = arr
        except _SeekMissed:
            for i, arr in self._decode(wanted, allow_seek=False):
                out[slots[i]] = arr
        return out

    def iter_frames(self, limit: int | None = None) -> Iterator[tuple[int, av.VideoFrame]]:
        """Decode from the start in presentation order, yielding ``(index, frame)``."""
        container = _open(self._src, self._name)
        try:
            stream = _video_stream(container, self._name)
            for i, frame in enumerate(self._packets_to_frames(container, stream)):
                if limit is not None and i >= limit:
                    return
                yield i, frame
        finally:
            container.close()

    def to_rgb(self, frame: av.VideoFrame) -> np.ndarray:
        """One decoded frame as uint8 RGB at the stream's size."""
        with _wrapped(self._name, "frame conversion to RGB failed"):
            rgb = _reformatter().reformat(frame, format="rgb24", width=self.meta.width, height=self.meta.height)
            return rgb.to_ndarray()

    def _packets_to_frames(self, container: av.container.InputContainer,
                           stream: av.video.stream.VideoStream) -> Iterator[av.VideoFrame]:
        with _wrapped(self._name, "decoding failed (truncated or corrupt data)"):
            for packet in container.demux(stream):
                yield from packet.decode()

    def _decode(self, wanted: list[int], *, allow_seek: bool) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(index, rgb)`` for each sorted wanted index, seeking to keyframes when useful."""
        if self._pts_to_index is None:
            yield from self._decode_sequential(wanted)
            return
        pts, keys, mapping = self._index.pts, self._index.keyframes, self._pts_to_index
        container = _open(self._src, self._name)
        try:
            stream = _video_stream(container, self._name)
            frames: Iterator[av.VideoFrame] | None = None
            last = -1  # index of the last frame produced by `frames`
            for target in wanted:
                k = keys[bisect.bisect_right(keys, target) - 1] if keys and keys[0] <= target else 0
                if frames is None or (allow_seek and k > last + 1):
                    if allow_seek and k > 0:
                        with _wrapped(self._name, f"seeking to frame {k} failed"):
                            container.seek(pts[k], stream=stream, backward=True, any_frame=False)
                    frames, last = self._packets_to_frames(container, stream), -1
                while last < target:
                    frame = next(frames, None)
                    if frame is None:
                        raise VideoDecodeError(f"{self._name}: frame {target} of {self.meta.frames} "
                                               "could not be decoded (stream ended early)")
                    i = mapping.get(frame.pts) if frame.pts is not None else None
                    if i is None or i > target:  # unknown timestamp, or the target was skipped
                        if allow_seek:
                            raise _SeekMissed
                        raise VideoDecodeError(f"{self._name}: frame {target} of {self.meta.frames} "
                                               f"could not be decoded (got pts {frame.pts} instead)")
                    if i < last:
                        continue  # leading frames of the GOP the seek landed in
                    last = i
                    if i == target:
                        yield i, self.to_rgb(frame)
        finally:
            container.close()

    def _decode_sequential(self, wanted: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        pending = iter(wanted)
        target = next(pending)
        for i, frame in self.iter_frames(limit=wanted[-1] + 1):
            if i == target:
                yield i, self.to_rgb(frame)
                target = next(pending, None)
                if target is None:
                    return
        raise VideoDecodeError(
            f"{self._name}: frame {target} of {self.meta.frames} could not be decoded (stream ended early)")


def read_frames(src: Source, indices: Sequence[int]) -> np.ndarray:
    """Frames at ``indices`` of a video path or bytes, uint8 RGB ``[K, H, W, 3]``."""
    with VideoReader(src) as reader:
        return reader.read(indices)


def read_all_frames(src: Source, max_frames: int | None = None) -> np.ndarray:
    """Every frame (or the first ``max_frames``) as uint8 RGB ``[T, H, W, 3]``."""
    if max_frames is not None and max_frames < 0:
        raise ValueError(f"max_frames must be >= 0, got {max_frames}")
    with VideoReader(src) as reader:
        meta = reader.meta
        n = meta.frames if max_frames is None else min(max_frames, meta.frames)
        out = np.empty((n, meta.height, meta.width, 3), dtype=np.uint8)
        count = 0
        for i, frame in reader.iter_frames(limit=n):
            out[i] = reader.to_rgb(frame)
            count = i + 1
        if count < n:
            raise VideoDecodeError(f"{meta.source}: only {count} of {n} frames could be decoded")
        return out
