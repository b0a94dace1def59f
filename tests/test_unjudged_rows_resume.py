"""Rows no model judged, across resumes. A zero the quality check gave (under 2 frames, uniform content: status
"zero", no T, first reason "quality: ...") counted as a reward of the model that ran, so resuming such an output
under another model or temperature was refused (`raa score-batch` and `raa eval reward`), though the zero would be
the same whoever scored it. `raa eval reward` recorded a clip's content identity after scoring it, so a clip
rewritten while it was scored recorded the new content for the old content's result and was never scored again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from evals.reliability import run_reward_eval
from evals.reward_scorer import EvalClip
from graph.cli import app
from graph.schemas import RewardResult
from tests.batch_of_one import one_frame_zero
from tests.test_batch_resume import TASK, _rows
from tests.test_eval_reliability import _judge

runner = CliRunner()


def test_a_quality_zero_does_not_refuse_a_resume_under_another_model(monkeypatch, tmp_path):
    from tests.graph_scripts import moving_square

    batch = one_frame_zero(monkeypatch, tmp_path)  # one frame: the quality check zeroes it, no model call
    manifest, out, args = batch.manifest, batch.out, batch.args
    moving_square(tmp_path / "d.mp4", seed=2)
    with manifest.open("a") as fh:
        fh.write(json.dumps({"path": "d.mp4", "instruction": TASK}) + "\n")
    monkeypatch.setenv("RAA_MODEL", "other-model")
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "1 to score" in res.output, res.output
    assert [r["result"]["status"] for r in _rows(out)] == ["zero", "scored"]
    res = runner.invoke(app, args)  # a model's reward of the other model now refuses the first one
    assert res.exit_code == 0, res.output
    monkeypatch.setenv("RAA_MODEL", "stub-model")
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "holds 1 reward row(s) scored by model 'other-model'" in res.output, res.output


class QualityZeroScorer:
    """Zeroes every clip as the quality check does (no model judged it); `during` runs while it scores."""

    def __init__(self, during=lambda clips: None) -> None:
        self.during, self.calls = during, []

    async def score(self, preset, clips):
        self.calls.append([Path(c.path).stem for c in clips])
        self.during(clips)
        return [RewardResult(reward=0.0, status="zero", reasons=["quality: only 1 frame(s)"], preset=preset)
                for _ in clips]


def _clip(tmp_path: Path) -> EvalClip:
    path = tmp_path / "c1.mp4"
    path.write_bytes(b"one frame" * 100)
    return EvalClip(str(path), "put block c1 in the bowl", "ordinary", "success", "pick_place")


def test_eval_quality_zeros_do_not_refuse_another_scorer(tmp_path):
    clip, scorer = _clip(tmp_path), QualityZeroScorer()
    asyncio.run(run_reward_eval([clip], ["direct"], tmp_path / "ev", scorer, _judge(),
                                scorer_id={"model": "vlm-a", "temperature": 0.0}))
    again = asyncio.run(run_reward_eval([clip], ["direct"], tmp_path / "ev", scorer, _judge(),
                                        scorer_id={"model": "vlm-b", "temperature": 0.0}))
    assert again.scored == 0 and len(scorer.calls) == 1


def test_eval_a_clip_rewritten_while_scored_is_said_and_scored_again(tmp_path):
    from evals.clip_identity import content_identity
    from evals.eval_views import reward_notes

    clip = _clip(tmp_path)
    before = content_identity(clip.path)

    def finish_render(clips):  # the renderer writes the whole clip while the half one is scored
        Path(clip.path).write_bytes(b"whole clip" * 300)

    scorer = QualityZeroScorer(finish_render)
    first = asyncio.run(run_reward_eval([clip], ["direct"], tmp_path / "ev", scorer, _judge()))
    [row] = [json.loads(line) for line in (tmp_path / "ev" / "results.jsonl").read_text().splitlines()]
    assert row["clip_version"] == before  # what was scored, not what is there now
    assert first.rewritten == 1 and any("changed while" in n for n in reward_notes(first)), reward_notes(first)
    scorer.during = lambda clips: None
    again = asyncio.run(run_reward_eval([clip], ["direct"], tmp_path / "ev", scorer, _judge()))
    assert again.scored == 1 and len(scorer.calls) == 2 and again.rewritten == 0
    assert not any("changed while" in n for n in reward_notes(again))
    third = asyncio.run(run_reward_eval([clip], ["direct"], tmp_path / "ev", scorer, _judge()))
    assert third.scored == 0 and len(scorer.calls) == 2


def test_eval_a_quality_zero_of_a_clip_changed_since_is_scored_again(tmp_path):
    """As `raa score-batch --retry-ineligible` scores a quality zero again once its clip changed (`rescorable`),
    `raa eval reward` does, with or without --retry-ineligible: any row whose clip content changed is scored again
    (`evals.clip_identity`); an unchanged clip's zero stands."""
    clip, scorer = _clip(tmp_path), QualityZeroScorer()
    asyncio.run(run_reward_eval([clip], ["direct"], tmp_path / "ev", scorer, _judge()))
    again = asyncio.run(run_reward_eval([clip], ["direct"], tmp_path / "ev", scorer, _judge(), retry_ineligible=True))
    assert again.scored == 0 and len(scorer.calls) == 1  # unchanged: its zero stands
    for n, retry in enumerate((True, False), start=2):
        Path(clip.path).write_bytes(b"whole clip %d" % n * 300)  # the renderer wrote it again
        again = asyncio.run(run_reward_eval([clip], ["direct"], tmp_path / "ev", scorer, _judge(),
                                            retry_ineligible=retry))
        assert again.scored == 1 and len(scorer.calls) == n
