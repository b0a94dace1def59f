"""training/metrics.py MetricsLog on the files a crashed attempt left."""

from __future__ import annotations

import json

from tools.jsonl import json_objects
from training.metrics import MetricsLog


def test_a_resume_closes_a_kept_row_that_lost_its_newline(tmp_path):
    """A crash between a row and its newline left a valid last line that the trim keeps as it is: the resumed
    run's first row was appended onto it, and both rows read as one torn line (and a later trim dropped them)."""
    rows = [{"iteration": 1, "eval_reward_mean": 0.5}, {"iteration": 2, "eval_reward_mean": 0.6}]
    (tmp_path / "eval.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[1]))  # no final newline
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=True)
    assert log.trim_after(2) == {}
    log.write_eval({"iteration": 3, "eval_reward_mean": 0.7})
    log.close()
    assert json_objects(tmp_path / "eval.jsonl") == ([*rows, {"iteration": 3, "eval_reward_mean": 0.7}], 0)
