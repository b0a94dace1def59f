"""A byte-bounded LRU map (the reward agent's frame, data-URL and extras caches, graph/frame_store.py).

Decision where the issue was silent: an entry bigger than the whole bound is not stored (and an older
value under its key is dropped, being stale); it evicts nothing. It used to evict every other entry and
then stay, so the map held more than its bound and served nothing else. The caller still has the value.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class ByteLRU:
    """Byte-bounded LRU map (thread-safe)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._data: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            item = self._data.get(key)
            if item is None:
                return None
            self._data.move_to_end(key)
            return item[0]

    def put(self, key: Any, value: Any, size: int) -> None:
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.max_bytes:  # never fits: keep the others (module docstring)
                return
            self._data[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, freed) = self._data.popitem(last=False)
                self._bytes -= freed

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (a parent thread may have held it at the fork; `graph.frame_fork`)."""
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Total size of the entries held."""
        return self._bytes

    def drop(self, doomed: Callable[[Any], bool]) -> int:
        """Remove every entry whose key `doomed` accepts; returns how many."""
        with self._lock:
            keys = [k for k in self._data if doomed(k)]
            for k in keys:
                self._bytes -= self._data.pop(k)[1]
        return len(keys)
