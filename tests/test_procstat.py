"""tools/procstat.py: the one /proc/<pid>/stat parser behind graph.run_claims.process_start and
training.preemption.parent_pid (they had each written their own, and differed on a comm that is not UTF-8)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tools.procstat import PPID, STARTTIME, stat_field, stat_fields

# 22 fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
# cstime priority nice threads itrealvalue starttime
TAIL = b"S 7 8 9 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 123456 3133440 416"


@pytest.mark.parametrize("comm", [b"cat", b"a b", b"(a) b)", b") S 99 (", b"", b"\xe4\xb8 x"])
def test_fields_after_a_comm_with_spaces_and_parentheses(comm):
    fields = stat_fields(b"42 (" + comm + b") " + TAIL + b"\n")
    assert fields[:4] == [b"42", comm, b"S", b"7"]
    assert stat_field(b"42 (" + comm + b") " + TAIL, PPID) == 7
    assert stat_field(b"42 (" + comm + b") " + TAIL, STARTTIME) == 123456


@pytest.mark.parametrize("line", [b"", b"42 cat S 7", b"42 (cat) S", b"42 (cat) S x", b"42 (cat S 7"])
def test_a_line_that_does_not_parse_is_unknown(line):
    assert stat_field(line, PPID) is None


def test_field_numbers_start_at_one():
    assert stat_field(b"42 (cat) " + TAIL, 1) == 42
    with pytest.raises(ValueError, match="from 1"):
        stat_field(b"42 (cat) " + TAIL, 0)


@pytest.mark.skipif(not os.path.exists("/proc/self/comm"), reason="Linux's /proc")
def test_both_callers_read_a_process_whose_name_is_not_utf8():
    """parent_pid read the line as UTF-8 text: a name cut inside a character (comm holds 15 bytes) raised
    UnicodeDecodeError, which ended the launcher-watch thread without its SIGTERM."""
    from graph.run_claims import process_start
    from training.preemption import parent_pid

    code = ("import sys; open('/proc/self/comm', 'wb').write(b'(a) b)\\xe4\\xb8'); print(flush=True); "
            "sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        with open(f"/proc/{child.pid}/stat", "rb") as fh:
            assert b"(a) b)\xe4\xb8)" in fh.read()
        assert parent_pid(child.pid) == os.getpid()
        assert isinstance(process_start(child.pid), int)
    finally:
        child.stdin.close()
        child.wait()
    assert parent_pid(child.pid) is None and process_start(child.pid) is None
