"""`raa eval reward`'s check for another scoring model looks at the rows of the manifest being run only
(`evals.reliability`): rows of another manifest kept in the same folder are not in this run's table."""

from __future__ import annotations

import asyncio

import pytest

from evals.reliability import ManifestError, run_reward_eval
from tests.test_eval_reliability import FakeScorer, _clips, _judge

A = {"model": "vlm-a", "temperature": 0.0}
B = {"model": "vlm-b", "temperature": 0.0}


def test_rows_of_another_manifest_do_not_block_another_scorer(tmp_path):
    """Manifest 1 (c1..c3) scored by vlm-a, then manifest 2 (c4..c6) by vlm-b into the same folder: refused,
    naming rows no table of manifest 2 counts."""
    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips[:3], ["direct"], tmp_path / "ev", scorer, _judge(), scorer_id=A))
    out = asyncio.run(run_reward_eval(clips[3:], ["direct"], tmp_path / "ev", scorer, _judge(), scorer_id=B))
    assert out.scored == 3 and {r["scorer"]["model"] for r in out.rows} == {"vlm-b"}
    assert len((tmp_path / "ev" / "results.jsonl").read_text().splitlines()) == 6  # manifest 1's rows kept


def test_rows_of_this_manifest_by_another_scorer_are_still_refused(tmp_path):
    """One clip of the new manifest (c3) was scored by vlm-a: its row would sit in vlm-b's table. Rows of this
    manifest under a preset the run leaves out are counted too: they are this manifest's table's other columns."""
    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips[:3], ["direct"], tmp_path / "ev", scorer, _judge(), scorer_id=A))
    with pytest.raises(ManifestError, match=r"holds 1 reward row\(s\) scored by model 'vlm-a' .*first: c3.mp4"):
        asyncio.run(run_reward_eval(clips[2:], ["direct"], tmp_path / "ev", scorer, _judge(), scorer_id=B))
    with pytest.raises(ManifestError, match=r"holds 1 reward row\(s\)"):
        asyncio.run(run_reward_eval(clips[2:], ["full"], tmp_path / "ev", scorer, _judge(), scorer_id=B))
