"""`make test` (what the README and .ci/run run) spreads the suite over pytest-xdist workers, and a fresh clone's
`make install` gets pytest-xdist from the ``dev`` extra: the suite ran serially on one core of two (~15 min)."""

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
