"""A checkpoint's pending writes applied to its values, with `graph.state.AgentState`'s reducers (tracing).

A run stopped mid-superstep (Ctrl-C, a kill, a crash) keeps what its side-by-side nodes that finished (observe
beside contract) wrote only as pending writes of its latest checkpoint, not yet in its values. `raa trace`
merged their `steps` alone, so a faulted observe showed "fault (...)" in the step table without its `fault:`
line, and its notes, usage and records were missing.

Decisions where the issue was silent:
- Every state channel is merged the way LangGraph would: append-only lists concatenated, `usage` summed
  (`add_usage`), last-value fields replaced; the frozen contract keeps a value it already has (reading never
  raises `ContractFrozenError`). Channels that are not the run's state (LangGraph's own) are left out.
- Writes are applied task by task, tasks in the order their steps started, so `steps` and `faults` list the
  nodes in one order.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from langgraph.channels.binop import BinaryOperatorAggregate

from graph.state import AgentState

Reducer = Callable[[Any, Any], Any]


def _append(old: Any, new: Any) -> list[Any]:
    return [*(old or []), *(new or [])]


def _keep_first(old: Any, new: Any) -> Any:
    return new if old is None else old


def _replace(old: Any, new: Any) -> Any:
    return new


@functools.cache
def reducers() -> dict[str, Reducer]:
    """Each AgentState field's reducer as applied to plain (JSON-mode) values (module docstring)."""
    out: dict[str, Reducer] = {}
    for name, hint in get_type_hints(AgentState, include_extras=True).items():
        meta = get_args(hint)[1] if get_origin(hint) is Annotated else None
        if meta is operator.add:
            out[name] = _append
        elif isinstance(meta, BinaryOperatorAggregate):  # the frozen contract (`graph.state.FrozenValue`)
            out[name] = _keep_first
        elif callable(meta):
            out[name] = meta
        else:
            out[name] = _replace
    return out


def _started(value: Any) -> str:
    """The earliest start time of a `steps` write ("" when it has none)."""
    times = [str(s.get("started", "")) for s in value or [] if isinstance(s, dict)]
    return min(times, default="")


def with_pending(values: dict[str, Any], writes: Iterable[tuple[str, str, Any]]) -> dict[str, Any]:
    """`values` with the pending `writes` ((task id, channel, plain value)) of the state's channels applied."""
    mine = [(task, channel, value) for task, channel, value in writes if channel in reducers()]
    if not mine:
        return values
    order = {task: _started(value) for task, channel, value in mine if channel == "steps"}
    out = dict(values)
    for _, channel, value in sorted(mine, key=lambda w: order.get(w[0], "")):  # stable: a task's writes in order
        out[channel] = reducers()[channel](out.get(channel), value)
    return out
