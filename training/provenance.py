"""What scored a run's rewards: ``OUTPUT_DIR/reward_backbone.json`` for runs with an agent reward.

The trainer's ``config.yaml`` names the reward (``reward: agent``, its preset), but the vision-language model
behind it comes from the ``RAA_*`` environment of the launch and was written nowhere, so two runs' reward
curves could not be told apart by the model that gave them. Decisions where the issues were silent:

- Rank 0 writes `BackboneSettings.scoring` (model, base URL, structured-output method, temperature, token
  cap, image size and quality, inspect mode, coordinates; never the API key) at every launch of a run
  that uses the agent, directly or as a part of a sum. Other rewards write no file.
- A resume (``--resume``) whose backbone differs from the recorded one says so in one line naming what changed (the
  rewards before and after come from different scorers) and records the new one; it does not refuse:
  moving a run to another server can be deliberate.
- The training report shows the recorded model next to the reward (training/report.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REWARD_BACKBONE = "reward_backbone.json"
"""File name in output_dir."""


def read_reward_backbone(out_dir: Path) -> dict[str, Any] | None:
    """The recorded backbone of the run in ``out_dir``; None without a readable record."""
    try:
        data = json.loads((Path(out_dir) / REWARD_BACKBONE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def backbone_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``key: old -> new`` for every setting that differs between two records, in ``after``'s order."""
    keys = list(after) + [k for k in before if k not in after]
    return [f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in keys if before.get(k) != after.get(k)]


def record_reward_backbone(out_dir: Path, scoring: dict[str, Any], *, resume: bool) -> str | None:
    """Write ``scoring`` (`BackboneSettings.scoring`) to ``out_dir``; on a ``resume``, a note naming the
    changes when the run's earlier launch recorded another backbone, else None (a fresh run, even one
    overwriting an earlier run's folder, has no earlier rewards). Call on rank 0."""
    before = read_reward_backbone(out_dir) if resume else None
    (Path(out_dir) / REWARD_BACKBONE).write_text(json.dumps(scoring, indent=1) + "\n", encoding="utf-8")
    changes = backbone_changes(before, scoring) if before is not None else []
    if not changes:
        return None
    return ("note: the reward agent's backbone differs from the one this run's earlier rewards came from ("
            + "; ".join(changes) + f"); recorded in {REWARD_BACKBONE}")
