"""The reward table's per-clip means (`evals.table`): mean reward by group (label, pattern) with its row counts
(`MeanReward`, `mean_rewards`) and the mean usage per clip (`usage_means`, `USAGE_DIGITS`). Both leave out the
rows an outage of the reward machinery took (`evals.table_rows.outage`), as R / N, F+ / n_neg and P0 / n_prog do;
`evals.table`'s module docstring gives the definitions. Split from evals/table.py (its size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evals.table_rows import outage
from graph.usage import USAGE_KEYS

USAGE_NAMES = {key: key.replace("_", " ") for key in USAGE_KEYS}
"""Each usage figure's key in a row's usage (`graph.usage.USAGE_KEYS`) and its name in the tables' headers and on
the console ("<name>/clip"; table.csv's column is "<key>_per_clip")."""
USAGE_DIGITS = tuple((key, *((0, 1) if key.endswith("_tokens") else (1, 3))) for key in USAGE_KEYS)
"""Each usage figure per clip (`graph.usage.USAGE_KEYS`, in its order): (key, decimals in table.md and on the
console, decimals in table.csv); token counts are large, the others a few per clip. Derived, so a new `Usage`
counter gets its column without a second list to keep in step."""
LATE_USAGE_KEYS = frozenset({"attempts"})
"""Usage figures added after rows were first written: a row whose usage lacks one did not record it (it is left
out of that figure's mean, not counted as 0: 0 attempts beside 3 calls would read as fewer requests than replies)."""


@dataclass
class MeanReward:
    """Mean reward over the rows of one group that have a reward."""

    mean: float | None
    """Mean reward (None when no row of the group has one)."""
    rewarded: int
    """Rows with a reward (the mean's denominator)."""
    total: int
    """Every row of the group, the outage ones included (summary.json's `total` has always meant this)."""
    outage: int = 0
    """Rows of the group an outage of the reward machinery took: no output of the preset."""
    total_excluding_outage: int = field(init=False)
    """`total` less `outage`: the group's rows the tables show beside the mean (derived, kept in summary.json)."""

    def __post_init__(self) -> None:
        self.total_excluding_outage = self.total - self.outage

    @property
    def counts(self) -> str:
        """"REWARDED/ROWS" as the tables show it beside the mean, ROWS less the outage rows and naming them ("2/3; 1
        outage not counted", as the F+ and P0 cells do)."""
        lost = f"; {self.outage} outage not counted" if self.outage else ""
        return f"{self.rewarded}/{self.total_excluding_outage}{lost}"


def _mean_reward(rows: Sequence[dict]) -> MeanReward:
    rewards = [float(r["reward"]) for r in rows if r.get("reward") is not None]
    lost = sum(map(outage, rows))
    return MeanReward(sum(rewards) / len(rewards) if rewards else None, len(rewards), len(rows), lost)


def mean_rewards(rows: Sequence[dict], key: str) -> dict[str, MeanReward]:
    """The `MeanReward` of each value of `key` ("label", "pattern"; "-" when a row has none), by name."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key) or "-"), []).append(row)
    return {name: _mean_reward(group) for name, group in sorted(groups.items())}


def _usage_mean(known: Sequence[dict], key: str) -> float | None:
    """The mean of one usage figure over the recorded usages `known` (a figure of `LATE_USAGE_KEYS` over those that
    record it; any other absent figure counts as 0); None when there is none to average."""
    usages = [u for u in known if key in u] if key in LATE_USAGE_KEYS else known
    return sum(float(u.get(key, 0)) for u in usages) / len(usages) if usages else None


def usage_means(rows: Sequence[dict]) -> tuple[dict[str, float | None], int, int]:
    """(the mean of each usage figure per clip, rows whose usage is not recorded, outage rows with a recorded usage):
    the means cover the rows that recorded their usage (null: a scorer chunk that crashed; absent: another tool's
    row), less the outage rows. A row of both kinds counts as unknown usage only."""
    known = [r for r in rows if isinstance(r.get("usage"), dict)]  # None / absent: not recorded, not 0
    counted = [r["usage"] for r in known if not outage(r)]
    return {k: _usage_mean(counted, k) for k in USAGE_KEYS}, len(rows) - len(known), len(known) - len(counted)
