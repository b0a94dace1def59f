"""observe node: task-blind description of the uniform frame sample (paper Sec. 3.2).

The messages carry only the frames, their labels and the observe prompt: the instruction is never
part of them (a test asserts it over the recorded messages).
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.nodes.common import Step, count, human, system
from graph.schemas import Observation
from graph.state import AgentState


async def observe(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    sample = list(state["sample"])
    blocks = await ctx.frames.ablocks(state["video"], sample)
    messages = [system("observe", n_frames=len(sample)),
                human(f"{len(sample)} frames of one clip follow, in temporal order.", blocks)]
    obs = await ctx.backbone.astructured("observe", Observation, messages, step.usage)
    step.frames = sample
    step.decision = f"{count(len(obs.events), 'event')}, {count(len(obs.visual_issues), 'visual issue')}"
    return {"observation": obs}
