"""Run ids (checkpoint thread ids): a reused id is refused with a reason, never mixed into another run's trace."""

from __future__ import annotations

import pytest
from graph_scripts import full_script, make_agent, moving_square, run

INSTRUCTION = "push the red block to the right"


def test_reused_run_id_is_refused_with_a_reason(clip):
    import asyncio

    from graph import AgentConfig, ascore_videos

    agent, _ = make_agent("decomposed")
    items = [{"video": str(clip), "instruction": INSTRUCTION, "run_id": "same"}]
    first = asyncio.run(ascore_videos(items, AgentConfig(preset="decomposed"), agent=agent))[0]
    second = asyncio.run(ascore_videos(items, AgentConfig(preset="decomposed"), agent=agent))[0]
    assert first.status == "scored"
    assert second.reward is None and "already has a trace" in second.reasons[0]


@pytest.mark.parametrize("preset", ["full", "direct"])
def test_second_input_on_a_used_thread_is_refused(clip, preset):
    """The graph used directly (agent.invoke with the same thread id, a reused Studio thread): the earlier run's
    channels would carry over (the frozen contract raised; in direct, an earlier fault skipped every stage)."""
    script = full_script(direct=[{"reward": 2.0, "rationale": "out of range"}] * 2 + [{"reward": 0.8, "rationale": "ok"}])
    agent, model = make_agent(preset, script)
    first = run(agent, clip, run_id="same")["result"]
    calls = len(model.calls)
    second = run(agent, clip, run_id="same")["result"]
    assert first.status == ("scored" if preset == "full" else "ineligible")
    assert second.reward is None and second.status == "ineligible"
    assert any("this thread already holds a run" in r for r in second.reasons)
    assert len(model.calls) == calls  # nothing re-run on the stale state


def test_a_run_id_named_twice_in_one_batch_is_refused_not_overwritten(clip, tmp_path):
    """Both items passed the 'already has a trace' check (neither trace existed yet) and the second trace
    overwrote the first: `raa trace dup` then explained the first result with the other clip."""
    import asyncio

    from graph import AgentConfig, ascore_videos

    other = moving_square(tmp_path / "other.mp4", seed=3)
    agent, _ = make_agent("decomposed")
    items = [{"video": str(clip), "instruction": INSTRUCTION, "run_id": "dup"},
             {"video": str(other), "instruction": INSTRUCTION, "run_id": "dup"}]
    first, second = asyncio.run(ascore_videos(items, AgentConfig(preset="decomposed"), agent=agent))
    assert first.status == "scored" and second.reward is None
    assert "run id 'dup' is already running" in second.reasons[0]
    assert agent.get_state({"configurable": {"thread_id": "dup"}}).values["video"] == str(clip)
