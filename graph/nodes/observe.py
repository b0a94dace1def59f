"""observe node: task-blind description of the uniform frame sample (paper Sec. 3.2).

The messages carry only the frames, their labels and the observe prompt: the instruction is never
part of them (a test asserts it over the recorded messages).

Decision where the issue was silent: an event's frames are frames of the clip (0..frames-1), as a judgment's
are (`graph.nodes.common.tidy_assessment`) and the final check's: an event that starts past the clip's last
frame is dropped and one that ends past it ends at that frame, each with a note in the run's notes. They were
kept as written: assess and the audit read an observation naming frames the clip does not have (a 1-based
"frame 33 of 33"), and the HTML report linked them. The description is the model's and is left alone.
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.nodes.common import Step, count, frames_total, human, system
from graph.schemas import Observation
from graph.state import AgentState


def tidy_observation(obs: Observation, n_frames: int) -> tuple[Observation, list[str]]:
    """`obs` with its events inside 0..n_frames-1 (module docstring), and a note per event dropped or cut."""
    last = n_frames - 1
    events, notes = [], []
    for e in obs.events:
        if e.start_frame > last:
            notes.append(f"observe: event {e.description[:80]!r} at frames {e.start_frame}..{e.end_frame} is outside "
                         f"the clip (0..{last}); dropped")
            continue
        if e.end_frame > last:
            notes.append(f"observe: event {e.description[:80]!r} ends at frame {e.end_frame}, past the clip "
                         f"(0..{last}); it ends at {last} now")
            e = e.model_copy(update={"end_frame": last})
        events.append(e)
    return (obs.model_copy(update={"events": events}) if notes else obs), notes


async def observe(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    sample = list(state["sample"])
    blocks = await ctx.frames.ablocks(state["video"], sample)
    step.frames = sample  # before the call: a faulted request's frames are traced too
    messages = [system("observe", n_frames=len(sample)),
                human(f"{len(sample)} frames of one clip follow, in temporal order.", blocks)]
    obs = await ctx.backbone.astructured("observe", Observation, messages, step.usage)
    obs, notes = tidy_observation(obs, frames_total(state))
    step.decision = f"{count(len(obs.events), 'event')}, {count(len(obs.visual_issues), 'visual issue')}" + (
        f"; {len(notes)} event frame fix(es) noted" if notes else "")
    return {"observation": obs, **({"notes": notes} if notes else {})}
