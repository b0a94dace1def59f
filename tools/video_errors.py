"""The video input errors, and ``wrapped``, which turns PyAV / OS exceptions into them (re-exported by
``tools.video``; import from there).

Which failed reads of a clip are the machine's, not the clip's:

An I/O error of the disk or network file system (EIO, a stale NFS handle, a timed-out network read), too many open
files (the process's EMFILE or the system's ENFILE), a resource briefly unavailable (EAGAIN) or memory that ran short
(ENOMEM, a MemoryError) says nothing of the clip's bytes. Before, ``wrapped`` worded them as the clip's own fault
("cannot be opened as a video (not a video file, or truncated/corrupt)"), which sent a user to re-render a good clip;
they now read "cannot be read (OSError: [Errno 5] Input/output error: ...)", the error class and errno kept for
``graph.batch_resume.environmental``, which retries them.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

import av

MACHINE_ERRNOS = frozenset({errno.EIO, errno.ENOMEM, errno.ENFILE, errno.EMFILE, errno.EAGAIN, errno.ESTALE,
                            errno.ETIMEDOUT})
"""Errno values of a failed read that say the machine failed it, not that the clip's bytes are bad."""


def machine_failed(exc: BaseException) -> bool:
    """True for a MemoryError (with or without an errno) or an OSError whose errno is in ``MACHINE_ERRNOS``."""
    return isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno in MACHINE_ERRNOS)


class VideoError(Exception):
    """Base class of every video input error; the message names the source and the problem."""


class VideoNotFoundError(VideoError):
    """The path does not exist, is not a regular file, may not be read (a PermissionError), or the machine failed
    its read (an I/O error, too many open files, out of memory: ``machine_failed``)."""


class EmptyVideoError(VideoError):
    """The input has 0 bytes or contains no video frames."""


class VideoDecodeError(VideoError):
    """The input is not a video, is truncated or corrupt, or a frame could not be decoded."""


class FrameIndexError(VideoError):
    """A requested frame index is not an integer in ``[0, frames)``."""


@contextmanager
def wrapped(name: str, problem: str) -> Iterator[None]:
    """Turn PyAV / OS exceptions raised inside the block into typed ``VideoError``s."""
    try:
        yield
    except FileNotFoundError as exc:
        raise VideoNotFoundError(f"{name}: {problem}: no such file ({exc})") from exc
    except (av.error.FFmpegError, OSError, EOFError, ValueError, MemoryError) as exc:
        if isinstance(exc, PermissionError) or machine_failed(exc):  # FFmpeg's too (mode 000, EIO): no corrupt clip
            raise VideoNotFoundError(f"{name}: cannot be read ({type(exc).__name__}: {exc})") from exc
        raise VideoDecodeError(f"{name}: {problem} ({type(exc).__name__}: {exc})") from exc
