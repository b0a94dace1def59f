"""The video input errors, and ``wrapped``, which turns PyAV / OS exceptions into them (re-exported by
``tools.video``; import from there).

Which failed reads of a clip are the machine's, not the clip's:

An I/O error of the disk or network file system (EIO, a stale NFS handle, a timed-out network read), too many open
files (the process's EMFILE or the system's ENFILE), a resource briefly unavailable (EAGAIN) or memory that ran short
(ENOMEM, a MemoryError) says nothing of the clip's bytes. Before, ``wrapped`` worded them as the clip's own fault
("cannot be opened as a video (not a video file, or truncated/corrupt)"), which sent a user to re-render a good clip;
they now read "cannot be read (OSError: [Errno 5] Input/output error: ...)", the error class and errno kept for
``environmental``, which a resume reads to retry them (``graph.batch_retry``).

Except FFmpeg's own ENOMEM while the machine can still reserve `FFMPEG_MAX_ALLOC` bytes (``ffmpeg_refused``): FFmpeg
refuses any allocation past that size (``av_max_alloc``), and with Linux's default overcommit a smaller one does not
fail for want of memory (the OOM killer acts instead), so the failed request was one no frame needs: a size from the
clip's corrupt bytes (a fragmented MP4 whose ``trun`` gives a sample of 3 GB). That is the clip's fault, a
``VideoDecodeError``: it was called the machine's, a 503 machine fault from the tool service (the item a tool
failure) and retried by every ``--retry-ineligible``. Where the machine cannot reserve that much (an address-space
limit, strict overcommit), FFmpeg's ENOMEM stays the machine's: real shortage is never blamed on the clip.

And except FFmpeg's EIO where FFmpeg's demux of the file fails with EIO again and every byte of it reads back
(``demuxer_io_error``): FFmpeg's Matroska demuxer gives EIO for an element that does not parse (an ID byte flipped),
with no read failing, every time. That clip was a machine fault too. A read that fails again is the disk's, as
before. An EIO that a second demux does not repeat is the disk's too (a network disk that dropped out for a moment):
it was called the clip's, final, where the file merely read back a moment later.

And except FFmpeg's EPERM (``ffmpeg_generic``): FFmpeg's -1, returned by many of its functions as a generic failure, is
AVERROR(EPERM), which PyAV raises as a PermissionError. Worded "cannot be read (PermissionError: ...)", it read as a
clip without read permission, retried by every ``--retry-ineligible`` (``unreached``) and failing the
same way. Where the file reads back (or no file was being read) it is the clip's ``VideoDecodeError``.

A fault is recorded as text (a row's reason, "stage: video: VideoNotFoundError: clip.mp4: video file not found"), so
which of these a resume may retry is read back from the words: ``unreached`` and ``environmental`` read the words that
``not_found`` and ``unreadable`` write, here and nowhere else. A clip gone between the size check and FFmpeg's read was
worded "...: no such file (...)", which ``unreached`` (then in ``graph.batch_resume``, matching "video file not found"
by its own copy of the text) did not know: once the clip was back, ``--retry-ineligible`` never scored it. Both are
``not_found`` now; rows written with the old words are still read as unreached. A FileNotFoundError is a clip gone
only where the clip no longer reads back (``vanished``): FFmpeg's concat demuxer gives it for a file an ffconcat list
names, the clip itself there, and that is the clip's ``VideoDecodeError`` (as unreached, it was retried for ever).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import av
import numpy as np

from tools.file_kinds import clip_kind
from tools.video_open import av_open

MACHINE_ERRNOS = frozenset({errno.EIO, errno.ENOMEM, errno.ENFILE, errno.EMFILE, errno.EAGAIN, errno.ESTALE,
                            errno.ETIMEDOUT})
"""Errno values of a failed read that say the machine failed it, not that the clip's bytes are bad."""


FFMPEG_MAX_ALLOC = 2**31 - 1
"""FFmpeg's default ``av_max_alloc``: it refuses (ENOMEM) any larger allocation, whatever memory is free."""


def can_reserve(size: int) -> bool:
    """Whether this process can allocate ``size`` bytes now (reserved, never touched, freed at once)."""
    try:
        np.empty(size, dtype=np.uint8)
    except MemoryError:
        return False
    return True


def ffmpeg_refused(exc: BaseException) -> bool:
    """True for FFmpeg's ENOMEM while this process can reserve `FFMPEG_MAX_ALLOC` bytes: the request FFmpeg failed
    came from the clip's bytes, not from a machine short of memory (module docstring)."""
    return isinstance(exc, av.error.MemoryError) and can_reserve(FFMPEG_MAX_ALLOC)


def machine_failed(exc: BaseException) -> bool:
    """True for a MemoryError (with or without an errno; FFmpeg's only when not `ffmpeg_refused`) or an OSError whose
    errno is in ``MACHINE_ERRNOS``."""
    if isinstance(exc, av.error.MemoryError):
        return not ffmpeg_refused(exc)
    return isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno in MACHINE_ERRNOS)


class VideoError(Exception):
    """Base class of every video input error; the message names the source and the problem."""


class VideoNotFoundError(VideoError):
    """The path does not exist, is not a regular file (``not_a_file``), may not be read (a PermissionError), or the
    machine failed its read (an I/O error, too many open files, out of memory: ``machine_failed``)."""


NOT_FOUND = "video file not found"
"""The words of a clip that is not there (``not_found``); ``unreached`` reads them back."""

_OLD_NOT_FOUND = ": no such file ([Errno 2] "
"""How ``wrapped`` worded a clip gone before FFmpeg's read, in rows written before it said ``NOT_FOUND``."""

_ERRNO = re.compile(r"\(\w+: \[Errno (\d+)\] ")


def not_found(name: str) -> VideoNotFoundError:
    """The error of clip ``name`` that does not exist (or no longer does: gone between its size check and its read)."""
    return VideoNotFoundError(f"{name}: {NOT_FOUND}")


NOT_A_FILE = ", not a video file"
"""The end of the words of a path that names a folder (or a pipe, a socket, a device) where a clip should be
(``not_a_file``); ``unreached`` reads them back."""

_OLD_NOT_A_FILE = ": not a regular file"
"""How ``tools.video_scan`` worded such a path in rows written before ``NOT_A_FILE``."""


def not_a_file(name: str, mode: int) -> VideoNotFoundError:
    """The error of path ``name`` whose ``st_mode`` ``mode`` is no regular file: it says what is there. It is the
    path's fault, not a clip's bytes (worded "not a regular file", it read as a final video fault; ``unreached``
    now retries it once a file can be read there, as a clip not found). The kind is named in its clip words
    (`tools.file_kinds.clip_kind`: "a directory", "a named pipe (FIFO)"), which rows hold."""
    return VideoNotFoundError(f"{name}: is {clip_kind(mode)}{NOT_A_FILE}")


def unreadable(name: str, exc: BaseException) -> VideoNotFoundError:
    """The error of clip ``name`` whose read ``exc`` failed without a fault of its bytes (no permission, a bad name, the
    machine's ``machine_failed``): worded "cannot be read (OSError: [Errno 5] ...)", the class and errno kept for
    ``unreached`` and ``environmental``."""
    return VideoNotFoundError(f"{name}: cannot be read ({type(exc).__name__}: {exc})")


def clip_file(path: Path, name: str) -> os.stat_result:
    """The ``stat`` of clip ``path`` (``name`` in errors) when it is a regular file, else the error every read of a
    clip raises (the in-process reader's, the tool client's upload, the tool service's path check): `not_found`,
    `unreadable` (a name too long, a NUL byte, no permission to a folder) or `not_a_file` (a folder, a pipe)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise not_found(name) from None
    except (OSError, ValueError) as exc:
        raise unreadable(name, exc) from None
    if not stat.S_ISREG(st.st_mode):
        raise not_a_file(name, st.st_mode)
    return st


def unreached(message: str) -> bool:
    """True for a recorded video fault's message that says the clip could not be reached, not that its bytes are bad:
    ``not_found``'s words (or the old "no such file ([Errno 2] ..."), ``not_a_file``'s (a folder at the clip's path;
    or the old "not a regular file"), or ``unreadable``'s for a PermissionError (whether the clip's folder or the
    clip itself denied the read)."""
    return (message.endswith((NOT_FOUND, NOT_A_FILE, _OLD_NOT_A_FILE)) or _OLD_NOT_FOUND in message
            or "(PermissionError: " in message)


def environmental(message: str) -> bool:
    """True for a recorded video fault's message whose read failed for the machine: the error ``unreadable`` names in
    it ("(OSError: [Errno 5] Input/output error: ...)") carries a ``MACHINE_ERRNOS`` errno, or is a MemoryError (an
    allocation that failed, with or without an errno)."""
    return "(MemoryError: " in message or any(int(n) in MACHINE_ERRNOS for n in _ERRNO.findall(message))


def over_decode_limit(message: str) -> bool:
    """True for a recorded video fault's message of a clip refused for the decode limit (``VideoTooLargeError``, from
    the in-process reader or the tool service's; its class named first, as ``graph.nodes.faults.to_fault`` writes
    it, or after "VideoError: " in a row written before the client raised the service's error as its own)."""
    return message.startswith(("VideoTooLargeError: ", "VideoError: VideoTooLargeError: "))


class EmptyVideoError(VideoError):
    """The input has 0 bytes or contains no video frames."""


class VideoDecodeError(VideoError):
    """The input is not a video, is truncated or corrupt, or a frame could not be decoded."""


class FrameIndexError(VideoError):
    """A requested frame index is not an integer in ``[0, frames)``."""


class VideoTooLargeError(VideoError):
    """A decode request's RGB frames would take more bytes than the decode limit allows (``tools.video_limits``)."""


def fault_label(exc: VideoError) -> str:
    """What ``exc`` says is wrong, in a word or two for a table cell: "not found", "not a file", "unreadable" (no
    permission, a read the machine failed), "empty", "undecodable" (the clip's bytes), else "unusable"."""
    message = str(exc)
    if isinstance(exc, VideoNotFoundError):
        return ("not found" if message.endswith(NOT_FOUND) else "not a file" if message.endswith(NOT_A_FILE)
                else "unreadable")
    if isinstance(exc, EmptyVideoError):
        return "empty"
    return "undecodable" if isinstance(exc, VideoDecodeError) else "unusable"


def served_error(video_error: dict) -> VideoError:
    """The VideoError a tool service answered with (the ``video_error`` of its 422 or 413, tools/service_frames.py, or
    of a path request's 404, tools/service.py: the class's name and the message), raised by the client as decoding the
    clip in-process raises it, so the fault's reason is worded alike ("VideoTooLargeError: ..." of a clip over the
    service reader's decode limit read "VideoError: VideoTooLargeError: ..."); a class it does not know is a
    VideoError whose message starts with that name. A FrameIndexError is never served (its indices are the
    request's: a 400)."""
    kind, message = str(video_error.get("type", "VideoError")), str(video_error.get("message", ""))
    known = {c.__name__: c for c in (VideoNotFoundError, EmptyVideoError, VideoDecodeError, VideoTooLargeError)}
    return known[kind](message) if kind in known else VideoError(f"{kind}: {message}")


def reads_back(src: str | Path | bytes | bytearray | memoryview) -> bool:
    """Whether every byte of ``src`` can be read now (bytes in memory: always)."""
    if isinstance(src, bytes | bytearray | memoryview):
        return True
    try:
        with open(src, "rb") as fh:
            while fh.read(1 << 20):
                pass
    except OSError:
        return False
    return True


def demux_fails_with_eio(src: str | Path | bytes | bytearray | memoryview) -> bool:
    """Whether FFmpeg's demux of ``src`` from its start (every packet read, none decoded) fails with EIO; bytes in
    memory: always (no disk to fail, so an EIO of theirs is their data's), without a second demux."""
    if isinstance(src, bytes | bytearray | memoryview):
        return True
    try:
        with av_open(src) as container:  # as the reader opens it (a tiny MPEG-TS clip: named so)
            for _ in container.demux():
                pass
    except av.error.FFmpegError as exc:
        return exc.errno == errno.EIO
    except (OSError, EOFError, ValueError, IndexError, MemoryError):  # IndexError: PyAV's flush of a late stream
        return False
    return False


def ffmpeg_eio(exc: BaseException) -> bool:
    """True for FFmpeg's EIO: the disk's, or a demuxer's word for data it cannot parse (`demuxer_io_error`)."""
    return isinstance(exc, av.error.FFmpegError) and exc.errno == errno.EIO


def demuxer_io_error(exc: BaseException, src: str | Path | bytes | bytearray | memoryview | None) -> bool:
    """True for FFmpeg's EIO that a second demux of ``src`` repeats while ``src`` reads back whole: a demuxer's word
    for data it cannot parse (module docstring), not the disk's; one the demux does not repeat was the disk's."""
    return ffmpeg_eio(exc) and src is not None and demux_fails_with_eio(src) and reads_back(src)


def read_failed_by_machine(exc: BaseException, src: str | Path | bytes | bytearray | memoryview | None) -> bool:
    """`machine_failed` for a read of ``src``: except FFmpeg's EIO that a second demux repeats on data that reads back
    (`demuxer_io_error`)."""
    return machine_failed(exc) and not demuxer_io_error(exc, src)


def ffmpeg_generic(exc: BaseException, src: str | Path | bytes | bytearray | memoryview | None) -> bool:
    """True for FFmpeg's EPERM where no file read was refused: FFmpeg returns -1, which is AVERROR(EPERM), as a generic
    failure (a seek with no keyframe to go to, a demuxer or decoder that gives up) and PyAV raises it as a
    PermissionError. Only where ``src`` is a path that does not read back may it be the file's permission (module
    docstring); a file without read permission is EACCES."""
    return (isinstance(exc, av.error.FFmpegError) and exc.errno == errno.EPERM
            and (src is None or reads_back(src)))


def vanished(exc: BaseException, src: str | Path | bytes | bytearray | memoryview | None) -> bool:
    """True for a FileNotFoundError while ``src`` is a path that no longer reads back: the clip is gone (``not_found``).
    Where it still reads back, a file the clip's data names is missing (FFmpeg's concat demuxer, probed from the bytes,
    fails with ENOENT for a listed file): the clip's fault, which a rerun repeats."""
    return isinstance(exc, FileNotFoundError) and src is not None and not reads_back(src)


def pyav_raised(exc: BaseException) -> bool:
    """True when ``exc`` was raised in PyAV's own code: the innermost frame of its traceback is PyAV's (its compiled
    modules name their frames ``av/...``). A ValueError raised elsewhere (the reader's own code, numpy called by it)
    is a bug of this project, not a fault of the clip (``wrapped``)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename.startswith(("av/", os.path.dirname(av.__file__) + os.sep))


@contextmanager
def wrapped(name: str, problem: str, src: str | Path | bytes | bytearray | memoryview | None = None) -> Iterator[None]:
    """Turn PyAV / OS exceptions raised inside the block into typed ``VideoError``s (``src``, the path or bytes the
    block reads, tells FFmpeg's EIO on the clip's data from the disk's: `demuxer_io_error`). A ValueError is the clip's
    only where PyAV raised it (`pyav_raised`; FFmpeg's EINVAL is an FFmpegError): one of this project's own code is a
    bug, which escapes as it is (an internal fault, never a final video fault blamed on the user's clip)."""
    try:
        yield
    except (av.error.FFmpegError, OSError, EOFError, ValueError, MemoryError) as exc:
        if isinstance(exc, ValueError) and not isinstance(exc, av.error.FFmpegError) and not pyav_raised(exc):
            raise
        if vanished(exc, src):  # as `_open` words a clip missing at its size check: `unreached` retries both
            raise not_found(name) from exc
        if demuxer_io_error(exc, src):  # worded without the errno `environmental` retries
            raise VideoDecodeError(f"{name}: {problem} (FFmpeg reported an input/output error, but every byte of the "
                                   "file reads back: its data is corrupt)") from exc
        if ffmpeg_generic(exc, src):  # worded without "PermissionError": `unreached` retries that
            raise VideoDecodeError(f"{name}: {problem} (FFmpeg failed with its generic error, EPERM, though the file "
                                   f"reads back: {exc})") from exc
        if isinstance(exc, PermissionError) or machine_failed(exc):  # FFmpeg's too (mode 000, EIO): no corrupt clip
            raise unreadable(name, exc) from exc
        if isinstance(exc, av.error.MemoryError):  # ffmpeg_refused; worded without the errno `environmental` retries
            raise VideoDecodeError(f"{name}: {problem} (FFmpeg could not allocate what the clip's data asks for, "
                                   "though the machine can spare the 2 GiB FFmpeg allocates at most: corrupt sizes in "
                                   "the clip)") from exc
        raise VideoDecodeError(f"{name}: {problem} ({type(exc).__name__}: {exc})") from exc
