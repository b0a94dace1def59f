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
    failed to close (`keep_on_interrupt`)."""
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
            if first is not None:
                keep_on_interrupt(exc, first, "closing had already failed")
            raise
    if first is not None:
        raise first


def keep_on_interrupt(interrupt: BaseException, earlier: BaseException, what: str) -> None:
    """Keep ``earlier`` (an error already raised, a stop being closed for) on ``interrupt`` (a KeyboardInterrupt
    that passes in its place): as its context, its traceback printed first, or where the interrupt has a context
    of its own, as a note ``what: Type: text``; nothing where ``earlier`` is in its context chain already (an
    interrupt raised while ``earlier`` was being handled)."""
    context: BaseException | None = interrupt
    while context is not None:
        if context is earlier:
            return
        context = context.__context__
    if interrupt.__context__ is None and not interrupt.__suppress_context__:
        interrupt.__context__ = earlier
    else:
        interrupt.add_note(f"{what}: {type(earlier).__name__}: {earlier}")
