"""`--retry-ineligible` and a clip the model refused: scored again only by another scorer.

A "refused" fault is the model's (or its server's content policy's) answer about this clip: the same model at the
same endpoint and temperature refuses it again, so each `--retry-ineligible` paid for the request once more and the
plain resume kept saying the rows "a rerun can fix". It is retried when the row's recorded scorer
(`graph.batch.scorer_of`: model, temperature, endpoint) differs from this run's; a row without one is taken as
scored by this run's scorer (`graph.batch.same_scorer`), as the resume check does.
"""

from __future__ import annotations

from graph.batch_manifest import read_items
from graph.batch_manifest_file import RowManifests
from graph.batch_resume import stale_rows
from graph.batch_retry import retryable

REFUSED = {"status": "ineligible", "reasons": ["observe: refused: the model refused: I cannot judge this clip"]}
DOWN = {"status": "ineligible", "reasons": ["observe: transport: APIConnectionError after 3 attempts"]}
OURS = {"model": "m1", "temperature": 0.0, "endpoint": "http://h:8000/v1"}


def _goes(tmp_path, row: dict, scorer: dict) -> str | None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"path": "c.mp4", "instruction": "push"}\n')
    goes = stale_rows(manifest, [{"key": "k", "path": "c.mp4"}], "full", 0, retry_ineligible=True, scorer=scorer,
                      manifests=RowManifests(read_items(manifest, "full")[2]))
    return goes({"key": "k", "line": 1, "path": "c.mp4", **row})


def test_a_refusal_is_not_retried_with_the_same_scorer(tmp_path):
    assert not retryable(REFUSED, "c.mp4")
    assert _goes(tmp_path, {"result": REFUSED, "scorer": OURS}, OURS) is None
    assert _goes(tmp_path, {"result": REFUSED}, OURS) is None  # no scorer recorded: taken as this one
    assert _goes(tmp_path, {"result": DOWN, "scorer": OURS}, OURS) == "retry"


def test_a_refusal_is_retried_by_another_model_or_temperature(tmp_path):
    assert retryable(REFUSED, "c.mp4", scorer_changed=True)
    for other in ({**OURS, "model": "m2"}, {**OURS, "temperature": 0.7}, {**OURS, "endpoint": "http://g:8000/v1"}):
        assert _goes(tmp_path, {"result": REFUSED, "scorer": OURS}, other) == "retry", other


def test_only_a_refusal_of_the_content_is_final_other_4xx_rows_stay_retryable():
    for message in ("the server's content filter stopped the reply",
                    "BadRequestError: Error code: 400 - {'error': {'code': 'content_policy_violation'}}"):
        assert not retryable({"status": "ineligible", "reasons": [f"assess: refused: {message}"]}), message
    for message in ("AuthenticationError: Error code: 401 - invalid key",  # a row written before it was "settings"
                    "BadRequestError: Error code: 400 - At most 48 image(s) may be provided in one prompt.",
                    "UnprocessableEntityError: Error code: 422 - bad request"):
        assert retryable({"status": "ineligible", "reasons": [f"assess: refused: {message}"]}), message


def test_a_refusal_beside_a_fault_a_rerun_can_fix_is_retried(tmp_path):
    both = {"status": "ineligible", "reasons": [*REFUSED["reasons"], *DOWN["reasons"]]}
    assert retryable(both, "c.mp4")


def test_raa_eval_reward_decides_as_score_batch_does():
    from evals.reliability import fixable

    row = {**REFUSED, "scorer": OURS}
    assert not fixable(row, "c.mp4", OURS) and not fixable(row, "c.mp4")
    assert fixable(row, "c.mp4", {**OURS, "model": "m2"})
    assert fixable({**DOWN, "scorer": OURS}, "c.mp4", OURS)
