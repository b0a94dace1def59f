"""RAA_TRACE_DURABILITY reaches every path that runs the agent from the settings: `raa score`, `score-batch`,
`demo` and `serve-reward` passed it, but `raa eval reward` (evals.reward_scorer.AgentScorer) and training's
`reward: agent` (training.rewards.AgentReward) ran with the "exit" default whatever it said, so their runs
had no per-step checkpoints to step back through."""

from __future__ import annotations

import asyncio

import numpy as np

from graph.settings import BackboneSettings


def _durabilities(monkeypatch) -> list[str]:
    """The durability each `graph.ascore_videos` call runs with while the test runs (from its `durability` and
    `settings`, as it takes them: `graph.settings.trace_options`; the calls score nothing)."""
    import graph
    from graph.settings import trace_options

    seen: list[str] = []

    async def fake(items, config=None, **kwargs):
        seen.append(trace_options(kwargs.get("settings"), kwargs.get("durability"), kwargs.get("claim_max_age_s"))[0])
        return []

    monkeypatch.setattr(graph, "ascore_videos", fake)
    return seen


def test_agent_scorer_passes_the_settings_trace_durability(tmp_path, monkeypatch):
    from evals.reward_scorer import AgentScorer, EvalClip

    seen = _durabilities(monkeypatch)
    clip = EvalClip(str(tmp_path / "c.mp4"), "push", "success", "ordinary", "push")
    for settings, want in ((BackboneSettings(trace_durability="sync"), "sync"), (None, "exit")):
        scorer = AgentScorer(settings=settings)
        monkeypatch.setattr(scorer, "agent", lambda preset: None)
        asyncio.run(scorer.score("full", [clip]))
        assert seen.pop() == want


class _Frames:
    def forget(self, paths):
        pass


def test_agent_reward_passes_the_settings_trace_durability(tmp_path, monkeypatch):
    import graph
    import graph.builder
    from training.rewards import AgentReward

    seen = _durabilities(monkeypatch)
    monkeypatch.setattr(graph, "build_reward_agent", lambda *a, **k: object())
    monkeypatch.setattr(graph.builder, "frame_store_for", lambda settings: _Frames())
    video = np.zeros((4, 16, 16, 3), np.uint8)
    for durability in ("async", "exit"):
        settings = BackboneSettings(trace_durability=durability, traces_path=str(tmp_path / "t.sqlite"))
        reward = AgentReward(preset="no_wmreward", settings=settings, video_dir=str(tmp_path / "v"))
        asyncio.run(reward([video], ["push the block"], fps=8.0))
        assert seen.pop() == durability
