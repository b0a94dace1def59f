"""What scored a run's rewards: ``OUTPUT_DIR/reward_backbone.json`` for runs with an agent reward, local
(``reward: agent``) or served (``reward: http`` from ``raa serve-reward``).

The trainer's ``config.yaml`` names the reward (``reward: agent``, its preset), but the vision-language model
behind it comes from the ``RAA_*`` environment of the launch and was written nowhere, so two runs' reward
curves could not be told apart by the model that gave them. Decisions where the issues were silent:

- Rank 0 writes `BackboneSettings.scoring` (model, base URL, structured-output method, temperature, token
  cap, image size and quality, inspect mode, coordinates; never the API key) at every launch of a run
  that uses the agent, directly or as a part of a sum. Other rewards write no file.
- A resume (``--resume``) whose backbone differs from the recorded one says so in one line naming what changed (the
  rewards before and after come from different scorers) and records the new one; it does not refuse:
  moving a run to another server can be deliberate.
- ``reward: http``: the backbone lives on the service host, so rank 0 asks each service for it (``GET
  /v1/info`` next to the score url; `raa serve-reward` answers its ``scoring`` and preset) and records
  the first service's ``scoring`` with ``service`` (its url) and ``preset``. Services that answer
  differently from the first are named in a note (the ranks' rewards come from different scorers). A
  service that does not report its scoring (another implementation, an older `raa serve-reward`, an
  info request that fails) is recorded as ``{"service": url, "scoring": "unreported: <why>"}``: the
  run goes on, and the record says that nothing is known rather than naming nothing.
- A sum records its agent part's backbone (the launch's ``RAA_*``) when it has one, else its first http
  part's service.
- The training report shows the recorded model (and a service's preset) next to the reward
  (training/report.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.jsonl import parsed_file

REWARD_BACKBONE = "reward_backbone.json"
"""File name in output_dir."""


def read_reward_backbone(out_dir: Path) -> dict[str, Any] | None:
    """The recorded backbone of the run in ``out_dir``; None without a readable record."""
    try:
        data = parsed_file(Path(out_dir) / REWARD_BACKBONE)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def backbone_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``key: old -> new`` for every setting that differs between two records, in ``after``'s order."""
    keys = list(after) + [k for k in before if k not in after]
    return [f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in keys if before.get(k) != after.get(k)]


def served_scoring(reward_fn: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """(record, notes) for a reward scored by `raa serve-reward` services (an HttpAgentReward, or the first
    http part of a sum; module docstring); (None, []) for any other reward."""
    from training.rewards import HttpAgentReward
    from training.sum_reward import SumReward

    parts = [p.fn for p in reward_fn.parts] if isinstance(reward_fn, SumReward) else [reward_fn]
    http = next((p for p in parts if isinstance(p, HttpAgentReward)), None)
    if http is None:
        return None, []
    records = [_service_record(url, info) for url, info in http.service_info()]
    notes = []
    for other in records[1:]:
        if isinstance(other.get("scoring"), str):
            notes.append(f"note: the reward service {other['service']} does not say which backbone scores "
                         f"({other['scoring']}); recorded: {records[0]['service']}")
            continue
        changes = [c for c in backbone_changes(records[0], other) if not c.startswith("service:")]
        if changes:
            notes.append(f"note: the reward service {other['service']} scores with another backbone than "
                         f"{records[0]['service']} ({'; '.join(changes)}); recorded: the first")
    return records[0], notes


def _service_record(url: str, info: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(info, str):
        return {"service": url, "scoring": f"unreported: {info}"}
    scoring = info.get("scoring")
    if not isinstance(scoring, dict):
        return {"service": url, "scoring": "unreported: its /v1/info has no 'scoring'"}
    return {"service": url, "preset": info.get("preset"), **scoring}


def record_scoring(out_dir: Path, reward_fn: Any, agent_settings: Any, *, resume: bool) -> list[str]:
    """Record what scores the run's rewards (module docstring) and return the notes to print: services
    that disagree, a resume under another backbone. Call on rank 0."""
    notes: list[str]
    if agent_settings is not None:
        record, notes = agent_settings.scoring(), []
    else:
        record, notes = served_scoring(reward_fn)
    if record is None and not resume:  # a fresh run scored by no model: an earlier run's record is not its own
        (Path(out_dir) / REWARD_BACKBONE).unlink(missing_ok=True)
    if record is not None and (note := record_reward_backbone(out_dir, record, resume=resume)):
        notes.append(note)
    return notes


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
