"""One PyAV ``VideoReformatter`` (swscale context) per thread, safe across ``fork``.

Converting each frame through its own fresh context spent ~0.2 ms per frame setting it up, half the
decode time of a 256x256 clip, so ``tools.video`` reuses one per thread (the pixels are bit-identical).

``tools.video`` converts with ``threads=1``: no swscale slice threads. PyAV's default (``threads=0``, one
per CPU) spent ~130 us of CPU per 32x32 frame synchronising them (2 us with one thread; 67 vs 26 us at
256x256), and for 480x832-1280x704 rollouts decoded on 2 cores it saved no wall time while using more CPU
(tools/video.py's worker pool already runs one clip per core). Measured with 16 concurrent runs of 32x32
clips (benchmarks/agent_concurrency.py), the quality probe of a clip fell from ~12 to ~9 ms of CPU (one thread, no contention).
The guard below stays for reformatters made with slice threads (PyAV's default elsewhere). With them, after
``os.fork`` (``multiprocessing``'s default start method on Linux, DataLoader workers) those threads do
not exist in the child, and their condition variables still count them as waiters: freeing such a
context (``sws_freeContext`` -> ``avpriv_slicethread_free``) or converting with it waits forever. Two
ways a child met one:

- Python frees the thread-locals of the parent's other threads (the decode worker threads) while it
  sets the child up, so the child hung before running a line of its own. Every reformatter is
  therefore also held in ``_KEPT``; one made by a thread that has since ended is dropped (freed) by
  the next reformatter made in the same process, where its slice threads still exist, and one
  inherited from a parent process is never freed (bounded by the parent's threads that ever decoded).
- The thread that forked keeps its thread-local in the child: a reformatter remembers the process that
  made it and a thread in another process makes a new one.
"""

from __future__ import annotations

import contextlib
import os
import threading

from av.video.reformatter import VideoReformatter

_LOCAL = threading.local()
_KEPT: list[tuple[int, threading.Thread, VideoReformatter]] = []  # (pid, thread that made it, reformatter)


def reformatter() -> VideoReformatter:
    """This thread's VideoReformatter (its swscale context is reused while frame sizes match)."""
    made = _LOCAL.__dict__.get("made")
    pid = os.getpid()
    if made is not None and made[0] == pid:
        return made[1]
    _drop_ended(pid)
    new = VideoReformatter()
    _KEPT.append((pid, threading.current_thread(), new))
    _LOCAL.made = (pid, new)
    return new


def _drop_ended(pid: int) -> None:
    """Free the reformatters made in this process by threads that have ended (their slice threads
    exist here). No lock: a fork while another thread held it would leave it held in the child."""
    for kept in list(_KEPT):
        if kept[0] == pid and not kept[1].is_alive():
            with contextlib.suppress(ValueError):  # another thread dropped it first
                _KEPT.remove(kept)
