"""The trainer against the HTTP reward service (`raa serve-reward`): `reward: http` end to end, which backbone
scored a run, and the agent's components in the trainer's logs (split from test_reward_service.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from service_helpers import serve

from graph.reward_service import create_reward_app
from tests.graph_scripts import textured_frames
from tests.test_reward_service import TOKEN, _agent


def test_trainer_http_reward_end_to_end(tmp_path):
    """training's `reward: http` client against the real service: rewards and reasons per clip."""
    from graph.gate import diagnostic_reward
    from training.rewards import HttpAgentReward, call_reward

    app = create_reward_app(_agent(), "decomposed", token=TOKEN)
    rng = np.random.default_rng(0)
    clips = [textured_frames(rng), np.full((9, 32, 32, 3), 90, np.uint8)]
    with serve(app) as url:
        fn = HttpAgentReward(url=f"{url}/v1/score", token=TOKEN, timeout_s=60)
        out = call_reward(fn, "http", clips, ["pick the cup", "open the drawer"], fps=8.0, iteration=1)
        assert out.rewards[0] == pytest.approx(0.975) and out.rewards[1] == 0.0  # textured / uniform clip
        assert any("uniform" in r for r in fn.last_reasons[1])
        assert out.components["T"][0] == 1.0 and out.components["failure"][0] is None  # decomposed: no final check
        assert diagnostic_reward(*(out.components[k][0] for k in ("T", "P", "V"))) == pytest.approx(out.rewards[0])
        wrong = HttpAgentReward(url=f"{url}/v1/score", token="nope", timeout_s=60)
        out = call_reward(wrong, "http", clips, ["a", "b"])
        assert out.rewards == [None, None] and "401" in wrong.last_reasons[0][0]


def test_a_trainer_records_the_backbone_of_the_services_that_score_it(tmp_path):
    """`reward: http` provenance (training/provenance.py): the first service's scoring, a note for a service
    scoring differently, "unreported" (never a failure) for one that does not say or refuses the token."""
    from training.provenance import read_reward_backbone, record_scoring, served_scoring
    from training.rewards import BrightnessReward, HttpAgentReward
    from training.sum_reward import SumPart, SumReward

    scoring = {"model": "vlm-a", "base_url": "http://gpu:8000/v1", "temperature": 0.0}
    apps = [create_reward_app(_agent(), "full", token=TOKEN, info={"model": "vlm-a", "scoring": scoring}),
            create_reward_app(_agent(), "full", token=TOKEN, info={"scoring": {**scoring, "model": "vlm-b"}}),
            create_reward_app(_agent(), "full", token=TOKEN)]  # another implementation: no scoring
    with serve(apps[0]) as a, serve(apps[1]) as b, serve(apps[2]) as c:
        fn = HttpAgentReward(url=[f"{a}/v1/score", f"{b}/v1/score", f"{c}/v1/score"], token=TOKEN)
        record, notes = served_scoring(fn)
        assert record == {"service": f"{a}/v1/score", "preset": "full", **scoring}
        assert notes == [f"note: the reward service {b}/v1/score scores with another backbone than {a}/v1/score "
                         "(model: 'vlm-a' -> 'vlm-b'); recorded: the first",
                         f"note: the reward service {c}/v1/score does not say which backbone scores (unreported: its "
                         f"/v1/info has no 'scoring'); recorded: {a}/v1/score"]
        assert served_scoring(HttpAgentReward(url=f"{c}/v1/score", token=TOKEN))[0] == {
            "service": f"{c}/v1/score", "scoring": "unreported: its /v1/info has no 'scoring'"}
        refused, _ = served_scoring(HttpAgentReward(url=f"{a}/v1/score", token="nope"))
        assert refused["scoring"].startswith(f"unreported: GET {a}/v1/info: HTTPStatusError") and "401" in refused["scoring"]
        summed = SumReward([SumPart("b", 1.0, BrightnessReward(), "brightness"),
                            SumPart("h", 1.0, HttpAgentReward(url=f"{a}/v1/score", token=TOKEN), "http")])
        assert record_scoring(tmp_path, summed, None, resume=False) == []
        assert read_reward_backbone(tmp_path) == record  # a sum records its http part's service
    assert served_scoring(BrightnessReward()) == (None, [])  # a reward with no backbone records nothing
    # a fresh run in that folder (overwrite_output_dir) scored by no model: the earlier record is not its own
    assert record_scoring(tmp_path, BrightnessReward(), None, resume=True) == [] and read_reward_backbone(tmp_path)
    assert record_scoring(tmp_path, BrightnessReward(), None, resume=False) == []
    assert read_reward_backbone(tmp_path) is None


@pytest.mark.slow
def test_training_logs_the_agents_components(tmp_path):
    """A smoke run scored by the service (reward: http): each rollout's T, P, V and gate inputs reach
    rewards.jsonl, their means metrics.jsonl, and the held-out ones eval.jsonl / eval_rewards.jsonl."""
    import sys

    from graph.gate import diagnostic_reward
    from tests.launches import launch

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "run"
    served = {"model": "vlm-x", "scoring": {"model": "vlm-x", "temperature": 0.0}}
    with serve(create_reward_app(_agent(), "decomposed", max_concurrency=4, token="tk-1", info=served)) as url:
        proc = launch(
            [sys.executable, "-m", "training.train", "--config", str(root / "training/configs/smoke.yaml"),
             "--output_dir", str(out), "--progress", "false", "--tensorboard", "false", "--max_iterations", "1",
             "--export", "none", "--checkpoint_every", "1", "--reward", "http", "--reward_options",
             f"{{url: '{url}/v1/score', startup_wait_s: 10, token_env: RT_TOKEN}}", "--eval_every", "1",
             "--eval_dataset", "[{text: 'open the drawer', image_seed: 12}]"],  # the service's token, from RT_TOKEN
            timeout=600, what="training", cwd=root, extra={"RT_TOKEN": "tk-1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((out / "reward_backbone.json").read_text()) == {  # which model scored the run's rewards
        "service": f"{url}/v1/score", "preset": "decomposed", "model": "vlm-x", "temperature": 0.0}
    rows = [json.loads(line) for line in (out / "rewards.jsonl").read_text().splitlines()]
    assert rows and all(sorted(r["components"]) == ["P", "T", "V", "failure", "unverifiable"] for r in rows)
    judged = [r for r in rows if r["components"]["T"] is not None]
    assert judged, rows
    for r in judged:  # the reward is the diagnostic reward of its own components (decomposed: no gate)
        assert diagnostic_reward(*(r["components"][k] for k in ("T", "P", "V"))) == pytest.approx(r["reward"])
    metrics = json.loads((out / "metrics.jsonl").read_text())
    assert metrics["reward_T_mean"] == pytest.approx(np.mean([r["components"]["T"] for r in judged]))
    assert metrics["reward_failure_mean"] is None  # decomposed makes no final check: no value, logged null
    assert metrics["reward_usage_calls"] >= len(judged) and metrics["reward_usage_images"] > 0  # the service's usage
    held_out = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    items = [json.loads(line) for line in (out / "eval_rewards.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in items] == [0, 1] and all("T" in r["components"] for r in items)
    assert all(h["eval_reward_T_mean"] == i["components"]["T"] for h, i in zip(held_out, items, strict=True))
