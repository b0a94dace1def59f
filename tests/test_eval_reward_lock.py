"""Two `raa eval reward` runs into one folder (say, presets split over two endpoints) each rewrote results.jsonl
at the end from the rows it had read at its start plus its own: the other run's rows were lost, and the rows it
appended after that rewrite went to the replaced file. A run now holds the folder's results file for its
duration (`graph.batch.lock_output`, as `raa score-batch` holds its output), and a second one is refused before
it scores anything."""

from __future__ import annotations

import asyncio

import pytest

from evals.reliability import ManifestError, run_reward_eval
from graph.batch import lock_output
from tests.test_eval_reliability import FakeScorer, _clips, _judge


def test_a_second_run_into_the_same_folder_is_refused(tmp_path):
    clips, scorer = _clips(tmp_path), FakeScorer()
    out = tmp_path / "ev"
    held = lock_output(out / "results.jsonl")  # another run is writing the folder
    try:
        with pytest.raises(ManifestError, match=r"another `raa eval reward` is writing .*results\.jsonl"):
            asyncio.run(run_reward_eval(clips, ["direct"], out, scorer, _judge()))
        assert scorer.calls == []
    finally:
        held.close()
    done = asyncio.run(run_reward_eval(clips, ["direct"], out, scorer, _judge()))  # free again
    assert done.scored == len(clips)
    again = lock_output(out / "results.jsonl")  # the run let go of it when it ended
    again.close()
