"""AgentScorer: the reward agent as the reliability eval's scorer (evals/reward_scorer.py)."""

from __future__ import annotations

import asyncio

from evals.judge import RewardJudge
from evals.reliability import run_reward_eval
from evals.reward_scorer import EvalClip


def test_agent_scorer_shares_stage_outputs_across_presets(tmp_path):
    from graph_scripts import FakeSurprise, full_script, moving_square

    from evals.reward_scorer import AgentScorer
    from graph.backbone import Backbone
    from graph.cache import StageCache
    from graph.context import AgentTools
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    model, surprise = ScriptedChatModel(full_script()), FakeSurprise()
    scorer = AgentScorer(backbone=Backbone(model, cache=StageCache(None), retry_wait=(0.0, 0.0)),
                         tools=AgentTools(tracker=LKTracker(), surprise=surprise), checkpointer=False)
    clips = [EvalClip(str(moving_square(tmp_path / f"{i}.mp4", seed=i)), "push the red block to the right",
                      "ordinary", "success", "push") for i in range(2)]
    judge = RewardJudge(None, unconfigured_reason="no judge in this test")
    out = asyncio.run(run_reward_eval(clips, ["full", "no_audit", "no_motion"], tmp_path / "ev", scorer, judge))
    assert [m.n for m in out.metrics] == [2, 2, 2] and all(r["reward"] is not None for r in out.rows)
    assert len(model.calls_for("observe")) == 2  # once per clip, shared by the three presets
    assert len(model.calls_for("contract")) == 1  # text only: one instruction
    assert len(model.calls_for("assess")) == 2
    assert all(m.unjudged == 2 and m.r == 0 for m in out.metrics)
    assert surprise.calls == 2  # one frame cache for the presets: scored once per clip, not once per preset


def test_agent_scorer_passes_the_settings_claim_age(tmp_path, monkeypatch):
    """RAA_FOREIGN_CLAIM_MAX_AGE_S reaches the runs of an eval (the settings object, not the 6 h default); without
    settings, the agent's own (None: bound from the settings it was built with, else 6 h)."""
    import graph
    from evals.reward_scorer import AgentScorer
    from graph.settings import BackboneSettings, trace_options

    seen = []

    async def fake(items, config=None, **kwargs):  # the age ascore_videos runs with (`trace_options`)
        seen.append(trace_options(kwargs.get("settings"), kwargs.get("durability"), kwargs.get("claim_max_age_s"))[1])
        return []

    monkeypatch.setattr(graph, "ascore_videos", fake)
    clip = EvalClip(str(tmp_path / "c.mp4"), "push", "success", "ordinary", "push")
    for settings, want in ((BackboneSettings(foreign_claim_max_age_s=123.0), 123.0), (None, None)):
        scorer = AgentScorer(settings=settings)
        monkeypatch.setattr(scorer, "agent", lambda preset: None)
        asyncio.run(scorer.score("full", [clip]))
        assert seen.pop() == want
