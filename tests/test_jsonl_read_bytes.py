"""`tools.jsonl.read_bytes`, which every reader of tools.jsonl reads through: a path that is no regular file is refused
from its stat, never opened, and the file is opened without blocking so that one put there since is refused too. A
regular file must then be read in blocking mode: a file system that honours O_NONBLOCK for a regular file (a FUSE daemon
may; the flag reaches it with each read) answers a read with EAGAIN, and Python's whole-file read then returns the bytes
read so far, a cut file taken for the whole one, or None."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from tests.fifo_files import call_unblocked
from tests.path_calls import reopen_refused
from tools import file_kinds, jsonl
from tools.jsonl import read_bytes


def test_a_regular_file_is_read_in_blocking_mode(tmp_path, monkeypatch):
    (tmp_path / "m.jsonl").write_bytes(b'{"a": 1}\n')
    opened = []
    fdopen = os.fdopen

    def recording(fd, *args, **kwargs):
        opened.append(os.get_blocking(fd))
        return fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(jsonl.os, "fdopen", recording)
    assert read_bytes(tmp_path / "m.jsonl") == b'{"a": 1}\n'
    assert opened == [True]


def test_links_to_a_file_read_it_whole(tmp_path):
    data = b'{"row": "' + b"x" * 3_000_000 + b'"}\n'
    (tmp_path / "big.jsonl").write_bytes(data)
    (tmp_path / "link.jsonl").symlink_to("big.jsonl")
    (tmp_path / "chain.jsonl").symlink_to(tmp_path / "link.jsonl")
    assert read_bytes(tmp_path / "link.jsonl") == data
    assert read_bytes(tmp_path / "chain.jsonl") == data


def test_files_that_are_no_regular_file_are_named_with_their_kind(tmp_path):
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        read_bytes(tmp_path)
    with pytest.raises(OSError, match=r"not a regular file: a character device: '/dev/null'"):
        read_bytes(Path("/dev/null"))
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "s.jsonl"))
        with pytest.raises(OSError, match=r"not a regular file: a socket") as caught:  # refused from its stat
            read_bytes(tmp_path / "s.jsonl")
        assert caught.value.filename == str(tmp_path / "s.jsonl")
    finally:
        server.close()


def test_a_fifo_is_refused_without_opening_it(tmp_path, monkeypatch):
    """Opening a FIFO's read end, even without blocking, releases a writer blocked opening its other end, which then
    writes into a pipe nobody reads (a broken pipe): the FIFO is refused from its look (an O_PATH handle, which opens
    neither end), never opened for reading. (`tests/test_read_bytes_blocked_writer.py` watches such a writer.)"""
    fifo = tmp_path / "summary.json"
    os.mkfifo(fifo)
    real_open = os.open

    def guarded(path, flags, *args, **kwargs):
        assert os.fspath(path) != str(fifo) or flags & os.O_PATH, f"{path} was opened"
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(jsonl.os, "open", guarded)
    with pytest.raises(OSError, match=rf"not a regular file: a FIFO: '{fifo}'"):
        read_bytes(fifo)


@pytest.mark.parametrize("proc", [True, False], ids=["through-proc", "without-proc"])
def test_a_fifo_put_there_after_the_look_is_refused_without_waiting(tmp_path, monkeypatch, proc):
    """The path is looked at (a regular file), then a FIFO is put there before it is opened for reading: the open must
    not wait for a writer, and the FIFO is refused. Through /proc the look is the O_PATH handle, which keeps the file
    it found: the swap is injected just before the path's open, the one look. Without /proc (`file_kinds.PROC_FD`
    missing) the path is looked at by ``stat``, then opened without blocking (O_NONBLOCK), and the open file's own
    stat refuses it: the swap is injected into that stat, as before there was an O_PATH handle."""
    path = tmp_path / "summary.json"
    path.write_bytes(b"{}")
    if not proc:
        monkeypatch.setattr(file_kinds, "PROC_FD", str(tmp_path / "no-proc"))
    call = "open" if proc else "stat"
    real = os.open if proc else os.stat

    def then_swapped(target, *args, **kwargs):
        if call == "open" and os.fspath(target) == str(path) and not stat.S_ISFIFO(os.stat(path).st_mode):
            os.unlink(path)
            os.mkfifo(path)
        found = real(target, *args, **kwargs)
        if call == "stat" and os.fspath(target) == str(path) and not stat.S_ISFIFO(found.st_mode):
            os.unlink(path)
            os.mkfifo(path)
        return found

    monkeypatch.setattr(os, call, then_swapped)
    with pytest.raises(OSError, match=rf"not a regular file: a FIFO: '{path}'"):
        call_unblocked(lambda: read_bytes(path), path)


def test_without_proc_a_file_is_still_read(tmp_path, monkeypatch):
    """Without /proc mounted (a bare chroot) the file is opened by name (`file_kinds._opened_by_name`)."""
    monkeypatch.setattr(file_kinds, "PROC_FD", str(tmp_path / "no-proc"))
    (tmp_path / "m.jsonl").write_bytes(b'{"a": 1}\n')
    assert read_bytes(tmp_path / "m.jsonl") == b'{"a": 1}\n'
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        read_bytes(tmp_path)


def test_a_refused_reopen_is_named_by_the_path_given(tmp_path, monkeypatch):
    """The regular file is opened for reading through /proc/self/fd/N: its refusal (EACCES for a file the user may
    not read; root here reads every file, so the refusal is injected) names the path given, not /proc's."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"{}\n")
    reopen_refused(monkeypatch)
    with pytest.raises(PermissionError) as caught:
        read_bytes(path)
    assert caught.value.filename == str(path)
