"""Reward-reliability harness: metrics equal hand counts, resume, unjudged rows, scorer faults."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evals.judge import JudgeReply, RewardJudge
from evals.reliability import ManifestError, run_reward_eval
from evals.reward_scorer import EvalClip, load_eval_manifest
from evals.table import all_metrics, ordered_presets, render_csv, render_markdown
from graph.backbone import BackboneFault
from graph.schemas import RewardResult

CLIPS = [  # name, label, pattern
    ("c1", "ordinary", "success"),
    ("c2", "failure", "wrong_object"),
    ("c3", "failure", "teleport"),
    ("c4", "unobservable", "occlusion"),
    ("c5", "progress", "partial"),
    ("c6", "progress", "success"),
]
REWARDS = {
    "direct": {"c1": 0.8, "c2": 0.5, "c3": 0.0, "c4": 0.3, "c5": 0.0, "c6": None},
    "full": {"c1": 0.9, "c2": 0.0, "c3": 0.0, "c4": 0.0, "c5": 0.4, "c6": 0.7},
}


def _clips(tmp_path: Path) -> list[EvalClip]:
    return [EvalClip(str(tmp_path / f"{n}.mp4"), f"put block {n} in the bowl", label, pattern, "pick_place")
            for n, label, pattern in CLIPS]


def _result(preset: str, name: str, reward: float | None) -> RewardResult:
    if reward is None:
        return RewardResult(reward=None, status="ineligible", reasons=["observe: transport: gave up"], preset=preset,
                            run_id=f"{preset}-{name}", usage={"calls": 1, "images": 32})
    return RewardResult(reward=reward, status="zero" if reward == 0 else "scored", reasons=[f"{name} judged"],
                        preset=preset, run_id=f"{preset}-{name}",
                        usage={"calls": 4, "images": 40, "input_tokens": 1000, "output_tokens": 100})


class FakeScorer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def score(self, preset, clips):
        names = [Path(c.path).stem for c in clips]
        self.calls.append((preset, names))
        return [_result(preset, n, REWARDS[preset][n]) for n in names]


class FakeSampler:
    def blocks(self, path):
        return [{"type": "text", "text": "frame 0 of 2, t=0.00s"}]


class RuleBackbone:
    """Judge backbone: accepts zero on negatives, positive on others; can fail for chosen clips."""

    def __init__(self, labels: dict[str, str], fail: set[str] = frozenset()) -> None:
        self.labels, self.fail, self.seen = labels, set(fail), []

    async def astructured(self, stage, schema, messages, usage):
        text = messages[1].content[0]["text"]
        self.seen.append(text)
        name = next(n for n in self.labels if f"block {n} " in text)
        usage.calls += 1
        if name in self.fail:
            raise BackboneFault(stage, "transport", "judge endpoint down")
        reward = float(text.split("Reward: ")[1].split(" ")[0])
        negative = self.labels[name] in ("failure", "unobservable")
        return schema(reasonable=(reward == 0) if negative else (reward > 0), rationale="rule")


def _judge(fail: set[str] = frozenset()) -> RewardJudge:
    judge = RewardJudge(RuleBackbone({n: lab for n, lab, _ in CLIPS}, fail), attempts=2)
    judge.sampler = FakeSampler()
    return judge


def test_metrics_equal_hand_counts(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()
    judge = _judge(fail={"c1"})  # c1 can never be judged
    out = asyncio.run(run_reward_eval(clips, ["full", "direct"], tmp_path / "ev", scorer, judge, concurrency=2))
    direct, full = out.metrics  # paper order: direct first
    assert (direct.preset, full.preset) == ("direct", "full")
    # direct: negatives c2 (0.5), c3 (0), c4 (0.3) -> F+ 2/3; progress c5 (0), c6 (None) -> P0 1/2
    assert (direct.n, direct.f_plus, direct.n_neg, direct.p0, direct.n_prog, direct.ineligible) == (6, 2, 3, 1, 2, 1)
    # judged: c1 unjudged (judge fails), c2 no, c3 yes, c4 no, c5 no (zero on progress), c6 skipped (None)
    assert (direct.r, direct.unjudged, direct.skipped) == (1, 1, 1)
    assert (full.f_plus, full.p0, full.ineligible, full.r, full.unjudged) == (0, 0, 0, 5, 1)
    assert direct.by_label["failure"].mean == pytest.approx(0.25)
    assert direct.by_label["progress"].mean == 0.0 and direct.by_label["progress"].rewarded == 1
    assert direct.by_pattern["success"].mean == pytest.approx(0.8)  # c6 (None) excluded
    assert full.by_pattern["success"].mean == pytest.approx(0.8)    # (0.9 + 0.7) / 2
    assert direct.usage_per_clip["calls"] == pytest.approx((5 * 4 + 1) / 6)
    table = (tmp_path / "ev" / "table.md").read_text()
    assert "| Direct base-model scoring | 1 / 6 (16.7%; 1 unjudged) | 2 / 3 | 1 / 2 (1 ineligible) |" in table
    assert "| Full Reward Agent | 5 / 6 (83.3%; 1 unjudged) | 0 / 3 | 0 / 2 |" in table
    csv_lines = (tmp_path / "ev" / "table.csv").read_text().splitlines()
    assert csv_lines[1].startswith("direct,Direct base-model scoring,6,1,16.67,1,1,2,3,0,1,2,1,1,")
    rows = [json.loads(x) for x in (tmp_path / "ev" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and {r["preset"] for r in rows} == {"direct", "full"}
    c1 = next(r for r in rows if r["preset"] == "direct" and r["path"].endswith("c1.mp4"))
    assert c1["judge"]["status"] == "unjudged" and c1["judge"]["attempts"] == 2 and c1["judge"]["reasonable"] is None


def test_resume_skips_finished_rows_and_rejudges_unjudged(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips[:3], ["direct"], tmp_path, scorer, _judge(fail={"c1"})))
    assert scorer.calls == [("direct", ["c1", "c2", "c3"])]
    scorer.calls.clear()
    judge = _judge()
    out = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path, scorer, judge))
    assert scorer.calls == [("direct", ["c4", "c5", "c6"])]  # c1..c3 not rescored
    assert out.scored == 3 and out.rejudged == 1  # c1 judged again (was unjudged), c2/c3 kept
    judged_names = [t.split("block ")[1].split(" ")[0] for t in judge.backbone.seen]
    assert sorted(judged_names) == ["c1", "c4", "c5"]  # c6 is ineligible: skipped, never sent
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6  # compacted: one row per clip and preset
    scorer.calls.clear()
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path, scorer, _judge()))
    assert scorer.calls == [] and again.scored == 0 and again.rejudged == 0
    assert again.metrics[0].r == 2  # c1 (0.8 ordinary) and c3 (0 on failure)
    retry = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path, scorer, _judge(), retry_ineligible=True))
    assert scorer.calls == [("direct", ["c6"])] and retry.scored == 1


def test_a_rerun_with_another_scorer_is_refused(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()
    ours = {"model": "vlm-a", "temperature": 0.0}
    asyncio.run(run_reward_eval(clips[:2], ["direct"], tmp_path, scorer, _judge(), scorer_id=ours))
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["scorer"] for r in rows] == [ours, ours]
    with pytest.raises(ManifestError, match=r"holds 2 reward row\(s\) scored by model 'vlm-a' .* uses model 'vlm-b'"):
        asyncio.run(run_reward_eval(clips, ["direct"], tmp_path, scorer, _judge(),
                                    scorer_id={"model": "vlm-b", "temperature": 0.0}))
    assert len(scorer.calls) == 1  # nothing scored by the refused run
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path, scorer, _judge(), scorer_id=ours))
    assert again.scored == len(clips) - 2


def test_scorer_crash_gives_ineligible_rows_not_rewards(tmp_path):
    class Broken:
        async def score(self, preset, clips):
            raise RuntimeError("server exploded")

    out = asyncio.run(run_reward_eval(_clips(tmp_path), ["full"], tmp_path, Broken(), _judge()))
    m = out.metrics[0]
    assert m.ineligible == 6 and m.r == 0 and m.f_plus == 0 and m.p0 == 0 and m.skipped == 6
    assert all("server exploded" in r["reasons"][0] for r in out.rows)


def test_truncated_results_line_is_ignored(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    with (tmp_path / "results.jsonl").open("a") as f:
        f.write('{"path": "cut mid-wri')
    scorer.calls.clear()
    out = asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    assert scorer.calls == [] and len(out.rows) == 2


def test_ordered_presets_and_unknown():
    assert ordered_presets(["no_audit", "full", "direct"]) == ["direct", "full", "no_audit"]
    with pytest.raises(ValueError, match="bogus"):
        ordered_presets(["full", "bogus"])


def test_render_empty_groups_and_csv_header():
    metrics = all_metrics([], ["full"])
    assert "| Full Reward Agent | no rows | 0 / 0 | 0 / 0 |" in render_markdown(metrics)
    assert render_csv(metrics).splitlines()[0].startswith("preset,method,n,r,r_pct")


def test_manifest_validation(tmp_path):
    m = tmp_path / "m.jsonl"
    m.write_text(json.dumps({"path": "a.mp4", "instruction": "x", "label": "ordinary", "pattern": "success"}) + "\n")
    clips = load_eval_manifest(m)
    assert clips[0].path == str((tmp_path / "a.mp4").resolve()) and clips[0].pattern == "success"
    m.write_text(json.dumps({"path": "a.mp4", "instruction": "x", "label": "great"}) + "\n")
    with pytest.raises(ManifestError, match="label 'great' is not one of"):
        load_eval_manifest(m)
    m.write_text("{not json\n")
    with pytest.raises(ManifestError, match="m.jsonl:1: not valid JSON"):
        load_eval_manifest(m)
    with pytest.raises(ManifestError, match="not found"):
        load_eval_manifest(tmp_path / "missing.jsonl")
    m.write_text("\n")
    with pytest.raises(ManifestError, match="no rows"):
        load_eval_manifest(m)


def test_judge_reply_schema_bounds():
    with pytest.raises(ValueError):
        JudgeReply(reasonable=True, rationale="x" * 5000)


def test_manifest_rejects_duplicate_clips(tmp_path):
    m = tmp_path / "m.jsonl"
    row = json.dumps({"path": "a.mp4", "instruction": "x", "label": "ordinary"})
    m.write_text(row + "\n" + row + "\n")
    with pytest.raises(ManifestError, match="appears twice"):
        load_eval_manifest(m)


def test_resumed_rows_take_labels_from_the_current_manifest(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()
    first = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path, scorer, _judge()))
    assert first.metrics[0].n_neg == 3 and first.metrics[0].f_plus == 2
    relabelled = [EvalClip(c.path, c.instruction, "failure" if c.path.endswith("c1.mp4") else c.label, c.pattern,
                           c.task) for c in clips]
    again = asyncio.run(run_reward_eval(relabelled, ["direct"], tmp_path, scorer, _judge()))
    assert again.metrics[0].n_neg == 4 and again.metrics[0].f_plus == 3  # c1 (0.8) now counts as F+


def test_resume_rescores_changed_clips_and_rejudges_another_judges_verdicts(tmp_path):
    """Resume is keyed by (path, preset): a suite rendered again with another seed (same file names, other
    instructions and pixels) kept the old rows, and a run with another judge kept the old judge's verdicts
    under the new judge's name."""
    clips, scorer = _clips(tmp_path), FakeScorer()
    for c in clips:
        Path(c.path).write_bytes(b"clip")
    asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), judge_name="judge-a"))
    assert len(scorer.calls[0][1]) == 6
    clips[1] = EvalClip(clips[1].path, "stack block c2 on c3", clips[1].label, clips[1].pattern, clips[1].task)
    Path(clips[2].path).write_bytes(b"another clip")  # c3 rendered anew
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), judge_name="judge-a"))
    assert scorer.calls[-1] == ("direct", ["c2", "c3"]) and (again.scored, again.rejudged) == (2, 0)
    assert next(r for r in again.rows if r["path"] == clips[1].path)["instruction"] == "stack block c2 on c3"
    other = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), judge_name="judge-b"))
    # all 6 go to judge-b; 5 are judged (the ineligible one is skipped: no reward to judge)
    assert len(scorer.calls) == 2 and (other.scored, other.rejudged) == (0, 5)
    assert {r["judge"]["judge"] for r in other.rows} == {"judge-b"}


def test_a_clip_missing_at_the_first_run_is_scored_once_it_exists(tmp_path):
    clips, scorer = _clips(tmp_path)[:1], FakeScorer()
    asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge()))
    assert len(scorer.calls) == 1
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge()))
    assert len(scorer.calls) == 1 and again.scored == 0  # still missing: the row stands
    Path(clips[0].path).write_bytes(b"clip")  # rendered now
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge()))
    assert len(scorer.calls) == 2 and again.scored == 1
    assert again.rows[0]["clip_version"] is not None


def test_a_rerun_without_a_judge_keeps_the_verdicts_it_cannot_replace(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()
    first = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, _judge(), judge_name="judge-a"))
    judged = sum(r["judge"]["status"] == "judged" for r in first.rows)
    assert judged > 0
    again = asyncio.run(run_reward_eval(clips, ["direct"], tmp_path / "ev", scorer, RewardJudge(None),
                                        judge_name="judge"))
    # the rows without a verdict were asked again, but no judge gave one: none was re-judged
    assert again.rejudged == 0 and sum(r["judge"]["status"] == "judged" for r in again.rows) == judged
    assert {r["judge"]["judge"] for r in again.rows if r["judge"]["status"] == "judged"} == {"judge-a"}
    assert "(judge-a)" in (tmp_path / "ev" / "table.md").read_text()


def test_index_shows_the_last_runs_table(tmp_path):
    """results.jsonl keeps rows of earlier runs (other clips, other presets); index.html recomputed its table
    over all of them, so it disagreed with the run's table.md."""
    from evals.report_index import write_eval_index

    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips, ["direct", "full"], tmp_path / "ev", scorer, _judge()))
    last = asyncio.run(run_reward_eval(clips[:3], ["full"], tmp_path / "ev", scorer, _judge()))
    html = write_eval_index(tmp_path / "ev").read_text()
    assert "Direct base-model scoring" not in html.split('id="clip-table"')[0]
    assert f"{last.metrics[0].r} / 3 (" in html and "/ 6 (" not in html


@pytest.mark.parametrize("damage", [{"reward": "0.8"}, {"reward": None}, {"status": "ineligible"},
                                    {"judge": "reasonable"}, {"usage": "lots"}, {"reward": 1.5},
                                    {"usage": {"calls": float("nan")}}, {"usage": {"images": float("inf")}},
                                    {"reasons": 5}, {"reasons": "c1 judged"}, {"reasons": [1, 2]},
                                    {"reasons": {"c1": "judged"}}, {"notes": 5}, {"notes": "x"}])
def test_a_damaged_results_row_is_scored_again_not_a_crash(tmp_path, damage):
    """A results.jsonl row whose reward and status disagree, or whose verdict or usage is not an object (hand-
    edited, written by another tool), crashed the rerun (AttributeError, TypeError in the table) or was counted
    as it stood; it is scored again, as a row cut by a crash is. Reasons or notes that are not lists of strings
    were sent to the judge as they stood: a string as one reason per character, a number as a "judge crashed"
    verdict the rerun gave again every time."""
    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    path = tmp_path / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0].update(damage)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scorer.calls.clear()
    out = asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    assert scorer.calls == [("full", ["c1"])] and out.scored == 1
    assert [r["reward"] for r in out.rows] == [0.9, 0.0] and out.metrics[0].r == 2


def test_lines_that_are_not_result_rows_are_counted_when_dropped(tmp_path):
    """A line of results.jsonl that is not a result row (cut by a crash, an edit gone wrong) is scored again
    and the rewritten file drops it; the outcome says how many went, so the CLI can say so."""
    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    path = tmp_path / "results.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0][:20] + "\n" + "not json either\n" + lines[1] + "\n")
    scorer.calls.clear()
    out = asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    assert len(out.unreadable) == 2 and scorer.calls == [("full", ["c1"])]
    assert len(path.read_text().splitlines()) == 2
    again = asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    assert again.unreadable == []
