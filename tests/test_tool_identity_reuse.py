"""An injected tool's identity in the frame cache's keys (tracker, surprise scorer, extra tool, a tool factory) is
the object's own for as long as the process runs, never its id(): once an object is collected, CPython hands its
address to the next object of that size, so a scorer made after the first one was dropped (a sweep over scorer
configurations sharing one FrameStore) found the first one's surprise under its key."""

from __future__ import annotations

import pytest

from graph.context import ToolProvider
from tools.extra import EvidenceReport, extra_tool_identity
from tools.identity import object_identity
from tools.toolbox import scorer_identity, tracker_identity


class Tool:
    """Stands for any injected tool (tracker, scorer, extra tool); what it holds decides its output."""

    name = "tool"

    def __init__(self, verdict: str = "") -> None:
        self.verdict = verdict

    def evaluate(self, frames, instruction):
        return EvidenceReport(summary=self.verdict)


class Slotted:
    """A tool without weak references (``__slots__`` without ``__weakref__``)."""

    __slots__ = ("verdict",)

    def __init__(self) -> None:
        self.verdict = ""


def _reused(make, identity):
    """(identity of a dropped object, a new object at the dropped one's address); skipped where the address is
    never reused (another Python than CPython)."""
    for _ in range(200):
        first = make()
        before, address = identity(first), id(first)
        del first  # freed at once (no cycle): its address is free for the next object of its size
        second = make()
        if id(second) == address:
            return before, second
    pytest.skip("no address was reused")


@pytest.mark.parametrize("identity", [tracker_identity, scorer_identity, extra_tool_identity, object_identity])
def test_an_object_at_a_dropped_objects_address_has_another_identity(identity):
    before, second = _reused(Tool, identity)
    assert identity(second) != before


def test_a_factory_at_a_dropped_factorys_address_has_another_identity():
    def factory():
        return lambda: None

    for field in ("tracker", "surprise"):
        def identity(f, field=field):
            return getattr(ToolProvider(**{f"{field}_factory": f}), f"{field}_id")

        before, second = _reused(factory, identity)
        assert identity(second) != before


def test_one_object_keeps_one_identity_and_two_live_ones_differ():
    a, b = Tool(), Tool()
    assert object_identity(a) == object_identity(a)
    assert object_identity(a) != object_identity(b)
    assert object_identity(a).startswith(f"{Tool.__module__}.{Tool.__qualname__}#")


def test_an_object_without_weak_references_keeps_its_identity_and_its_address():
    a = Slotted()
    first, address = object_identity(a), id(a)
    del a
    b = Slotted()
    assert id(b) != address  # held by the identity map: its address cannot be handed on
    assert object_identity(b) != first


_SERVICE = """
from tools.toolbox import served_identity

class Tracker:  # a tool service's own tracker (create_app(tracker=...)): its settings say nothing of it
    def __init__(self, weights):
        self.weights = weights

print(served_identity(Tracker({weights!r}), None))
"""


def test_two_processes_name_their_own_objects_apart():
    """`object_identity` reaches other processes in a tool service's `SERVED_HEADER` digest (`served_identity`), which a
    client pins: numbered per process alone, a service restarted with another injected tracker of the same class
    named it as the first one (each the process's first object, "#1"), and the client took the new tracker's tracks
    as the pinned one's."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}

    def served(weights: str) -> str:
        return subprocess.run([sys.executable, "-c", _SERVICE.format(weights=weights)], env=env, cwd=root,
                              capture_output=True, text=True, check=True, timeout=120).stdout.strip()

    first, restarted = served("a.pth"), served("b.pth")
    assert first and restarted and first != restarted
