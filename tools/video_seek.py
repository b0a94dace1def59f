"""Seeking a demuxer back to a keyframe for ``tools.video``'s reader, and the signals its decode raises to fall back
to decoding from the start (decisions: see ``tools.video``)."""

from __future__ import annotations

from pathlib import Path

import av
from av.video.frame import PictureType

from tools.video_errors import ffmpeg_eio, machine_failed, wrapped


class SeekMissed(Exception):
    """Internal: a seek landed past a wanted frame; decoding restarts without seeking."""


class SeekFailed(SeekMissed):
    """Internal: FFmpeg failed a seek call (``seek_keyframe``); this read decodes from the start, the next seeks again."""


class SeekDamaged(SeekMissed):
    """Internal: a seek's decode lacks a frame (a gap, or its end) where the decoder failed on a packet, which gives no
    frame: the damage, not the seek, may explain it. This read decodes from the start (which names the damage, or
    finds the seek at fault there: a gap from the start is the decoder's), the next seeks again: one corrupt packet
    stopped every later read of the clip seeking, far from it too."""


SEEK_FAILURES = 2
"""Reads with a seek FFmpeg failed after which a reader stops seeking (a passing EIO of a network disk fails one)."""


def seek_landed(frame: av.VideoFrame, index: int, key: int) -> bool:
    """Whether the first frame a seek to keyframe ``key`` gives at or past it is that keyframe, intra-coded.

    An MP4 without an ``stss`` box declares every sample a sync sample (the spec's reading, and FFmpeg's):
    right for all-intra clips, but some muxers leave the box out of clips with P-frames (MPEG-4 part 2).
    A seek to such a "keyframe" decoded it without its references (garbage, returned as the frame); a
    keyframe the decoder skipped or gave as an inter frame means the scan's keyframes are not real ones.
    """
    return index == key and (frame.key_frame or frame.pict_type == PictureType.I)


def seek_keyframe(container: av.container.InputContainer, stream: av.video.stream.VideoStream, pts: int, name: str,
                  src: str | Path | bytes) -> bool:
    """Seek back to the keyframe at or before ``pts``; False when FFmpeg fails the seek (its generic EPERM where no
    keyframe qualifies, or an error of the clip's data): the caller decodes from the start instead, where the frames
    still come out (that failure ended the read as a PermissionError, taken for the file's). So does FFmpeg's EIO,
    the disk's or the demuxer's (``ffmpeg_eio``): the decode from the start reads the file again, and an error that
    repeats there is classified there (a disk's EIO gone at once costs nothing). Another failure of the machine
    (``machine_failed``: too many open files, out of memory) is its ``VideoError``, as ``wrapped`` words it."""
    try:
        container.seek(pts, stream=stream, backward=True, any_frame=False)
    except (av.error.FFmpegError, OSError) as exc:
        if machine_failed(exc) and not ffmpeg_eio(exc):
            with wrapped(name, "seeking failed", src):
                raise
        return False
    return True
