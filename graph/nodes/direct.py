"""direct node (preset `direct`): one call with the frames, the instruction and the scoring criteria.

This is the paper's direct base-model scoring baseline: the model writes the reward itself. Every
other preset maps a structured assessment through fixed code instead.
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.nodes.common import Step, human, instruction_block, system
from graph.reward_format import reward_text
from graph.schemas import DirectScore
from graph.state import AgentState


async def direct(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    sample = list(state["sample"])
    blocks = await ctx.frames.ablocks(state["video"], sample)
    step.frames = sample  # before the call: a faulted request's frames are traced too
    text = (instruction_block(state["instruction"])
            + f"\n\n{len(sample)} frames of the clip follow, in temporal order.")
    out = await ctx.backbone.astructured("direct", DirectScore, [system("direct"), human(text, blocks)],
                                         step.usage)
    step.decision = f"direct reward {reward_text(out.reward)}"
    return {"direct": out}
