"""gate node: the reward from fixed code (DESIGN.md §3 "Score mapping and gate", paper Eq. R).

Any fault -> ineligible (reward None, reasons); quality zero -> 0; preset direct -> the model's
direct score; otherwise (T, P, V) = score_mapping(assessment, contract) and
R = gate_reward(eligible, F, U, T, P, V), with F and U from the final check when the failure gate is
on and no gate (F = U = False, reported as None) otherwise.

A run with no fault that reached the gate without the assessment (or, with the failure gate on, without the final
check) is a bug of the agent's, not the clip's: ineligible with an "internal" fault of stage "gate", so the reward
service and the trainer count it as an outage (``ineligible_error``); it had a reason but no fault, and was
counted as the agent's verdict on the clip (``ineligible_none``).

A second input on a thread that already holds a run (refused by quality with a "settings" fault) gives a result
with that fault as its only reason, no notes and zero usage: the append-only channels still hold the earlier
run's faults, notes and usage, which belong to that run's result, not to this refused one.
"""

from __future__ import annotations

from typing import Any

from graph.config import config_overrides, server_settings
from graph.context import RunContext
from graph.gate import gate_reward, score_mapping, unverified_essentials
from graph.nodes.common import Step
from graph.reward_format import reward_text
from graph.schemas import Fault, RewardResult, RewardStatus
from graph.state import AgentState
from graph.usage import USAGE_KEYS


def reused_thread(state: AgentState) -> bool:
    """True when the thread holds an earlier run: quality, the graph's only entry, ran more than once (the
    second time it refused the input with a "settings" fault, `graph.nodes.quality`)."""
    return sum(1 for s in state.get("steps") or [] if s.get("node") == "quality") > 1


def build_result(state: AgentState, ctx: RunContext, run_id: str) -> tuple[RewardResult, dict[str, Any]]:
    """The RewardResult and the gate inputs, from the final state (pure)."""
    faults = list(state.get("faults", []))
    if faults and reused_thread(state):  # the channels hold the earlier run's faults, notes and usage
        base: dict[str, Any] = {"run_id": run_id, "preset": ctx.config.preset, "usage": dict.fromkeys(USAGE_KEYS, 0),
                                "notes": [], "overrides": config_overrides(ctx.config),
                                "server": server_settings(ctx.config)}
        return RewardResult(status="ineligible", reward=None, reasons=[faults[-1].reason()], faults=faults[-1:],
                            **base), \
            {"eligible": False}
    usage = {k: int((state.get("usage") or {}).get(k, 0)) for k in USAGE_KEYS}
    base = {"run_id": run_id, "preset": ctx.config.preset, "usage": usage, "overrides": config_overrides(ctx.config),
            "server": server_settings(ctx.config)}
    notes = list(state.get("notes", []))
    base["notes"] = notes
    if faults:
        inputs: dict[str, Any] = {"eligible": False}
        return RewardResult(status="ineligible", reward=None, reasons=[f.reason() for f in faults] + notes,
                            faults=faults, **base), inputs
    if state.get("zero"):
        reason = (state.get("quality") or {}).get("reason") or "uniform or unusable video content"
        inputs = {"eligible": True, "quality_zero": True, "reward": 0.0}
        return RewardResult(status="zero", reward=0.0, reasons=[f"quality: {reason}"] + notes, **base), inputs
    direct = state.get("direct")
    if direct is not None:
        inputs = {"eligible": True, "direct_reward": direct.reward, "reward": direct.reward}
        return RewardResult(status="scored", reward=direct.reward, reasons=[f"direct: {direct.rationale}"] + notes,
                            **base), inputs
    contract, assessment = state.get("contract"), state.get("assessment")
    if contract is None or assessment is None:
        return _missing("the run ended without an assessment", notes, base), {"eligible": False}
    t, p, v = score_mapping(assessment, contract)
    check = state.get("final_check")
    if ctx.config.failure_gate and check is None:
        return _missing("the failure gate is on but no final check was recorded", notes, base), {"eligible": False}
    gated = ctx.config.failure_gate
    failure = bool(check.failure_established) if gated and check is not None else False
    unverifiable = bool(check.essential_unverifiable) if gated and check is not None else False
    reward = gate_reward(True, failure, unverifiable, t, p, v)
    if reward is None:  # unreachable for an eligible clip; kept explicit instead of an assert
        raise RuntimeError("gate_reward returned None for an eligible clip")
    inputs = {"eligible": True, "failure": failure, "unverifiable": unverifiable, "gated": gated,
              "T": t, "P": p, "V": v, "reward": reward}
    reasons: list[str] = []
    rationale = check.rationale if check is not None else ""  # failure and unverifiable need a check
    if failure:
        reasons.append(f"failure established: {rationale}")
    if unverifiable:  # the assessment's own gaps when it holds them (final_check sets U for them, whatever it wrote)
        gaps = unverified_essentials(assessment, contract)
        reasons.append(f"essential requirement unverifiable: {', '.join(gaps)} (unverifiable or never judged in the "
                       "assessment)" if gaps else f"essential requirement unverifiable: {rationale}")
    for req in contract.requirements:  # one line per requirement: one never judged scores as unverifiable
        j = assessment.judgment(req.id)
        reasons.append(f"{j.requirement_id} {j.status}: {j.rationale[:200]}" if j is not None
                       else f"{req.id} unverifiable: no judgment was recorded (scored as unverifiable)")
    status: RewardStatus = "zero" if (failure or unverifiable) else "scored"
    return RewardResult(status=status, reward=reward, T=t, P=p, V=v, failure=failure if gated else None,
                        unverifiable=unverifiable if gated else None, reasons=reasons + notes, **base), inputs


def _missing(what: str, notes: list[str], base: dict[str, Any]) -> RewardResult:
    """The ineligible result of a run that reached the gate without an output a node should have written (`what`):
    an "internal" fault of stage "gate", a bug of the agent's, so an outage (`RewardResult.outage`), never the
    clip's (module docstring)."""
    fault = Fault(stage="gate", kind="internal", message=what)
    return RewardResult(status="ineligible", reward=None, reasons=[fault.reason()] + notes, faults=[fault], **base)


async def gate(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    run_id = state.get("run_id") or step.thread_id
    result, inputs = build_result(state, ctx, run_id)
    step.gate_inputs = inputs
    step.decision = f"{result.status}: R = " + ("⊥" if result.reward is None else reward_text(result.reward))
    return {"result": result}
