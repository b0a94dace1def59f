"""``python -m training.train --help``: every TrainConfig field with its type, default and docstring.

The field docstrings are the documentation of the config (training/config.py), but Python keeps no
attribute docstrings at run time, so the help text reads them from the source with ``ast`` when help is
asked for (nothing happens at import). The section comments (``# --- model ---``) become headings.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap
from pathlib import Path

from training.config import TrainConfig

USAGE = """usage: python -m training.train [--config FILE.yaml] [--FIELD VALUE | --FIELD=VALUE ...] [--resume] [--check]
       torchrun --nproc_per_node N -m training.train ...    (or: deepspeed --num_gpus N --module training.train ...)

--check: make a launch's checks without loading a model (prompts, reward and endpoint, ranks from
WORLD_SIZE, DeepSpeed JSON, what --resume would load, model_path), print the resolved config and exit
(0, or 2 with the problem).

Every field below can be set in the YAML file or on the command line (the command line wins); a bool
given without a value means true; lists and mappings are YAML text (--sde_window "[0, 2]").
Bad values stop the run before any model loads (exit 2)."""

_SECTION = re.compile(r"^\s*#\s*-+\s*(.+?)\s*-*\s*$")


def field_docs() -> list[tuple[str, str, str]]:
    """(section, field name, docstring) of every TrainConfig field, in source order."""
    source = Path(__file__).with_name("config.py").read_text()
    lines = source.splitlines()
    cls = next(node for node in ast.parse(source).body
               if isinstance(node, ast.ClassDef) and node.name == TrainConfig.__name__)
    out, section, previous_end = [], "", cls.lineno
    body = cls.body
    for k, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        for line in lines[previous_end:node.lineno - 1]:  # comments between the last field and this one
            if match := _SECTION.match(line):
                section = match.group(1)
        nxt = body[k + 1] if k + 1 < len(body) else node  # the last statement: no docstring follows it
        doc = nxt.value.value if (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                                  and isinstance(nxt.value.value, str)) else ""
        out.append((section, node.target.id, " ".join(doc.split())))
        previous_end = (nxt.end_lineno if doc else node.end_lineno) or node.lineno
    return out


def help_text(width: int = 100) -> str:
    """The whole ``--help`` text."""
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    defaults = TrainConfig()
    parts, current = [USAGE], None
    for section, name, doc in field_docs():
        if name not in fields:
            continue
        if section != current:
            parts.append(f"\n{section}:")
            current = section
        kind = str(fields[name].type).replace("typing.", "")
        parts.append(f"  --{name}  ({kind}; default {getattr(defaults, name)!r})")
        if doc:
            parts.append(textwrap.fill(doc, width, initial_indent="      ", subsequent_indent="      "))
    return "\n".join(parts) + "\n"
