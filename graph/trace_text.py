"""Trace records as display text (`raa trace`, `raa score --stream`, the run report's step table): one
StepRecord as the columns of a row (`step_row`; its start as a time of day, `start_time`), a streamed node update as one line (`describe_update`), gate
inputs (`gate_value`: rewards as `reward_text` writes them), and any text made safe for a terminal
(`printable`). Reading traces is `graph.tracing`."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: object) -> str:
    """`text` for a terminal: control characters (an escape sequence that would clear the screen or restyle
    what follows, a bell) written out as `\\x1b`; newlines and tabs kept ("\\r\\n" read as "\\n")."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text).replace("\r\n", "\n"))


def _fmt_frames(frames: Iterable[int] | None) -> str:
    """Every frame, in order, runs of three or more consecutive frames as ranges ("0-15,17-32", "4-6,9,10"). The first
    12 and a count of the rest hid which frames a step used past them (a repair's last evidence frames)."""
    parts: list[str] = []
    run: list[int] = []
    for f in [*(frames or []), None]:
        if run and isinstance(f, int) and isinstance(run[-1], int) and f == run[-1] + 1:
            run.append(f)
            continue
        if run:
            parts += [f"{run[0]}-{run[-1]}"] if len(run) > 2 else [str(r) for r in run]
        run = [] if f is None else [f]
    return ",".join(parts)


def _fmt_box(box: Any) -> str:
    """A box as "x0,y0,x1,y1" (2 decimals); a malformed one (as the model wrote it) as written."""
    values = box if isinstance(box, list) else [box]
    return ",".join(f"{v:.2f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v) for v in values)


def _fmt_crops(crops: Iterable[dict[str, Any]] | None) -> str:
    """The crops of a step; one that fell back reads "f12[full frame, asked <box>] fallback: <why>" (its box was
    empty, "f12[]", which hid both the box asked for and that the frame was shown whole)."""
    parts = []
    for c in crops or []:
        if c.get("fallback"):
            asked = c.get("requested")  # absent from traces written before it was recorded
            box = "full frame" if asked is None else f"full frame, asked {_fmt_box(asked)}"
            parts.append(f"f{c.get('frame')}[{box}] fallback: {c.get('reason')}")
        else:
            parts.append(f"f{c.get('frame')}[{_fmt_box(c.get('box') or [])}]")
    return "; ".join(parts)


REWARD_GATE_INPUTS = ("reward", "direct_reward")
"""Gate inputs that are rewards, written as rewards are (`reward_text`: 0.0004 never reads 0.000)."""


def gate_value(key: str, value: Any) -> str:
    """One gate input as text: a reward by `reward_text`, another number with 3 decimals."""
    from graph.reward_format import reward_text

    if isinstance(value, float):
        return reward_text(value) if key in REWARD_GATE_INPUTS else f"{value:.3f}"
    return str(value)


def _fmt_gate(gate: dict[str, Any] | None) -> str:
    if not gate:
        return ""
    return " ".join(f"{k}={gate_value(k, v)}" for k, v in gate.items())


def start_time(started: Any, *, date: bool = False) -> str:
    """A step's `started` (UTC ISO-8601) as its time of day to the millisecond, "03:41:46.123" (`date`: with the
    date before it, as `raa trace` prints the run's first start once); "" when none was recorded (older traces), a
    value that is no time as written."""
    if not started:
        return ""
    try:
        when = dt.datetime.fromisoformat(str(started))
    except ValueError:
        return str(started)
    time = when.strftime("%H:%M:%S.%f")[:12]
    return f"{when:%Y-%m-%d} {time}" if date else time


def audit_round_text(audit: Any) -> str:
    """A step's stored `audit_round` (0-based: the repair rounds done before it) as the round it belongs to, from 1:
    an audit and the repair acting on it share a round ("round 1: ..." is the first repair's decision, and the
    report names it "repair 1"), the audit after repair N is round N + 1. The column printed the stored value, so
    the first repair read 0 beside its "round 1". "" for a step of no round; a value that is no int (an edited
    fork) as written."""
    if audit is None:
        return ""
    return str(audit + 1) if isinstance(audit, int) and not isinstance(audit, bool) else str(audit)


def step_row(index: int, step: dict[str, Any]) -> dict[str, str]:
    """One StepRecord as display strings (columns of `raa trace`), control characters written out (`printable`)."""
    duration = step.get("duration_s")
    audit = step.get("audit_round")
    row = {
        "#": str(index),
        "node": str(step.get("node", "?")),
        "started": start_time(step.get("started")),
        "duration": "" if duration is None else f"{float(duration):.2f}s",
        "decision": str(step.get("decision", "")),
        "frames": _fmt_frames(step.get("frames")),
        "crops": _fmt_crops(step.get("crops")),
        "tools": "\n".join(str(t) for t in step.get("tool_summaries") or []),
        "audit": audit_round_text(audit),
        "gate": _fmt_gate(step.get("gate_inputs")),
    }
    return {k: printable(v) for k, v in row.items()}


def describe_update(node: str, update: Any) -> str:
    """One line for a `stream_mode="updates"` item: node, duration, decision (from its StepRecord)."""
    if not isinstance(update, dict):
        return f"{node}: (no state update)"
    steps = [s for s in update.get("steps") or [] if isinstance(s, dict)]
    if not steps:
        keys = ", ".join(sorted(update)) or "nothing"
        return f"{node}: updated {keys}"
    lines = []
    for s in steps:
        row = step_row(0, s)
        extra = " ".join(f"{k}={row[k]}" for k in ("frames", "crops", "audit", "gate") if row[k])
        lines.append(f"{row['node']} ({row['duration']}): {row['decision']}" + (f"  [{extra}]" if extra else ""))
    return "\n".join(lines)


ASSESSING_NODES = ("assess", "reflect", "repair")
"""The nodes that each append one assessment to the state's `assessments` when they do not fault."""


def assessment_stages(steps: Iterable[dict[str, Any]], count: int) -> list[str] | None:
    """The stage that wrote each of a run's `count` assessments, in order ("assess", "reflect", "repair 1", ...),
    from its steps: the steps of `ASSESSING_NODES` that did not fault. None when they are not `count` (a trace
    cut short, an edited fork): no label rather than a wrong one."""
    labels = []
    for step in steps:
        node = step.get("node")
        if node not in ASSESSING_NODES or str(step.get("decision", "")).startswith("fault"):
            continue
        audit = audit_round_text(step.get("audit_round"))  # as the repairs table and `raa trace` show the round
        labels.append(f"repair {audit}" if node == "repair" and audit else str(node))
    return labels if len(labels) == count else None
