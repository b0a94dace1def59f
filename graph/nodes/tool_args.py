"""The arguments of an inspect tool call as they are run, stored and sent back (DESIGN.md §3, inspect <-> tool_call).

A call's arguments were kept as the model wrote them: a view_frames call of 3,000 frame indices showed 16, but all
3,000 went back to the model with every later request, into reflect's request, the checkpoints and the trace, and a
1 MB string argument did the same, bounded only by the reply size. They are now the arguments as run (`call_args`),
with a short note of what was cut, at the two places a call is stored: the pending calls of a round
(`graph.nodes.inspect.round_calls`) and the exchange of a call that ran (`graph.nodes.evidence.execute`). A call not
run (a plan entry that is invalid or past a cap, a track past the round's cap) is stored as written, bounded
(`fields` None): with only the tool's keys kept, an invalid entry (a string, a view with a box but no frames) and a
cap's count of the entries left out were stored as {}.

Decisions where the issue was silent:
- A key a known tool does not take is left out (the tool ignored it anyway) with a note naming it.
- view_frames' frames are cut to `VIEW_FRAMES` (`graph.schemas.cap_view`) before anything else, so the note counts
  the frames the model asked for.
- What is left is cut only when its JSON is over `ARGS_CHARS` (a valid call of any tool is far shorter: 16 frames,
  32 points): strings to `TEXT_CHARS` and lists and objects where the room runs out, each cut marked in place. A
  call cut that way is still run and usually answered "invalid arguments", as the whole would have been.
- A tool name over `NAME_CHARS` characters is cut (no tool has such a name: it is answered "unknown tool"); a call id
  over it is treated as no id (`round_calls` gives it one).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from graph.schemas import cap_view

ARGS_CHARS = 2400
"""Characters (as JSON) of a call's arguments kept as they are; longer ones are cut to about half."""
TEXT_CHARS = 200
"""Characters kept of a string argument of a call cut for its length."""
NAME_CHARS = 64
"""Characters of a tool name, an argument name or a call id kept (the limit OpenAI puts on function names)."""


def call_args(name: str, args: object, fields: frozenset[str] | None) -> tuple[dict[str, Any], str | None]:
    """(`args` as run: only the `fields` of a known tool (None: an unknown one), view_frames' frames cut to a view,
    the rest cut when over `ARGS_CHARS`; a note on what was cut, or None). A second call changes nothing."""
    if isinstance(args, BaseModel):  # a plan entry the schema read (a track past the cap): its arguments as written
        args = args.model_dump(exclude_unset=True)
    kept: dict[str, Any] = dict(args) if isinstance(args, dict) else {"as_written": args}
    notes = []
    if fields is not None and (other := [str(k) for k in kept if k not in fields]):
        kept = {k: v for k, v in kept.items() if k in fields}
        names = ", ".join(repr(k[:NAME_CHARS]) for k in other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        notes.append(f"{names} {'is not an argument' if len(other) == 1 else 'are not arguments'} of {name}; ignored")
    if name == "view_frames" and "frames" in kept:
        kept["frames"], cap = cap_view(kept["frames"])
        notes += [cap] if cap else []
    if (chars := len(json.dumps(kept, default=str))) > ARGS_CHARS:
        kept = _cut(kept, [ARGS_CHARS // 2])
        notes.append(f"arguments of {chars} characters cut to about {ARGS_CHARS // 2}")
    return kept, "; ".join(notes) or None


def _cut(value: Any, room: list[int]) -> Any:
    """`value` cut to about `room[0]` characters of JSON (strings to `TEXT_CHARS`; the items and keys past the room
    replaced by one marker), spending `room`."""
    if isinstance(value, str):
        out = value if len(value) <= TEXT_CHARS else f"{value[:TEXT_CHARS]}... ({len(value)} characters)"
        room[0] -= len(out) + 2
        return out
    room[0] -= 2  # brackets or braces
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for k, item in enumerate(value):
            if room[0] <= 0:
                items.append(f"... {len(value) - k} more items")
                break
            items.append(_cut(item, room))
        return items
    if isinstance(value, dict):
        keys: dict[str, Any] = {}
        for k, (key, item) in enumerate(value.items()):
            if room[0] <= 0:
                keys["..."] = f"{len(value) - k} more keys"
                break
            short = str(key)[:NAME_CHARS]
            room[0] -= len(short) + 4
            keys[short] = _cut(item, room)
        return keys
    room[0] -= len(json.dumps(value, default=str)) + 2
    return value
