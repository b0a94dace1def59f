"""Score mapping and failure gate: pure functions, no I/O (DESIGN.md §3, paper Sec. 3.2).

    R_diag = (0.70 T + 0.20 P + 0.10 V)(0.5 + 0.5 P)
    R      = ⊥ (None) if not eligible; 0 if failure or unverifiable; else R_diag

T, P and V come from the structured assessment through `score_mapping`, never from a number the
model wrote. Decisions where the issue was silent:
- T averages the essential requirements (met 1, partial 0.5, not_met / unverifiable / missing 0);
  a contract with no essential requirement averages all requirements.
- Judgments for ids outside the contract are ignored; a requirement judged twice uses the first. (The nodes
  tidy each assessment before it gets here, `graph.nodes.common.tidy_assessment`: an id differing from a
  contract id only in case or spaces is read as it, every dropped judgment or frame ref is noted, and a met or
  partial judgment citing no frame the model was shown arrives here as unverifiable, `score_uncited`.)
- Rubric levels 1..5 map linearly to 0, 0.25, 0.5, 0.75, 1.
"""

from __future__ import annotations

import math

from graph.schemas import Assessment, TaskContract

STATUS_WEIGHT = {"met": 1.0, "partial": 0.5, "not_met": 0.0, "unverifiable": 0.0}
LEVEL_MIN, LEVEL_MAX = 1, 5


def _unit(name: str, x: float) -> float:
    if not isinstance(x, int | float) or math.isnan(x) or not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    return float(x)


def diagnostic_reward(T: float, P: float, V: float) -> float:
    """R_diag = (0.70 T + 0.20 P + 0.10 V)(0.5 + 0.5 P) (paper Sec. 3.2, Eq. R_diag)."""
    T, P, V = _unit("T", T), _unit("P", P), _unit("V", V)
    return (0.70 * T + 0.20 * P + 0.10 * V) * (0.5 + 0.5 * P)


def gate_reward(eligible: bool, failure: bool, unverifiable: bool,
                T: float | None, P: float | None, V: float | None) -> float | None:
    """R = None if not eligible; 0 if failure or unverifiable; else R_diag (paper Sec. 3.2, Eq. R).

    Raises ValueError when an eligible, non-failed clip lacks T, P or V (no reward is invented).
    """
    if not eligible:
        return None
    if failure or unverifiable:
        return 0.0
    if T is None or P is None or V is None:
        raise ValueError("gate_reward needs T, P and V for an eligible clip without failure")
    return diagnostic_reward(T, P, V)


def level_to_unit(level: int) -> float:
    """Map a rubric level 1..5 linearly onto [0, 1]."""
    if isinstance(level, bool) or not isinstance(level, int) or not LEVEL_MIN <= level <= LEVEL_MAX:
        raise ValueError(f"rubric level must be an int in {LEVEL_MIN}..{LEVEL_MAX}, got {level!r}")
    return (level - LEVEL_MIN) / (LEVEL_MAX - LEVEL_MIN)


def requirement_statuses(assessment: Assessment, contract: TaskContract) -> dict[str, str]:
    """Status per contract requirement id; a requirement without a judgment is 'unverifiable'."""
    out: dict[str, str] = {}
    for req in contract.requirements:
        judgment = assessment.judgment(req.id)
        out[req.id] = judgment.status if judgment is not None else "unverifiable"
    return out


def essential_ids(contract: TaskContract) -> list[str]:
    """Ids of the essential requirements, or of every requirement when the contract marks none essential
    (a contract without essentials would otherwise leave T and the failure gate nothing to judge)."""
    return [r.id for r in contract.requirements if r.essential] or [r.id for r in contract.requirements]


def task_score(assessment: Assessment, contract: TaskContract) -> float:
    """T: mean status weight over essential requirements (all requirements if none is essential)."""
    statuses = requirement_statuses(assessment, contract)
    essential = essential_ids(contract)
    return sum(STATUS_WEIGHT[statuses[i]] for i in essential) / len(essential)


def score_mapping(assessment: Assessment, contract: TaskContract) -> tuple[float, float, float]:
    """(T, P, V) from the structured assessment by fixed code (DESIGN.md §3 "Score mapping")."""
    return (task_score(assessment, contract), level_to_unit(assessment.physical_level),
            level_to_unit(assessment.visual_level))


def essential_gaps(assessment: Assessment, contract: TaskContract) -> list[str]:
    """Essential requirement ids (`essential_ids`: all of them when none is marked essential) whose status is
    not_met or unverifiable (or missing)."""
    statuses = requirement_statuses(assessment, contract)
    return [i for i in essential_ids(contract) if statuses[i] in ("not_met", "unverifiable")]


def unverified_essentials(assessment: Assessment, contract: TaskContract) -> list[str]:
    """Essential requirement ids (`essential_ids`) whose status is unverifiable or that have no judgment: the
    assessment itself holds unverifiable essential content, so the gate's U is true whatever a final check says."""
    statuses = requirement_statuses(assessment, contract)
    return [i for i in essential_ids(contract) if statuses[i] == "unverifiable"]
