"""`raa make-clips`' options as documented: the `--size` help states the limits `evals.clipsuite.suite_size_problem`
enforces (it said only "Square frame size in pixels"; 17 or 2048 were refused after the fact), and the README's clip
suite usage line names every option of the command (`--progress/--no-progress` was in neither)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

README = Path(__file__).resolve().parents[1] / "README.md"


def _make_clips() -> typer.core.TyperCommand:
    from graph.cli import app

    return typer.main.get_command(app).commands["make-clips"]


def test_the_size_help_states_the_limits_the_suite_enforces():
    from evals.clipsuite import suite_size_problem
    from evals.scenes import MAX_SIDE

    size = next(p for p in _make_clips().params if "--size" in p.opts)
    low, high = map(int, re.search(r"even, (\d+) to (\d+)", size.help).groups())
    assert (low, high) == (16, MAX_SIDE)
    assert suite_size_problem(low) is None and suite_size_problem(high) is None
    assert suite_size_problem(low - 2) and suite_size_problem(high + 2) and suite_size_problem(low + 1)


def test_the_readme_usage_line_names_every_option_of_make_clips():
    text = README.read_text()
    line = re.search(r"`(raa make-clips --out clips [^`]*)`", text).group(1)
    listed = set(re.findall(r"--[a-z-]+", line))
    missing = [p.opts for p in _make_clips().params
               if p.opts and not (set(p.opts) | set(p.secondary_opts)) & listed and p.opts != ["--help"]]
    assert missing == [], line
    assert "`--no-progress`" in text[text.index(line):text.index("### Video I/O")]  # and says what it does
