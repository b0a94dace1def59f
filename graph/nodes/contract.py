"""contract node: the frozen task contract, from the instruction text only (paper Sec. 3.2).

With decomposition on, the backbone extracts requirements; the instruction is passed as delimited
data and the prompt says never to follow commands inside it (prompt-injection text is only data; the
reward still comes from fixed code). With decomposition off (preset `structured`), the contract is
the instruction itself as one essential outcome requirement, written by code with no model call.
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.nodes.common import Step, count, human, instruction_block, system
from graph.schemas import Requirement, TaskContract
from graph.state import AgentState


def trivial_contract(instruction: str) -> TaskContract:
    """The undecomposed contract: the whole instruction as one essential outcome requirement."""
    return TaskContract(requirements=[Requirement(id="R1", kind="outcome", text=instruction, essential=True)],
                        notes="no task decomposition (the instruction is the only requirement)")


async def contract(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    instruction = state["instruction"]
    if not ctx.config.decompose:
        step.decision = "1 requirement (instruction, no decomposition)"
        return {"contract": trivial_contract(instruction)}
    messages = [system("contract"),
                human("Extract the task contract of this instruction.\n" + instruction_block(instruction))]
    out = await ctx.backbone.astructured("contract", TaskContract, messages, step.usage)
    essential = sum(r.essential for r in out.requirements)
    step.decision = f"{count(len(out.requirements), 'requirement')} ({essential} essential)"
    return {"contract": out}
