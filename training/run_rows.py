"""Which rows of a run's logs the training report uses (training/report.py): an iteration's last attempt where a
resume redid it, and the rewards.jsonl rows it can place in its rollouts table. Pure functions on parsed rows.

Decisions where the issue was silent: a rewards.jsonl row whose iteration, rank, group or sample is there but is no
integer (``null``, text, a list: a hand-edited or foreign file) is left out and named in the report's header
(`unplaced_rollout`): ``int(None)`` stopped the whole page with a TypeError, a ``null`` sample did while sorting, a
list while picking the last attempt. A field that is not there at all still reads as before (rank, group and sample
as 0; the row kept whatever its iteration).
"""

from __future__ import annotations

from typing import Any

SLOT_KEYS = ("iteration", "rank", "group", "sample")
"""The fields that place a rewards.jsonl row (one rollout of one iteration)."""


def last_attempt_ineligible(rows: list[dict[str, Any]], metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ineligible.jsonl lines without those of an iteration's earlier attempts (a resume that redid it): of an
    iteration whose metrics row (the last attempt's) says ``ineligible_count`` n, its last n lines; all of an
    iteration without one. A resume trims the logs itself (training/metrics_log.py); this is for runs that did
    not. Order kept; pure."""
    counts = {int(r["iteration"]): r["ineligible_count"] for r in metrics
              if isinstance(r.get("ineligible_count"), int) and not isinstance(r.get("ineligible_count"), bool)}
    seen: dict[Any, int] = {}
    out = []
    for row in reversed(rows):  # from the end: the last attempt's lines come first
        it = row.get("iteration")
        seen[it] = seen.get(it, 0) + 1
        if not isinstance(it, int) or it not in counts or seen[it] <= counts[it]:
            out.append(row)
    return out[::-1]


def last_attempt_rollouts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """rewards.jsonl lines, one per (iteration, rank, group, sample): the last one, where a resume redid the
    iteration (lines without those fields all kept). Order of the kept lines kept; pure."""
    def slot(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row.get(k) for k in SLOT_KEYS)

    last = {slot(r): k for k, r in enumerate(rows)}
    return [r for k, r in enumerate(rows) if None in slot(r) or last[slot(r)] == k]


def unplaced_rollout(row: dict[str, Any]) -> str | None:
    """None when ``row``'s iteration, rank, group and sample are integers or not there (module docstring); else
    the row named by them, for the report's header: ``iteration 3 rank None group 0 sample None``."""
    if all(k not in row or (isinstance(row[k], int) and not isinstance(row[k], bool)) for k in SLOT_KEYS):
        return None
    return " ".join(f"{k} {row.get(k, '-')!r}" for k in SLOT_KEYS)


def placed_rollouts(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the rows `unplaced_rollout` accepts, in order; the others, named); pure."""
    named = [unplaced_rollout(r) for r in rows]
    return [r for r, n in zip(rows, named, strict=True) if n is None], [n for n in named if n is not None]
