"""The reward table's reading of one result row (`evals.table`): whether the metrics can count it (`check_row`,
`TableRowError`), the faults it recorded (`row_faults`), whether an outage of the reward machinery made it ineligible
(`outage`), whether its label is one the table counts (`check_label`) and whether its verdict is a true/false one
(`not_boolean`). `raa eval compare`, `raa eval draws` and
`raa eval reward`'s resume read rows the same way.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, TypeGuard

from graph.usage import USAGE_KEYS

if TYPE_CHECKING:  # pragma: no cover
    from graph.schemas import Fault


class TableRowError(ValueError):
    """A result row the metrics cannot count (written by hand or another tool); the message names the row and
    the field."""


MAX_FLOAT = sys.float_info.max
"""The largest number a float holds: a whole number above it has no float (``float()`` overflows)."""


def finite(value: object) -> TypeGuard[int | float]:
    """A finite int or float, not a bool: what the metrics count as a reward or a usage figure. Every int is finite
    (``math.isfinite`` raised OverflowError on one too large for a float, a hand edit's 10**400: a traceback where
    the row's range check now refuses it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)


def usage_counts(usage: object) -> bool:
    """Whether a row's (non-null) ``usage`` is one the usage means can take: an object whose figures
    (`graph.usage.USAGE_KEYS`; a missing one is 0) are whole numbers >= 0 (2.0 too), as a run counts calls, images
    and tokens. A negative or fractional one (hand-edited) lowered or skewed the means; a whole number no float holds
    (above `MAX_FLOAT`: a hand edit's 10**400) overflowed the means' ``float()``."""
    return isinstance(usage, dict) and all(
        finite(v := usage.get(k, 0)) and 0 <= v <= MAX_FLOAT and (isinstance(v, int) or v.is_integer())
        for k in USAGE_KEYS)


def check_row(row: object, where: str) -> dict:
    """``row`` when the metrics can count it: an object whose ``reward`` is null or a finite number in 0..1, whose
    ``judge`` is null or an object and whose ``usage`` is null or an object of counts (`usage_counts`); raises
    `TableRowError` naming the row (`where`: `row_name`, or ``PATH:N`` where the caller read it from a file), the
    field and its value. A reward outside 0..1 (hand-edited) was counted: F+ (reward > 0) and P0 (reward = 0) left
    a negative one out, but the label and pattern means took it in."""
    if not isinstance(row, dict):
        raise TableRowError(f"{where}: expected an object, got {type(row).__name__}")
    if row.get("reward") is not None and not finite(row["reward"]):
        raise TableRowError(f"{where}: field 'reward' must be a finite number or null, got {row['reward']!r}")
    if row.get("reward") is not None and not 0.0 <= row["reward"] <= 1.0:
        raise TableRowError(f"{where}: field 'reward' must be in 0..1 or null (no reward of the agent is outside "
                            f"it), got {row['reward']!r}")
    if row.get("judge") is not None and not isinstance(row["judge"], dict):
        raise TableRowError(f"{where}: field 'judge' must be an object or null, got {row['judge']!r}")
    usage = row.get("usage")
    if usage is not None and not usage_counts(usage):
        raise TableRowError(f"{where}: field 'usage' must be an object of whole numbers >= 0 "
                            f"({', '.join(USAGE_KEYS)}), got {usage!r}")
    try:
        row_faults(row)
    except ValueError:
        raise TableRowError(f"{where}: field 'faults' must be a list of fault records (stage, kind, message) or "
                            f"null, got {row['faults']!r}") from None
    return row


def check_label(row: dict, where: str) -> dict:
    """``row`` when its ``label`` is one of the clip suite's (`evals.manifest_rows.LABELS`); else `TableRowError`
    naming `where` and the value. F+ and P0 count rows by label: another one (a hand edit's "failrue", another tool's
    row without one) stayed in N but left n_neg and n_prog unsaid. `raa eval report` checks the rows it reads;
    `raa eval reward` takes each current row's label from its checked manifest."""
    from evals.manifest_rows import LABELS

    if row.get("label") not in LABELS:
        raise TableRowError(f"{where}: field 'label' must be one of {', '.join(LABELS)}, got {row.get('label')!r}")
    return row


def row_name(row: object, preset: str, index: int) -> str:
    """A row among a preset's rows as `check_row` names it: "PRESET row INDEX ('CLIP')"."""
    return f"{preset} row {index}" + (f" ({row.get('path')!r})" if isinstance(row, dict) else "")


def row_faults(row: dict) -> list[Fault]:
    """The faults a result row recorded (none for a row written before rows recorded them: no known outage, its
    reasons are not read as `graph.batch_retry.recorded_faults` reads them); ValueError when ``faults`` is neither
    null nor a list of fault records (`graph.schemas.stored_faults`)."""
    from graph.schemas import stored_faults

    return stored_faults(row.get("faults"))


def outage(row: dict) -> bool:
    """An ineligible row whose recorded faults say the machinery failed, not the clip (module docstring)."""
    return row.get("reward") is None and any(f.outage for f in row_faults(row))


def not_boolean(verdict: dict) -> bool:
    """A `judged` verdict whose `reasonable` is not a JSON boolean (module docstring): no acceptance, named."""
    return verdict.get("status") == "judged" and not isinstance(verdict.get("reasonable"), bool)
