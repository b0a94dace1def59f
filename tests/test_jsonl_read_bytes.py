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
from tools import jsonl
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
    writes into a pipe nobody reads (a broken pipe): the FIFO is refused from its stat, never opened."""
    fifo = tmp_path / "summary.json"
    os.mkfifo(fifo)
    real_open = os.open

    def guarded(path, *args, **kwargs):
        assert os.fspath(path) != str(fifo), f"{path} was opened"
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(jsonl.os, "open", guarded)
    with pytest.raises(OSError, match=rf"not a regular file: a FIFO: '{fifo}'"):
        read_bytes(fifo)


def test_a_fifo_put_there_after_the_stat_is_refused_without_waiting(tmp_path, monkeypatch):
    """The path is looked at (a regular file), then a FIFO is put there before it is opened: the open must not wait
    for a writer (O_NONBLOCK), and the open file's own stat refuses it. The swap is injected into the stat."""
    path = tmp_path / "summary.json"
    path.write_bytes(b"{}")
    real_stat = os.stat

    def then_swapped(target, *args, **kwargs):
        found = real_stat(target, *args, **kwargs)
        if os.fspath(target) == str(path) and not stat.S_ISFIFO(found.st_mode):
            os.unlink(path)
            os.mkfifo(path)
        return found

    monkeypatch.setattr(os, "stat", then_swapped)
    with pytest.raises(OSError, match=rf"not a regular file: a FIFO: '{path}'"):
        call_unblocked(lambda: read_bytes(path), path)
