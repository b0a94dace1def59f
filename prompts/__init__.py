"""Prompt templates of the reward agent: one Markdown file per stage (DESIGN.md §2 "prompts/").

Every file starts with the line `# stage: <name>`; the scripted test model and the traces use that
line to tell stages apart. Templates use `{{name}}` placeholders: `render` substitutes only those,
so literal braces (JSON examples) need no escaping and substituted values are never re-interpreted
(an instruction containing `{x}` or `{{x}}` is inserted verbatim).

Decision where the issue was silent: an unknown placeholder left in a template, or a variable passed
that the template does not use, raises `KeyError` naming it (templates and callers stay in sync).

Text several stages share lives once, in a part file (prompts/parts/<name>.md, no stage line): a template
includes it with `{{> name}}` (on a line of its own, by convention), replaced by the part's text without its
final newline when the template is loaded (`expand_parts`), so `placeholders` and `render` see the whole
template and the rendered prompt is what it was with the text written out. Parts include no other part; an
include of no part raises `KeyError`. Substituted values are never expanded (`render` is one pass over the loaded
template): an instruction containing `{{> name}}` is inserted verbatim.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

STAGES = ("observe", "contract", "assess", "inspect", "plan", "reflect", "audit", "repair", "final_check",
          "direct")
_PLACEHOLDER = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
_INCLUDE = re.compile(r"\{\{>\s*([^}]*?)\s*\}\}")


def _part(name: str, template: str) -> str:
    """The text of part `name` (prompts/parts/<name>.md) without its final newline, as `template` includes it."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise KeyError(f"invalid prompt part {name!r} included by prompt {template!r}")
    path = resources.files(__name__).joinpath("parts", f"{name}.md")
    if not path.is_file():
        raise KeyError(f"unknown prompt part {name!r} included by prompt {template!r} (no prompts/parts/{name}.md)")
    text = path.read_text(encoding="utf-8").removesuffix("\n")
    if _INCLUDE.search(text):
        raise KeyError(f"prompt part {name!r} includes another part; parts include none")
    return text


def expand_parts(text: str, template: str) -> str:
    """`text` (the template of prompt `template`) with each `{{> part}}` replaced by that part (module docstring)."""
    return _INCLUDE.sub(lambda m: _part(m.group(1), template), text)


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
    return expand_parts(text, name)


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
