"""Stand-in batch workers speaking `graph.batch_procs`' pipe protocol (ready / row), for tests of the parent's
bookkeeping without a model server: only the worker body is replaced, the parent logic is the real one.

An item whose instruction starts with POISON kills its worker (like a decoder segfault) once no file `hold-poison`
(`POISON_HOLD`) is in `$RAA_FAKE_DIR` (`poison_after_dispatch`); from its taking on, no other item of its worker sends
its row (each is in flight when the worker dies, whatever the schedule). One starting with HANG is never answered (a
native deadlock); one starting with FLAKY hangs on its first attempt and on later ones makes its worker fail as
`worker_main` does on an exception (a "fatal" message, exit code 1); every other item takes `DELAY_S`
(`$RAA_FAKE_DELAY_S` where set: the workers are spawned, a monkeypatch does not reach them) and is scored 1.0 with the
worker's pid as its run id and one model call as its usage; with `$RAA_FAKE_DIR` set, a worker marks each item it
takes there (file `taken-<key>`) and each row once it is in the pipe (file `sent-<key>`); while a file `hold` (`HOLD`)
is in that folder it sends no row (a test removes it to say go, so that rows wait unread in the pipes whatever the
schedule, for as long as the parent reads none). FLAKY attempts are told apart by marker files in the folder
`$RAA_FAKE_DIR`. One starting with LINGER is scored at once, then its worker shuts its end of the pipe and stays alive
for `LINGER_S` before it exits (as a worker whose interpreter takes long to shut down). With
`$RAA_FAKE_START_FAILURES` = k, the first k workers to start fail before they are ready (as one whose tool model
cannot load does). With `$RAA_FAKE_IDLE_DEATH` set, every worker fails as `worker_main` does on an exception right
after it is ready, before it reads any item (its pipe shut for reading, so the parent's send fails and nothing is in
flight when it dies). A KeyboardInterrupt (a Ctrl-C the worker acts on) ends the worker as `worker_main` does: a
"fatal" message, exit code 1."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

DELAY_S = 1.0
LINGER_S = 2.0
HOLD = "hold"
"""File in `$RAA_FAKE_DIR` that holds back every row until it is removed."""
POISON_HOLD = "hold-poison"
"""File in `$RAA_FAKE_DIR` that holds back a POISON item's crash until it is removed."""


def fake_worker(conn, settings, preset, durability, draw=0) -> None:  # noqa: ANN001 - worker_main's signature
    from graph.batch import result_line
    from graph.schemas import RewardResult

    lock = threading.Lock()
    marks = os.environ.get("RAA_FAKE_DIR", "")
    poisoned = threading.Event()  # this worker took a POISON item: its other runs die with it, unanswered

    def first(name: str) -> bool:  # the first process to claim `name` (atomic over the workers)
        try:
            os.close(os.open(os.path.join(marks, name), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True

    def fatal(text: str) -> None:  # what worker_main does when its body raises
        conn.send(("fatal", text))
        os._exit(1)

    def one(ticket: int, item: dict) -> None:
        if marks:
            first(f"taken-{item['key']}")
        if item["instruction"].startswith("POISON"):
            while marks and os.path.exists(os.path.join(marks, POISON_HOLD)):  # the test has not said go yet
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)
        if item["instruction"].startswith("LINGER"):
            result = RewardResult(status="scored", reward=1.0, preset=preset, run_id=str(os.getpid()))
            with lock:
                conn.send(("row", ticket, result_line(item, result), result.status))
                socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM).shutdown(socket.SHUT_WR)
            time.sleep(LINGER_S)
            os._exit(0)
        if item["instruction"].startswith("HANG"):
            return
        if item["instruction"].startswith("FLAKY"):
            if first(f"flaky-{item['key']}"):
                return
            fatal("RuntimeError: decoder state corrupt")
        time.sleep(float(os.environ.get("RAA_FAKE_DELAY_S", DELAY_S)))
        result = RewardResult(status="scored", reward=1.0, preset=preset, run_id=str(os.getpid()), usage={"calls": 1})
        while marks and os.path.exists(os.path.join(marks, HOLD)):  # the test has not said go yet
            time.sleep(0.01)
        if poisoned.is_set():  # in flight until the POISON item kills this worker
            threading.Event().wait()
        with lock:
            conn.send(("row", ticket, result_line(item, result), result.status))
        if marks:
            first(f"sent-{item['key']}")

    if any(first(f"start-{i}") for i in range(int(os.environ.get("RAA_FAKE_START_FAILURES", "0")))):
        fatal("OSError: tool model weights missing: /models/vjepa2")
    if os.environ.get("RAA_FAKE_IDLE_DEATH"):  # the parent's sends fail from now on: it can put nothing in flight
        socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM).shutdown(socket.SHUT_RD)
        conn.send(("ready", os.getpid()))
        conn.send(("fatal", "RuntimeError: CUDA error: an illegal memory access was encountered"))
        time.sleep(0.2)
        os._exit(1)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        except KeyboardInterrupt as exc:  # as worker_main's handler of any exception of its body
            fatal(f"{type(exc).__name__}: {exc}")
        if message[0] != "item":
            return
        if message[2]["instruction"].startswith("POISON"):  # before any item received after it runs
            poisoned.set()
        threading.Thread(target=one, args=(message[1], message[2]), daemon=True).start()


def rows_held_until_taken(monkeypatch, marks, n: int, then=lambda: None) -> None:  # noqa: ANN001
    """Parent side of `HOLD`: the fake workers (`$RAA_FAKE_DIR` = `marks`) hold their rows back until they have taken
    `n` items; then, inside one `batch_procs.wait` (the parent reads no pipe meanwhile), they are let go, and once all
    `n` rows are in the pipes `then` is called: the parent has read none of them before, whatever the schedule."""
    from graph import batch_procs

    real_wait = batch_procs.wait
    (marks / HOLD).touch()

    def wait(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        ready = real_wait(*args, **kwargs)
        if (marks / HOLD).exists() and len(list(marks.glob("taken-*"))) == n:
            (marks / HOLD).unlink()
            deadline = time.monotonic() + 120
            while len(list(marks.glob("sent-*"))) < n:  # marked once in the pipe
                assert time.monotonic() < deadline, f"{len(list(marks.glob('sent-*')))} of {n} rows sent"
                time.sleep(0.05)
            then()
        return ready

    monkeypatch.setattr(batch_procs, "wait", wait)


STILL_BOUND_S = 120.0
"""Real seconds `parent_clock` stands still at most: a run the test waits for that hangs (a regression) fails the test
then, not at pytest's 900 s timeout; far above what the runs it waits for take on a loaded machine (the retried
attempt of test_batch_procs' death test, a fresh worker spawned and failing, took 7.6 s in all at load 10)."""


class ParentClock:
    """The parent's clock (`batch_procs.time.monotonic`, which its run deadlines read) as `parent_clock` sets it."""

    def __init__(self, moves, bound_s: float) -> None:  # noqa: ANN001
        self.moves, self.bound_s = moves, bound_s
        self.last = time.monotonic()
        self.still_since: float | None = None  # real time it stopped at, while it stands still
        self.overran = False  # it stood still past bound_s and was let move

    def monotonic(self) -> float:
        now = time.monotonic()
        if self.moves():
            self.still_since = None
        elif self.still_since is None:
            self.still_since = now
        elif now - self.still_since > self.bound_s:
            self.overran = True
        if self.still_since is None or self.overran:
            self.last = now
        return self.last

    def check(self, rows: dict[int, dict], logged: list[str]) -> None:
        """Fails, saying what hung, when the clock stood still past its bound (the rows are then those of a batch
        whose hung run was killed once the clock moved)."""
        reasons = {line: row["result"].get("reasons") for line, row in rows.items()}
        assert not self.overran, (
            f"a run the test waited for did not end within {self.bound_s:g} s of real time (the parent's clock stood "
            f"still so long, then moved and killed it at its deadline): rows' reasons {reasons}; log {logged}")


def poison_after_dispatch(monkeypatch, marks, key: str) -> None:  # noqa: ANN001
    """Parent side of `POISON_HOLD`: the POISON item `key` kills its worker (`$RAA_FAKE_DIR`, set to `marks`) only
    once the parent has sent it and waits (`batch_procs.wait`): the dispatch that sent it is over, so every item the
    parent sent that worker with it is in flight when it dies (none answers meanwhile), whatever the schedule."""
    from graph import batch_procs

    monkeypatch.setenv("RAA_FAKE_DIR", str(marks))
    real_wait = batch_procs.wait
    (marks / POISON_HOLD).touch()

    def wait(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if (marks / f"taken-{key}").exists():  # taken: sent by a dispatch before this wait
            (marks / POISON_HOLD).unlink(missing_ok=True)
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(batch_procs, "wait", wait)


def parent_clock(monkeypatch, moves, bound_s: float = STILL_BOUND_S) -> ParentClock:  # noqa: ANN001
    """The parent's clock (`batch_procs.time.monotonic`, which its run deadlines read) reads the real time while
    ``moves()`` is true and otherwise stands at the last time it read (from the call on): a test lets one run's
    deadline pass and no other's, whatever the machine's load. Standing still for `bound_s` real seconds (a run the
    test waits for hangs: no deadline would ever pass), it moves again for good, so the hung run is killed and the
    batch ends; the test then calls `check` on what it got, which fails saying so."""
    import types

    from graph import batch_procs

    clock = ParentClock(moves, bound_s)
    monkeypatch.setattr(batch_procs, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    return clock


def parent_stalls(monkeypatch, stall_s: float) -> None:  # noqa: ANN001
    """A parent stalled each time it wakes (a loaded machine): its clock (the monotonic clock that `batch_procs` and
    `graph.batch_pipes` read) stands still but leaps `stall_s` ahead whenever a `batch_procs.wait` returns something
    ready, so every run in flight is past its deadline when the parent handles what woke it (a worker's death, its
    "fatal" message), and none passes any other way, whatever the machine's load."""
    import types

    from graph import batch_pipes, batch_procs

    real_wait = batch_procs.wait
    at = [time.monotonic()]

    def wait(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        ready = real_wait(*args, **kwargs)
        if ready:
            at[0] += stall_s
        return ready

    clock = types.SimpleNamespace(monotonic=lambda: at[0])
    monkeypatch.setattr(batch_procs, "wait", wait)
    monkeypatch.setattr(batch_procs, "time", clock)
    monkeypatch.setattr(batch_pipes, "time", clock)
