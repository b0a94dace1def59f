"""The README's settings tables and `raa` command lines against the code they document.

A newcomer copies `RAA_*` variables and `raa ...` lines from README.md; a variable renamed in the
settings, a default changed in one place only, or a flag renamed would silently stop matching. These
tests read the README and ask the code, never the network:
- which variables the settings objects read: each `from_env` is handed a mapping that records every
  lookup (so no list of names is kept twice), plus the `envvar` of every `raa` option;
- each documented default: setting a variable to the documented default must give the same settings as
  leaving it unset;
- each `raa ...` line in a bash block or inline code span names an existing command and only its flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import typer
import typer.core

from evals.judge import JudgeSettings
from graph.settings import BackboneSettings
from tools.settings import ToolSettings

README = Path(__file__).resolve().parents[1] / "README.md"
VARIABLE = re.compile(r"RAA_[A-Z0-9]+(?:_[A-Z0-9]+)*")
"""An `RAA_*` name; never ending in `_`, so a prefix such as `RAA_JUDGE_*` is not a variable."""
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b")
SETTINGS = (BackboneSettings, ToolSettings, JudgeSettings)
UNSET = ("(required)", "unset")
"""Default cells that name no value (nothing to compare)."""


class _Lookups(Mapping[str, str]):
    """An empty environment that records every variable a `from_env` looks up (get, `in` and [])."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.seen.add(key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def settings_reads() -> dict[type, set[str]]:
    """The `RAA_*` variables each settings class's `from_env` looks up."""
    reads = {}
    for cls in SETTINGS:
        env = _Lookups()
        cls.from_env(env)
        reads[cls] = {name for name in env.seen if name.startswith("RAA_")}
    return reads


def _commands(command: typer.core.TyperCommand | typer.core.TyperGroup) -> Iterator:
    yield command
    if isinstance(command, typer.core.TyperGroup):
        for sub in command.commands.values():
            yield from _commands(sub)


def cli() -> typer.core.TyperGroup:
    from graph.cli import app

    return typer.main.get_command(app)


def option_envvars() -> set[str]:
    """The environment variables `raa` options read (`--token`: RAA_TOOLS_TOKEN, RAA_REWARD_TOKEN)."""
    found = set()
    for command in _commands(cli()):
        for param in command.params:
            envvar = param.envvar
            found.update([envvar] if isinstance(envvar, str) else envvar or ())
    return found


def table_rows(text: str) -> list[tuple[list[str], str]]:
    """(variables, default cell) of every row of a README table whose header has a Default column and
    whose first column names `RAA_*` variables. Cells are split on unescaped pipes (`a` \\| `b`)."""
    rows: list[tuple[list[str], str]] = []
    block: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
            continue
        if block and "default" in (head := [h.lower() for h in block[0]]):
            column = head.index("default")
            rows += [(VARIABLE.findall(row[0]), row[column]) for row in block[2:] if VARIABLE.search(row[0])]
        block = []
    return rows


def test_every_variable_the_readme_names_is_read_and_every_read_one_is_documented():
    text = README.read_text()
    documented = set(VARIABLE.findall(text))
    read = set().union(*settings_reads().values()) | option_envvars()
    assert documented - read == set(), "README names RAA_* variables no settings object or option reads"
    assert read - documented == set(), "settings read RAA_* variables the README does not document"
    in_tables = {name for names, _ in table_rows(text) for name in names}
    assert set().union(*settings_reads().values()) - in_tables == set(), "settings missing from the tables"


def _documented_defaults() -> list[tuple[str, str]]:
    pairs = []
    for names, cell in table_rows(README.read_text()):
        if cell in UNSET:
            continue
        values = [v.strip().strip("`") for v in cell.split(",")] if len(names) > 1 else [cell.strip("`")]
        assert len(values) == len(names), f"README row {names}: {len(values)} defaults for {len(names)} variables"
        pairs += zip(names, values, strict=True)
    return pairs


def test_the_readme_tables_have_rows_with_defaults():
    """The parser found the three tables (agent, judge, tools): an empty list would pass the next test."""
    names = {name for name, _ in _documented_defaults()}
    assert {"RAA_TIMEOUT_S", "RAA_JUDGE_MAX_FRAMES", "RAA_TRACK_SHORT_SIDE", "RAA_QUALITY_MAX_EDGE"} <= names


@pytest.mark.parametrize(("name", "default"), _documented_defaults())
def test_a_documented_default_is_the_settings_default(name, default):
    owners = [cls for cls, reads in settings_reads().items() if name in reads]
    assert owners, f"{name} is read by no settings object"
    for cls in owners:
        assert cls.from_env({name: default}) == cls.from_env({}), \
            f"README says {name} defaults to {default!r}; {cls.__name__} defaults otherwise"


def raa_lines(text: str) -> list[str]:
    """Every `raa ...` command of the README: in bash blocks (continuation lines joined, comments cut)
    and in inline code spans."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            code = line.split("#", 1)[0]
            lines += [m.group(1) for m in re.finditer(r"(?:^|[\s;])(?:\S*/)?raa (.+)", code)]
    return lines + [span[4:] for span in re.findall(r"`(raa [^`]+)`", text)]


def test_every_raa_line_in_the_readme_names_a_command_and_its_flags():
    root = cli()
    lines = raa_lines(README.read_text())
    assert len(lines) > 20  # the parser found them
    for line in lines:
        command, words = root, line.split()
        while isinstance(command, typer.core.TyperGroup) and words and words[0] in command.commands:
            command = command.commands[words.pop(0)]
        assert command is not root and not isinstance(command, typer.core.TyperGroup), f"no command: raa {line}"
        options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        unknown = [flag for flag in FLAG.findall(" ".join(words)) if flag not in options]
        assert unknown == [], f"raa {line}: {command.name} has no {unknown}"
