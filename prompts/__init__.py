"""Prompt templates of the reward agent: one Markdown file per stage (DESIGN.md §2 "prompts/").

Every file starts with the line `# stage: <name>`; the scripted test model and the traces use that
line to tell stages apart. Templates use `{{name}}` placeholders: `render` substitutes only those,
so literal braces (JSON examples) need no escaping and substituted values are never re-interpreted
(an instruction containing `{x}` or `{{x}}` is inserted verbatim).

Decision where the issue was silent: an unknown placeholder left in a template, or a variable passed
that the template does not use, raises `KeyError` naming it (templates and callers stay in sync).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

STAGES = ("observe", "contract", "assess", "inspect", "plan", "reflect", "audit", "repair", "final_check",
          "direct")
_PLACEHOLDER = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


@cache
def load_prompt(name: str) -> str:
    """The raw template text of stage `name` (prompts/<name>.md)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise KeyError(f"invalid prompt name {name!r}")
    path = resources.files(__name__).joinpath(f"{name}.md")
    if not path.is_file():
        raise KeyError(f"unknown prompt {name!r}; the agent stages are {', '.join(STAGES)}")
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0] if text else ""
    if first.strip() != f"# stage: {name}":
        raise ValueError(f"prompt {name}.md must start with '# stage: {name}', found {first!r}")
    return text


def placeholders(name: str) -> set[str]:
    """Placeholder names used by the template of stage `name`."""
    return set(_PLACEHOLDER.findall(load_prompt(name)))


def render(name: str, **variables: object) -> str:
    """Template `name` with its `{{var}}` placeholders replaced by `str(value)` (single pass)."""
    text = load_prompt(name)
    needed = placeholders(name)
    missing = needed - variables.keys()
    if missing:
        raise KeyError(f"prompt {name!r} needs variables {sorted(missing)}")
    extra = variables.keys() - needed
    if extra:
        raise KeyError(f"prompt {name!r} has no placeholders {sorted(extra)}")
    return _PLACEHOLDER.sub(lambda m: str(variables[m.group(1)]), text)


def stage_of(system_text: str) -> str | None:
    """The stage name from a system message's first line `# stage: <name>`, if present."""
    first = system_text.lstrip().splitlines()[0] if system_text.strip() else ""
    m = re.fullmatch(r"#\s*stage:\s*([a-z_]+)\s*", first)
    return m.group(1) if m else None
