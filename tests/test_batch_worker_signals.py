"""`graph.batch_worker.starting_worker`, the moment the parent starts a worker process with SIGINT ignored: the parent's
own handler must come back however the start ends (a start that raises left ignored would swallow every later Ctrl-C
of the batch), and a batch run from a thread other than the main one (where `signal.signal` raises ValueError) starts
its workers as before."""

from __future__ import annotations

import signal
import threading

import pytest

from graph.batch_worker import starting_worker


def test_sigint_is_ignored_while_starting_and_the_handler_comes_back_when_the_start_raises() -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(OSError, match="no more processes"), starting_worker():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        raise OSError("no more processes")  # as Process.start failing (EAGAIN, a full pid table)
    assert signal.getsignal(signal.SIGINT) is before


def test_outside_the_main_thread_nothing_is_changed_and_nothing_raises() -> None:
    seen: list[object] = []

    def start() -> None:
        try:
            with starting_worker():
                seen.append(signal.getsignal(signal.SIGINT))
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            seen.append(exc)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    assert seen == [signal.getsignal(signal.SIGINT)]
