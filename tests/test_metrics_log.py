"""training/metrics_log.py MetricsLog on the files a crashed attempt left."""

from __future__ import annotations

import json

from tools.jsonl import json_objects
from training.metrics_log import MetricsLog


def test_a_resume_closes_a_kept_row_that_lost_its_newline(tmp_path):
    """A crash between a row and its newline left a valid last line that the trim keeps as it is: the resumed
    run's first row was appended onto it, and both rows read as one torn line (and a later trim dropped them)."""
    rows = [{"iteration": 1, "eval_reward_mean": 0.5}, {"iteration": 2, "eval_reward_mean": 0.6}]
    (tmp_path / "eval.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[1]))  # no final newline
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=True)
    assert log.trim_after(2) == {}
    log.write_evaluation({"iteration": 3, "eval_reward_mean": 0.7}, [])
    log.close()
    assert json_objects(tmp_path / "eval.jsonl") == ([*rows, {"iteration": 3, "eval_reward_mean": 0.7}], 0)


def test_an_iteration_without_advantages_logs_them_as_null_not_0(tmp_path):
    """Every reward ineligible (an endpoint down): no sample was updated, and adv_mean / adv_std / adv_abs_max
    were logged as 0.0, a chart point saying every group agreed, where the other statistics of no item (reward_mean,
    clip_fraction, mu_kl) are null."""
    import math

    from tests.test_train_parts import _part
    from training.metrics import summarize

    row = summarize(3, [_part([None, None], ineligible_none=2, update_skipped=True), _part([None])])
    assert all(math.isnan(row[k]) for k in ("adv_mean", "adv_std", "adv_abs_max", "reward_mean")), row
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)
    log.write_iteration(row, [])
    log.close()
    logged = json_objects(tmp_path / "metrics.jsonl")[0][0]
    assert logged["adv_mean"] is None and logged["adv_std"] is None and logged["adv_abs_max"] is None
    assert summarize(3, [_part([1.0, 0.0], advantages=[1.0, -1.0])])["adv_abs_max"] == 1.0
