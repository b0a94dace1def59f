"""Paths that name something other than a regular file (a folder, a FIFO, a socket, a device): what it is, named from
its ``st_mode`` in one table (`KINDS`), and the one read of a file that refuses such a path (`read_bytes`).

The table holds two wordings of each kind, for two kinds of message:

- ``file`` (`file_kind`): the JSON readers' and the training run's ("not a regular file: a FIFO",
  "OUT/metrics.jsonl is a folder, where the run writes its log").
- ``clip`` (`clip_kind`): a clip's, which `tools.video_errors.not_a_file` writes into result rows ("is a directory,
  not a video file"). Those rows are read back (``unreached`` knows them by their end), and tests pin both wordings;
  so each column keeps its words, and only the table of kinds is shared.

A path is looked at (`kind_at`, `missing_file`; `read_bytes`, `read_file` and `read_at` through an O_PATH handle on
Linux) without opening what it names for reading: opening a FIFO's read end releases a writer blocked opening its other
end, which then writes into a pipe nobody reads (its bytes are lost, or it fails with a broken pipe).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TypeVar

_T = TypeVar("_T")


class Kind(NamedTuple):
    """One kind of file that is not a regular file."""

    test: Callable[[int], bool]
    """Whether an ``st_mode`` is of this kind (`stat.S_ISFIFO` ...)."""
    file: str
    """Its name in a JSON reader's or a training run's message."""
    clip: str
    """Its name in a clip's error (`tools.video_errors.not_a_file`), written into result rows."""


KINDS = (Kind(stat.S_ISDIR, "a folder", "a directory"),
         Kind(stat.S_ISFIFO, "a FIFO", "a named pipe (FIFO)"),
         Kind(stat.S_ISSOCK, "a socket", "a socket"),
         Kind(stat.S_ISCHR, "a character device", "a device"),
         Kind(stat.S_ISBLK, "a block device", "a device"))
"""Every kind of file a message names, the regular file aside (module docstring)."""

_OTHER = Kind(lambda mode: True, "another kind of file", "not a regular file")
"""What a mode none of `KINDS` matches is called."""


def _kind(mode: int) -> Kind:
    return next((kind for kind in KINDS if kind.test(mode)), _OTHER)


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` `mode` is that is not a regular file ("a FIFO", "a folder"), for a message."""
    return _kind(mode).file


def clip_kind(mode: int) -> str:
    """`file_kind` in a clip's words ("a named pipe (FIFO)", "a directory"; module docstring)."""
    return _kind(mode).clip


NOTHING = "nothing"
"""`kind_at`'s answer for a path where no file is (a dangling link included)."""

_NOT_THERE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})
"""The errnos of a ``stat`` that `Path.is_file` takes for no file (any other, such as EACCES, it raises)."""


def kind_at(path: Path) -> str | None:
    """What `path` names (links followed), from one ``stat``: None for a regular file, `NOTHING` when nothing is
    there, else its `file_kind` ("a FIFO", "a folder"). Its callers tell the three apart from this one look, not from
    `Path.is_file` and a second stat that may see another file. A stat that fails otherwise (EACCES) raises, as
    `Path.is_file` does. It is only looked at, never opened (module docstring)."""
    found = _there(lambda: os.stat(path))
    if found is None:
        return NOTHING
    return None if stat.S_ISREG(found.st_mode) else file_kind(found.st_mode)


def _there(look: Callable[[], _T]) -> _T | None:
    """What `look` (a look at one path: a ``stat``, `_opened`) answers, None where no file is there: an OSError of
    `_NOT_THERE`, or the ValueError of a NUL in the path. Any other OSError (EACCES) raises. The one rule of
    `kind_at` and `read_at`."""
    try:
        return look()
    except OSError as exc:
        if exc.errno in _NOT_THERE:
            return None
        raise
    except ValueError:  # a NUL in the path
        return None


def missing_file(path: Path, what: str, other: Callable[[str], str] | None = None) -> str | None:
    """Why `path` cannot be read as `what` (a manifest): "WHAT not found: PATH", or what is there instead (`kind_at`:
    a FIFO, a folder), for a path that is no regular file; None for one that is. A FIFO (``-m <(...)``) or a folder
    read "not found" for a path that is there. `other` words the second refusal from the kind found, for a reader
    whose advice differs (`evals.batch_rows.read_results_file`); by default "WHAT PATH is KIND, not a regular
    file: write the WHAT to a file and give its path"."""
    return file_problem(kind_at(path), path, what, other)


def read_or_problem(path: Path, what: str, other: Callable[[str], str] | None = None) -> tuple[str | None, bytes]:
    """(None, the bytes of the regular file at `path`), or (`missing_file`'s words, b""), from one look (`read_at`):
    a reader that asked `missing_file` and then read by name let the read's bare FileNotFoundError escape for a file
    removed in between, where "WHAT not found" was due. A file that cannot be read (EACCES: the reopen through
    /proc/self/fd, or a folder on the way that may not be searched) is "WHAT PATH cannot be read (Permission
    denied)": its readers print their own error, and the bare PermissionError was a traceback."""
    try:
        kind, data = read_at(path)
    except OSError as exc:
        return f"{what} {path} cannot be read ({exc.strerror or exc})", b""
    return file_problem(kind, path, what, other), data


def file_problem(kind: str | None, path: Path, what: str, other: Callable[[str], str] | None = None) -> str | None:
    """`missing_file`'s words for the `kind` already found at `path` (`kind_at`, `read_at`)."""
    if kind is None:
        return None
    if kind == NOTHING:
        return f"{what} not found: {path}"
    if other is not None:
        return other(kind)
    return f"{what} {path} is {kind}, not a regular file: write the {what} to a file and give its path"


def _refusal(mode: int, path: Path) -> OSError:
    """`read_file`'s OSError for a file of ``st_mode`` `mode` that is not a regular one."""
    if stat.S_ISDIR(mode):
        return IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    return OSError(errno.EINVAL, f"not a regular file: {file_kind(mode)}", str(path))


def read_bytes(path: Path) -> bytes:
    """The bytes of the regular file at `path` (`read_file`)."""
    return read_file(path)[0]


def read_file(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at `path`, and the ``fstat`` of the very file read (a file saved by a rename over
    `path` between a ``stat`` by name and the read is not paired with the other's bytes). OSError naming it otherwise:
    IsADirectoryError for a folder, and for a FIFO, a socket or a device one whose strerror says which ("not a regular
    file: a FIFO"). Reading a FIFO waited for a writer without limit (a reader hung with no word) and a device may
    never end, so the file's type is checked before it is opened for reading (`_opened`; a FIFO is never opened:
    module docstring). The regular file is read in blocking mode: a file system that honours O_NONBLOCK there (a FUSE
    daemon may) answers EAGAIN, and a whole-file read then returns the bytes read so far (a cut file) or None."""
    fd, found = _opened(path)
    if fd is None:
        raise _refusal(found.st_mode, path)
    return _whole(fd), found


def read_at(path: Path) -> tuple[str | None, bytes]:
    """`kind_at` and `read_bytes` from one look at `path`: (None, its bytes) for a regular file, (`NOTHING`, b"")
    where no file is, (its `file_kind`, b"") for another kind of file, which is not opened for reading. A reader that
    asked `kind_at` and then read by name saw a file removed in between as an empty one."""
    if (opened := _there(lambda: _opened(path))) is None:
        return NOTHING, b""
    fd, found = opened
    if fd is None:
        return file_kind(found.st_mode), b""
    return None, _whole(fd)


def _whole(fd: int) -> bytes:
    """The rest of the file open at `fd` (`_opened`), which is closed after."""
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


PROC_FD = "/proc/self/fd"
"""Where Linux names this process's open files: a regular file held by an O_PATH handle is opened for reading there
(`_opened`)."""


def _opened(path: Path) -> tuple[int | None, os.stat_result]:
    """The file at `path` open for reading in blocking mode and its ``fstat``; None and the ``fstat`` for a file of
    another kind, which is not opened for reading. On Linux the path is opened once, with O_PATH (a handle that opens
    neither end of a FIFO, nor a device), the handle's ``fstat`` says what it is, and a regular file is opened for
    reading through the handle (``/proc/self/fd/N``: the very file looked at, even if `path` is renamed over or
    removed since). Elsewhere, or without /proc, `_opened_by_name`."""
    if sys.platform == "linux":
        handle = os.open(path, os.O_PATH)
        try:
            found = os.fstat(handle)
            if not stat.S_ISREG(found.st_mode):
                return None, found
            try:
                return os.open(f"{PROC_FD}/{handle}", os.O_RDONLY), found
            except FileNotFoundError:  # no /proc mounted (a bare chroot): opened by name below
                pass
            except OSError as exc:  # EACCES ...: named by the path given, not /proc's
                raise OSError(exc.errno, exc.strerror, str(path)) from None
        finally:
            os.close(handle)
    return _opened_by_name(path)


def _opened_by_name(path: Path) -> tuple[int | None, os.stat_result]:
    """`_opened` from a ``stat`` by name, then an open without blocking (a FIFO put there since opens at once, with or
    without a writer, which that open releases) and the open file's ``fstat`` (such a FIFO is refused); a regular
    file is then set to blocking mode."""
    found = os.stat(path)
    if not stat.S_ISREG(found.st_mode):
        return None, found
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        found = os.fstat(fd)
        if stat.S_ISREG(found.st_mode):
            os.set_blocking(fd, True)
            return fd, found
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None, found
