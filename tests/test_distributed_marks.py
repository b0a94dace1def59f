"""`make test-slow` and `make test-all` run the tests marked `distributed` serially and every other test on the
pytest-xdist workers (Makefile: PYTEST_SPLIT): a test that starts 2-rank launches without the mark would run beside
another worker's tests, where a spawned rank missed its 45 s start deadline. Every test that calls a rank launcher
of tests/launches.py (itself or through a function of its module) carries the mark."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
LAUNCHERS = frozenset({"torchrun", "deepspeed_launch", "spawn_ranks"})


def _marks(nodes: list[ast.expr]) -> set[str]:
    """The names ``X`` of every ``pytest.mark.X`` (or ``mark.X``) in ``nodes`` (decorators, a pytestmark value)."""
    return {n.attr for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}


def unmarked_launching_tests(source: str) -> list[str]:
    """The test functions of a module's ``source`` that reach a rank launcher (`LAUNCHERS`) through the module's own
    functions and are not marked `distributed` (by a decorator or the module's ``pytestmark``)."""
    tree = ast.parse(source)
    module_marks = _marks([n.value for n in tree.body if isinstance(n, ast.Assign)
                           and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)])
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    used = {name: {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
            | {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)} for name, fn in funcs.items()}

    def launches(name: str, seen: frozenset[str]) -> bool:
        return bool(used[name] & LAUNCHERS) or any(launches(other, seen | {other})
                                                   for other in (used[name] & funcs.keys()) - seen)

    return [name for name, fn in funcs.items() if name.startswith("test_") and launches(name, frozenset({name}))
            and "distributed" not in _marks(fn.decorator_list) | module_marks]


def test_the_check_finds_an_unmarked_launch_through_a_helper() -> None:
    source = ("import pytest\nfrom tests.launches import torchrun\ndef _run():\n    return torchrun()\n"
              "def test_a():\n    _run()\n@pytest.mark.distributed\ndef test_b():\n    _run()\n"
              "def test_c():\n    pass\n")
    assert unmarked_launching_tests(source) == ["test_a"]
    assert unmarked_launching_tests("import pytest\npytestmark = [pytest.mark.distributed]\n" + source) == []


def test_every_test_that_launches_ranks_is_marked_distributed() -> None:
    sources = {path.name: path.read_text() for path in sorted(TESTS.glob("test_*.py"))}
    found = {name: unmarked_launching_tests(text) for name, text in sources.items()  # (no launcher named: none)
             if any(launcher in text for launcher in LAUNCHERS)}
    assert {name: tests for name, tests in found.items() if tests} == {}
