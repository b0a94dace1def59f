"""Process-unique names of live objects, for cache keys that must tell objects apart (an injected tracker, surprise
scorer or extra tool, a tool factory: `tools.toolbox.tracker_identity`, `tools.extra.extra_tool_identity`,
`graph.context.ToolProvider`).

Decision where the issue was silent: ``id()`` is no such name. The frame cache outlives the tools whose results it
keeps (one FrameStore shared by several agents), and once an object is collected CPython gives its address to the
next object of that size: a scorer made after another one was dropped (a sweep over scorer configurations) had the
dropped one's key and took its surprise. `object_identity` numbers each object the first time it is asked about,
and forgets the number when the object dies (a weak reference's callback), so a new object at the same address gets
a new number. An object that takes no weak references (``__slots__`` without ``__weakref__``) is held by the map
instead, for the life of the process: its address is never handed on (tools are few and long-lived).

The number alone is unique within a process only, and the name reaches other processes: a tool service names what
it serves by its tools' identities (`tools.toolbox.served_identity`: an injected tool of its own class), which a client pins, so a service restarted
with another injected tracker of the same class named it "#1" as the first one was. The name therefore also holds a
random token of the process that numbered the object (drawn on first use, and again in a forked child).
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import uuid
import weakref
from collections.abc import Callable

_LOCK = threading.RLock()  # re-entrant: a weak reference's callback may run (a collection) while it is held
_NUMBERS: dict[int, tuple[Callable[[], object], int]] = {}  # id -> (the object, or a dead reference; its number)
_NEXT = itertools.count(1)
_PROCESS: tuple[int, str] | None = None  # (pid, its token): see the module docstring


def object_identity(obj: object) -> str:
    """``<module>.<qualname>#<n>@<token>``: `obj`'s type, a number no other object of this process has had and the
    process's token (module docstring)."""
    global _PROCESS
    key = id(obj)
    with _LOCK:
        entry = _NUMBERS.get(key)
        if entry is None or entry[0]() is not obj:
            entry = _NUMBERS[key] = (_reference(obj, key), next(_NEXT))
        number = entry[1]
        if _PROCESS is None or _PROCESS[0] != os.getpid():
            _PROCESS = (os.getpid(), uuid.uuid4().hex[:12])
        token = _PROCESS[1]
    return f"{type(obj).__module__}.{type(obj).__qualname__}#{number}@{token}"


def _reference(obj: object, key: int) -> Callable[[], object]:
    try:
        return weakref.ref(obj, functools.partial(_forget, key))
    except TypeError:  # no weak references to it: held here (module docstring)
        return lambda: obj


def _forget(key: int, ref: weakref.ref) -> None:
    with _LOCK:
        entry = _NUMBERS.get(key)
        if entry is not None and entry[0] is ref:
            del _NUMBERS[key]
