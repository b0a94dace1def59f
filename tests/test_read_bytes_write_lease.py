"""A file another process holds a write lease on (``fcntl F_SETLEASE``: Samba, an NFS server, a sync tool) is read once
its holder lets go. `tools.file_kinds.read_file` opened the file without blocking (O_NONBLOCK, then set blocking): such
an open fails at once with EWOULDBLOCK, and a bare BlockingIOError ("Resource temporarily unavailable") escaped the
readers for a file that was there and readable. Through the O_PATH handle the file is opened in blocking mode: the
kernel tells the holder (SIGIO), the open waits for it to write back and release (or for ``lease-break-time``, 45 s by
default, after which the kernel breaks the lease), and the reader gets the bytes the holder wrote back."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.file_kinds import read_at, read_bytes

HOLDER = textwrap.dedent("""
    import fcntl, os, signal, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR)

    def flush(signum, frame):  # a reader opens the file: write back, then let go of the lease
        os.pwrite(fd, b'{"flushed": true}\\n', 0)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)

    signal.signal(signal.SIGIO, flush)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError as exc:
        print(f"no lease: {exc}", flush=True)
        sys.exit(0)
    print("held", flush=True)
    time.sleep(120)
""")
"""A process that takes a write lease on the file `argv[1]` and, told of a reader, writes its rows back and lets go."""


@pytest.fixture
def leased(tmp_path: Path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"{}\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        said = holder.stdout.readline().strip() if holder.stdout else ""
        if said != "held":
            pytest.skip(f"no write lease here ({said or 'the holder said nothing'})")
        yield path
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout:
            holder.stdout.close()


def test_read_bytes_waits_for_the_lease_holder_to_write_back(leased):
    assert read_bytes(leased) == b'{"flushed": true}\n'


def test_read_at_waits_for_the_lease_holder_to_write_back(leased):
    assert read_at(leased) == (None, b'{"flushed": true}\n')
