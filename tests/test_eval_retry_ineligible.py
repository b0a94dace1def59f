"""`raa eval reward --retry-ineligible` re-scores only the ineligible rows another run could fix, deciding as `raa
score-batch --retry-ineligible` does (`graph.batch_retry.retryable`): a transport fault, a crashed scorer chunk, a
clip that could not be reached or read for the machine's sake and can be read now. It re-scored every row whose
reward is None, so an undecodable clip or a bad instruction cost a scoring run (and its judge) on every retry."""

from __future__ import annotations

import asyncio
from pathlib import Path

from evals.reliability import run_reward_eval
from evals.reward_scorer import EvalClip
from graph.schemas import RewardResult
from tests.test_eval_reliability import _judge

FAULTS = {  # clip name -> the reason its first run ended ineligible; True: a rerun can fix it
    "c1": ("observe: transport: gave up after 4 attempts", True),
    "c2": ("harness: scorer failed: RuntimeError: worker died", True),
    "c3": ("quality: video: VideoDecodeError: c3.mp4: cannot be opened as a video (not a video file, or "
           "truncated/corrupt) (InvalidDataError: [Errno 1094995529] Invalid data found when processing input: "
           "'file:c3.mp4')", False),
    "c4": ("quality: video: VideoDecodeError: c4.mp4: cannot be opened as a video (not a video file, or "
           "truncated/corrupt) (OSError: [Errno 5] Input/output error: 'file:c4.mp4')", True),
    "c5": ("contract: input: the instruction names no task", False),
    "c6": ("quality: video: VideoNotFoundError: c6.mp4: cannot be read (PermissionError: [Errno 13] Permission "
           "denied: 'c6.mp4')", True),
}


class FaultScorer:
    """Every clip ineligible for its FAULTS reason on the first run, scored on later runs."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def score(self, preset, clips):
        names = [Path(c.path).stem for c in clips]
        first = not self.calls
        self.calls.append(names)
        if first:
            return [RewardResult(reward=None, status="ineligible", reasons=[FAULTS[n][0]], preset=preset)
                    for n in names]
        return [RewardResult(reward=0.5, status="scored", reasons=[f"{n} judged"], preset=preset) for n in names]


def _clips(tmp_path: Path) -> list[EvalClip]:
    clips = []
    for name in FAULTS:
        path = tmp_path / f"{name}.mp4"
        path.write_bytes(name.encode() * 100)  # readable, and unchanged between the runs
        clips.append(EvalClip(str(path), f"put block {name} in the bowl", "ordinary", "success", "pick_place"))
    return clips


def test_retry_ineligible_rescores_only_what_a_rerun_can_fix(tmp_path):
    clips, scorer = _clips(tmp_path), FaultScorer()
    asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge()))
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), retry_ineligible=True))
    fixable = [n for n, (_, retry) in FAULTS.items() if retry]
    assert scorer.calls[1:] == [fixable] and again.scored == len(fixable)
    by_name = {Path(r["path"]).stem: r for r in again.rows}
    assert [n for n, r in by_name.items() if r["status"] == "ineligible"] == ["c3", "c5"]


def test_retry_ineligible_keeps_an_unreached_clip_final_while_it_still_cannot_be_read(tmp_path, monkeypatch):
    import graph.batch_retry

    clips, scorer = _clips(tmp_path), FaultScorer()
    asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge()))
    monkeypatch.setattr(graph.batch_retry, "clip_readable", lambda path: False)  # still no permission
    asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), retry_ineligible=True))
    assert scorer.calls[1:] == [["c1", "c2"]]  # the machine's faults wait until the clip can be read


def test_a_run_says_how_many_rows_retry_ineligible_would_score_again(tmp_path):
    """As `raa score-batch` says on a plain resume (`graph.batch_resume.fixable_lines`, the same words): a run
    scored against a broken setup kept its ineligible rows without a word, so the table read as done. The rows
    this run scored count too: a run whose endpoint went down ended with its outage rows and no hint."""
    from evals.eval_views import reward_notes

    clips, scorer = _clips(tmp_path), FaultScorer()
    note = (f"4 of the rows already in {tmp_path / 'ev' / 'results.jsonl'} ineligible for a reason a rerun can fix: "
            "--retry-ineligible scores them again")
    first = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge()))
    assert first.scored == 6 and first.fixable == 4 and note in reward_notes(first)  # scored in this run
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge()))
    assert again.scored == 0 and again.fixable == 4 and note in reward_notes(again)
    retried = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), retry_ineligible=True))
    assert retried.fixable == 0 and not any("--retry-ineligible" in n for n in reward_notes(retried))


def test_rows_retry_ineligible_scored_again_and_that_failed_again_keep_the_hint(tmp_path):
    """The endpoint still down at the --retry-ineligible run: its rows are as fixable as before, and said so."""
    from evals.eval_views import reward_notes

    class Down(FaultScorer):
        async def score(self, preset, clips):
            self.calls.append([Path(c.path).stem for c in clips])
            return [RewardResult(reward=None, status="ineligible", reasons=[FAULTS["c1"][0]], preset=preset)
                    for _ in clips]

    clips, scorer = _clips(tmp_path)[:2], Down()
    asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge()))
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), retry_ineligible=True))
    assert again.scored == 2 and again.fixable == 2
    assert any(n.startswith("2 of the rows already in ") and "--retry-ineligible scores them again" in n
               for n in reward_notes(again))
