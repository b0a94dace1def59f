"""Lines of results.jsonl that are not result rows are gone once `raa eval reward` rewrites the file at the end of a
run (decided: the file holds rows only). The note said "N line(s) ... were dropped (their clips were scored again)":
no line was named, and a cut copy of a row whose clip and preset hold another row had no clip scored again for it.
The note now names the lines (first few, with why each was no row) and says which clips were scored again."""

from __future__ import annotations

import asyncio

from evals.eval_views import reward_notes
from evals.reliability import run_reward_eval
from tests.test_eval_reliability import FakeScorer, _clips, _judge


def test_the_note_names_the_dropped_lines_and_claims_no_rescoring_it_did_not_do(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()
    asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    path = tmp_path / "results.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[0][:20] + "\n" + lines[1] + "\n" + "[1, 2]\n")  # c1's row kept whole
    scorer.calls.clear()
    out = asyncio.run(run_reward_eval(clips[:2], ["full"], tmp_path, scorer, _judge()))
    assert scorer.calls == [] and [s.line for s in out.unreadable] == [f"{path}:2", f"{path}:4"]
    assert len(path.read_text().splitlines()) == 2  # the decided deletion stands
    note = next(n for n in reward_notes(out) if "gone from results.jsonl" in n)
    assert f"{path}:2: not valid JSON" in note and f"{path}:4: not a result row" in note, note
    assert "their clips were scored again" not in note
    assert "scored again only where" in note, note
