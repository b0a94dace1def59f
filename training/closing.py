"""Closing several things at once (training/run_end.py ``Opened.close``, training/metrics_log.py ``MetricsLog.close``):
each close is attempted, whatever the ones before it raised. Stopping at the first close that raised left the
later ones open: a reward runner that could not close kept the metrics log, TensorBoard, W&B and the signal
handlers open; a TensorBoard writer that could not close left the W&B run unfinished."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def close_each(closes: Iterable[Callable[[], None]]) -> None:
    """Call each of ``closes`` in order, the later ones also after one raised; then raise the first Exception,
    each later one added to it as a note (``Type: text``). A BaseException (KeyboardInterrupt) passes at once,
    with the first Exception before it as its context (its traceback printed first), or as a note where the
    interrupt has a context of its own: dropped, a Ctrl-C during W&B's finish hid that the reward runner had
    failed to close."""
    first: Exception | None = None
    for close in closes:
        try:
            close()
        except Exception as exc:
            if first is None:
                first = exc
            else:
                first.add_note(f"closing also failed: {type(exc).__name__}: {exc}")
        except BaseException as exc:
            if first is not None and exc.__context__ is None and not exc.__suppress_context__:
                exc.__context__ = first
            elif first is not None:
                exc.add_note(f"closing had already failed: {type(first).__name__}: {first}")
            raise
    if first is not None:
        raise first
