"""`make test` (what the README and .ci/run run) spreads the suite over pytest-xdist workers, `make test-slow` and
`make test-all` the tests not marked distributed, and a fresh clone's `make install` gets pytest-xdist from the
``dev`` extra: the suite ran serially on one core of two (~15 min)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pytest_line(*args: str) -> str:
    """The pytest command `make -n ARGS` prints (a dry run: nothing is installed or run)."""
    out = subprocess.run(["make", "-n", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if " -m pytest" in line]
    assert len(lines) == 1, out
    return lines[0]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_runs_two_workers_a_file_each() -> None:
    line = _pytest_line("test")
    assert re.search(r" -n 2 --dist loadfile\b", line), line


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_test_workers_chooses_the_worker_count() -> None:
    assert " -n 0 " in _pytest_line("test", "TEST_WORKERS=0") + " "


def test_the_dev_extra_installs_xdist() -> None:
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert any(re.match(r"pytest-xdist\b", req) for req in dev), dev


def _pytest_args(*args: str) -> list[str]:
    """The arguments of each pytest command that `make -n ARGS` prints, in order (a recipe line may hold several)."""
    out = subprocess.run(["make", "-n", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout
    return [m.group(1).strip() for m in re.finditer(r" -m pytest\b(.*?)(?=\|\||;|$)", out, flags=re.M)]


SPLIT_TARGETS = [("test-slow", "slow and not gpu"), ("test-all", "not gpu")]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize(("target", "marks"), SPLIT_TARGETS)
def test_slow_targets_run_the_undistributed_tests_on_workers_then_the_distributed_ones_serially(target, marks):
    """The 2-rank launches (`distributed`) keep running one at a time (on two workers of a loaded 2-core machine a
    spawned rank did not start within its test's 45 s deadline); everything else goes to the workers, a file each."""
    workers, serial = _pytest_args(target)
    assert workers == f'-m "{marks} and not distributed" -n 2 --dist loadfile', workers
    assert serial.startswith(f'-m "{marks} and distributed" tests/'), serial  # only the files holding the mark


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_serial_pass_collects_every_file_that_holds_a_distributed_test() -> None:
    """The serial pass is given the test files that name the mark instead of collecting the whole suite again
    (~37 s): a file it missed would have its distributed tests run by neither pass."""
    import ast

    from tests.test_distributed_marks import _marks

    files = _pytest_args("test-slow")[1].split('"')[-1].split()
    sources = {f"tests/{p.name}": p.read_text() for p in sorted((ROOT / "tests").glob("test_*.py"))}
    marked = [name for name, text in sources.items() if "distributed" in _marks([ast.parse(text)])]
    assert "tests/test_spawned_launches.py" in marked and set(files) >= set(marked), (files, marked)
    assert set(files) <= {name for name, text in sources.items() if "mark.distributed" in text}, files
    assert not list((ROOT / "tests").glob("*/test_*.py")), "a test folder the file list does not look into"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize(("target", "marks"), SPLIT_TARGETS)
def test_test_workers_chooses_the_slow_targets_worker_count(target, marks):
    workers, serial = _pytest_args(target, "TEST_WORKERS=0")
    assert " -n 0 " in workers + " " and " -n " not in serial, (workers, serial)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("failing", [1, 2])
@pytest.mark.parametrize("target", ["test-slow", "test-all"])
def test_both_passes_run_and_either_failing_fails_the_target(tmp_path, target, failing):
    """A failure in the first pass still runs the distributed tests (CI sees both), and the target fails."""
    log = tmp_path / "calls"
    fake = tmp_path / "python"  # stands in for the venv's python: logs its arguments, pass `failing` exits 1
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\n[ "$(wc -l < {log})" -ne {failing} ]\n')
    fake.chmod(0o755)
    stamp = tmp_path / "installed"  # newer than pyproject.toml: nothing is installed
    stamp.touch()
    done = subprocess.run(["make", "-s", "-C", str(ROOT), target, f"PY={fake}", f"STAMP={stamp}"],
                          capture_output=True, text=True)
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "and not distributed" in calls[0], calls
    assert "and distributed" in calls[1] and "not distributed" not in calls[1], calls
    assert done.returncode != 0, done.stdout + done.stderr
