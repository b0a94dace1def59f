"""Reading Linux's ``/proc/<pid>/stat`` (proc(5)): the one parser behind `graph.run_claims.process_start` (a
claim's process start) and `training.preemption.parent_pid` (whose launcher a rank follows).

The line is ``pid (comm) state ppid ...``; ``comm`` is the executable's name, up to 15 bytes, and may hold
spaces and parentheses (a process may rename itself to ``a) b``), so the fields after it are split from the
*last* ``)``. ``comm`` is bytes, not text: a name cut at 15 bytes can end inside a UTF-8 character.

Decision where proc(5) is silent for us: a line that does not parse (no ``)``, too few fields, a field that
is not a number) counts as unknown, as a process that is gone does (None from `read_stat_field`), never as
an error: both callers treat "unknown" as "cannot tell".
"""

from __future__ import annotations

PPID = 4
"""proc(5) field number of the parent pid."""
STARTTIME = 22
"""proc(5) field number of the process start, in clock ticks since boot."""


def stat_fields(line: bytes) -> list[bytes]:
    """The fields of a ``/proc/<pid>/stat`` line, numbered as proc(5) numbers them less one: ``[0]`` the pid,
    ``[1]`` comm without its parentheses, ``[2]`` the state, ``[3]`` the ppid, ... ValueError when the line
    has no ``(comm)``."""
    open_at, close_at = line.find(b"("), line.rfind(b")")
    if open_at < 0 or close_at < open_at:
        raise ValueError(f"not a /proc/<pid>/stat line: {line[:80]!r}")
    return [line[:open_at].strip(), line[open_at + 1:close_at], *line[close_at + 1:].split()]


def stat_field(line: bytes, number: int) -> int | None:
    """Field ``number`` (proc(5)'s numbering, from 1; a numeric field, not comm) of a stat line as an int;
    None when the line has no such field or it is not a number."""
    if number < 1:
        raise ValueError(f"proc(5) numbers stat fields from 1, got {number}")
    try:
        return int(stat_fields(line)[number - 1])
    except (ValueError, IndexError):
        return None


def read_stat_field(pid: int, number: int) -> int | None:
    """`stat_field` of process ``pid``'s ``/proc/<pid>/stat``; None where the system does not tell (no /proc,
    no such process, an unreadable line)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            line = fh.read()
    except OSError:
        return None
    return stat_field(line, number)
