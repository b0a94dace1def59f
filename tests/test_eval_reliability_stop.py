"""Reward-reliability harness: a run stopped mid-way keeps what it had done (`evals.reliability`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from test_eval_reliability import CLIPS, FakeSampler, FakeScorer, RuleBackbone, _clips, _judge

from evals.judge import RewardJudge
from evals.reliability import run_reward_eval


class _Stop(BaseException):
    """A Ctrl-C stand-in: not an Exception, so nothing on the way catches it."""


def test_a_run_stopped_while_judging_keeps_the_rewards_and_verdicts_given(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()

    class StopAtC2(RuleBackbone):
        async def astructured(self, stage, schema, messages, usage):
            if "block c2 " in messages[1].content[0]["text"]:
                raise _Stop
            return await super().astructured(stage, schema, messages, usage)

    judge = RewardJudge(StopAtC2({n: lab for n, lab, _ in CLIPS}), attempts=1)
    judge.sampler = FakeSampler()
    with pytest.raises(_Stop):
        asyncio.run(run_reward_eval(clips, ["full"], tmp_path, scorer, judge, concurrency=1))
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    last = {Path(r["path"]).stem: r for r in rows}
    assert set(last) == {"c1", "c2"}  # the chunk's two rewards were saved before the judge stopped
    assert last["c1"]["judge"]["status"] == "judged" and last["c2"]["judge"] is None
    scorer.calls.clear()
    out = asyncio.run(run_reward_eval(clips, ["full"], tmp_path, scorer, _judge(), concurrency=1))
    assert [names for _, names in scorer.calls] == [["c3", "c4"], ["c5", "c6"]]  # c1, c2 not scored again
    assert out.scored == 4 and out.rejudged == 1  # c2 judged now, c1's verdict kept
    assert all(r["judge"]["status"] in ("judged", "skipped") for r in out.rows)


def test_a_kept_verdict_is_still_counted_aloud(tmp_path):
    """A re-judge that fails keeps the old verdict: the row moved the count on without being told, so the printed
    [n/total] skipped numbers (and a run whose judge was down never printed most of its rows)."""
    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), judge_name="judge-a"))
    heard = []
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, RewardJudge(None),
                                        judge_name="judge", on_row=lambda row, done: heard.append((row, done))))
    assert [done for _, done in heard] == list(range(1, len(clips) + 1))
    judged = [row for row, _ in heard if row["judge"]["status"] == "judged"]
    assert judged and {row["judge"]["judge"] for row in judged} == {"judge-a"}  # the verdict kept is the one told
    assert again.rejudged == 0 and {Path(r["path"]) for r, _ in heard} == {Path(c.path) for c in clips}
