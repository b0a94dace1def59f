"""Frame caches and SQLite stores in a forked child (`graph.frame_store.FrameStore`, `graph.cache.StageCache`, the
trace saver of `graph.tracing.open_saver`).

A process that forks after its agent has worked (`multiprocessing`'s default start method on Linux: a script
that scores a clip, then maps its clips over a pool whose workers score with the same module-level agent) gives
the child a copy of every FrameStore as it was at the fork. The shared jobs the parent's worker threads had
queued or running were in it, but those threads do not exist in the child (`graph.workers` starts fresh pools
there): a child's run of such a clip reused the job and waited for it forever (a speculative track still
running when `score_video` returned, the observe encoding of a clip another thread was scoring). A store lock
that a parent thread held at the fork stayed held in the child, whose first frame request then waited forever.

Decisions where the issue was silent: in the child, each store gets fresh locks and drops its shared jobs; the
next caller of a key starts the work afresh in the child's own pool. All jobs go, the finished ones too: telling
them apart means asking each Future, which takes its lock, and a parent thread setting a result at the fork
would leave that lock held, so the hook itself could hang every child forked then (a DataLoader worker that
never scores). Finished surprise scores stay in the cache of derived artefacts, and decoded frames, data URLs
and readers stay (a reader's reads after its first open their own demuxer; a first read in the child of a reader
whose scan demuxer the parent had not used yet shares that open file with the parent, which matters only if both
read it at once). The hook only assigns: it takes no lock. It is registered when the first store is made, not at
import (as graph/workers.py does).

The same hook resets the SQLite stores an agent holds, which the child inherited the same way: the stage cache
(`graph.cache.StageCache`) and the trace checkpointer (`graph.tracing.open_saver`). SQLite connections must not
be used across fork (sqlite.org "How To Corrupt An SQLite Database File", 2.6): the child's reads and writes went
through the parent's open file, its locks and its page cache. In the child each store opens its own connection to
the same file (a plain `sqlite3.connect`, which takes no lock: the file is already set up), and the inherited one
is kept referenced, never closed (`abandon`): closing it in the child could checkpoint or remove the WAL the
parent still uses. The stage cache also drops its in-flight stage calls (`graph.flights.Flights`): their holders
are tasks of the parent's event loop, which do not exist in the child, and a guard lock held at the fork would
stay held; `graph.api` forgets the run ids the parent had in flight (watched from its first run on; its runs do not exist in the child; the
trace database's claims, per process, still refuse an id another process runs).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Protocol

_STORES: weakref.WeakSet = weakref.WeakSet()
_LOCK = threading.Lock()
_HOOKED = False
_ABANDONED: list[Any] = []
"""Connections inherited over fork, kept from being closed in the child (module docstring)."""


class ForkAware(Protocol):
    def after_fork(self) -> None:
        """Reset what the child cannot use of the parent's (locks, jobs, connections); takes no lock."""


def abandon(conn: Any) -> None:
    """Keep `conn`, a connection inherited over fork, referenced for the child's life: never used, never closed."""
    _ABANDONED.append(conn)


def watch(store: ForkAware) -> None:
    """Have `store` (a FrameStore, a StageCache, a trace saver) call its `after_fork` in every child this process
    forks from now on."""
    global _HOOKED
    with _LOCK:
        if not _HOOKED:
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _HOOKED = True
        _STORES.add(store)


def _after_fork_in_child() -> None:
    """The fork hook: a fresh registry lock (a parent thread may have held it), then every live store's reset."""
    global _LOCK
    _LOCK = threading.Lock()
    for store in list(_STORES):
        store.after_fork()
