"""Held-out evaluation during training (training/evaluate.py): rank shares, the logged row, determinism.

Two-rank runs with ZeRO-2/3 and the check that evaluation leaves training unchanged are in
tests/test_train_e2e.py (slow)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from training.config import ConfigError, PromptSpec
from training.config_io import load_config
from training.evaluate import evaluate, rank_items, summarize_eval, summarize_items
from training.metrics_log import MetricsLog
from training.models import build_world_model
from training.rewards import build_reward
from training.videos import eval_video_name

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"
HELD_OUT = [PromptSpec("push the red block to the left", image_seed=11), PromptSpec("open the drawer", image_seed=12),
            PromptSpec("stack the blocks", image_seed=13)]


def test_rank_items_deal_round_robin_and_pad_to_equal_length():
    assert rank_items(5, 0, 2) == [(0, True), (2, True), (4, True)]
    assert rank_items(5, 1, 2) == [(1, True), (3, True), (3, False)]  # last item again, not counted
    assert rank_items(1, 1, 3) == [(0, False)]  # nothing of its own: still one forward
    assert rank_items(4, 1, 2) == [(1, True), (3, True)]
    counted = sorted(i for r in range(3) for i, c in rank_items(7, r, 3) if c)
    assert counted == list(range(7)) and {len(rank_items(7, r, 3)) for r in range(3)} == {3}


def test_summarize_eval_hand_computed():
    row = summarize_eval(10, [{"rewards": [0.2, None, 0.6], "seconds": 1.5, "components": {}},
                              {"rewards": [0.4], "seconds": 9.0, "components": {}}])
    assert row["iteration"] == 10 and row["eval_videos"] == 4 and row["eval_ineligible_count"] == 1
    assert row["eval_reward_mean"] == pytest.approx(0.4)
    assert row["eval_reward_std"] == pytest.approx(math.sqrt(((0.2 - 0.4) ** 2 + (0.6 - 0.4) ** 2) / 3))
    assert row["eval_eligible_fraction"] == pytest.approx(0.75) and row["seconds_eval"] == 1.5
    judged = summarize_eval(3, [{"rewards": [0.5, None], "seconds": 1.0, "components": {"T": [0.75, None]}},
                                {"rewards": [0.25], "seconds": 1.0, "components": {"T": [0.25]}}])
    assert judged["eval_reward_T_mean"] == pytest.approx(0.5)
    empty = summarize_eval(0, [{"rewards": [None], "seconds": 0.1, "components": {}}])
    assert math.isnan(empty["eval_reward_mean"]) and empty["eval_eligible_fraction"] == 0.0


def test_eval_config_is_validated():
    with pytest.raises(ConfigError, match="eval_every needs held-out prompts"):
        load_config(SMOKE, ["--eval_every", "5"])
    with pytest.raises(ConfigError, match="eval_samples >= 1"):
        load_config(SMOKE, ["--eval_samples", "0"])
    cfg = load_config(SMOKE, ["--eval_every", "5", "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]"])
    assert cfg.eval_dataset == [PromptSpec("open the drawer", image_seed=3)]


def test_evaluate_scores_every_item_with_fixed_noise():
    cfg = load_config(SMOKE, ["--eval_samples", "2", "--num_steps", "3"])
    model = build_world_model(cfg, "cpu").eval()
    reward = build_reward(cfg.reward or "", cfg.reward_options)
    first = evaluate(model, cfg, HELD_OUT, reward, iteration=0, rank=0, world=1)
    again = evaluate(model, cfg, HELD_OUT, reward, iteration=5, rank=0, world=1)
    assert len(first["rewards"]) == 6 and first["rewards"] == again["rewards"]  # same noise, same policy
    assert len(set(first["rewards"])) == 6  # every (prompt, sample) has its own noise
    halves = [evaluate(model, cfg, HELD_OUT, reward, iteration=0, rank=r, world=2)["rewards"] for r in (0, 1)]
    assert sorted(halves[0] + halves[1]) == sorted(first["rewards"])  # any rank count, the same items

    def flaky(videos, prompts, **meta):
        return [None] + [0.5] * (len(videos) - 1)

    row = summarize_eval(1, [evaluate(model, cfg, HELD_OUT, flaky, iteration=1, rank=0, world=1)])
    assert row["eval_ineligible_count"] == 1 and row["eval_reward_mean"] == 0.5


def test_eval_rows_have_their_own_file(tmp_path):
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)
    log.write_evaluation({"iteration": 0, "eval_reward_mean": math.nan, "eval_videos": 2}, [])
    log.write_iteration({"iteration": 1, "reward_mean": 0.5}, [])
    assert json.loads((tmp_path / "eval.jsonl").read_text()) == {"iteration": 0, "eval_reward_mean": None,
                                                                 "eval_videos": 2}
    assert "eval_videos" not in (tmp_path / "metrics.jsonl").read_text()
    MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)  # a fresh run starts over
    assert not (tmp_path / "eval.jsonl").exists()


def test_summarize_items_orders_samples_and_keeps_reasons():
    parts = [{"items": [{"prompt": 2, "sample": 0, "text": "c", "video": None, "reward": None, "reason": "no arm",
                         "run_id": "r2"}]},
             {"items": [{"prompt": 0, "sample": 1, "text": "a", "video": "v01.mp4", "reward": 0.5, "reason": None,
                         "run_id": None},
                        {"prompt": 0, "sample": 0, "text": "a", "video": "v00.mp4", "reward": 0.25, "reason": None,
                         "run_id": None}]},
             {"items": []}]  # a rank with nothing counted
    rows = summarize_items(7, parts)
    assert [(r["prompt"], r["sample"]) for r in rows] == [(0, 0), (0, 1), (2, 0)]
    assert rows[0] == {"iteration": 7, "prompt": 0, "sample": 0, "text": "a", "reward": 0.25, "reason": None,
                       "run_id": None, "video": "v00.mp4"}
    assert rows[2]["reward"] is None and rows[2]["reason"] == "no arm" and rows[2]["run_id"] == "r2"


def test_saved_eval_videos_hold_the_scored_samples(tmp_path):
    """eval_videos: save writes each counted sample once, under a name that is the same (prompt, noise)
    at every evaluation; the file decodes to the frames the reward scored (up to mp4 coding)."""
    from tools.video import read_all_frames

    cfg = load_config(SMOKE, ["--num_steps", "3", "--eval_videos", "save", "--output_dir", str(tmp_path)])
    model = build_world_model(cfg, "cpu").eval()
    seen: list = []

    def reward(videos, prompts, **meta):
        seen.extend(videos)
        return [float(v.mean()) / 255 for v in videos]

    parts = [evaluate(model, cfg, HELD_OUT, reward, iteration=4, rank=r, world=2) for r in (0, 1)]
    rows = summarize_items(4, parts)
    assert [r["video"] for r in rows] == [eval_video_name(4, p, 0) for p in range(3)]  # rank 1's padding is not saved
    assert sorted(p.name for p in (tmp_path / "eval_videos" / "iter_000004").iterdir()) == [
        "p000_s00.mp4", "p001_s00.mp4", "p002_s00.mp4"]
    by_prompt = {r["prompt"]: r for r in rows}
    scored = dict(zip([it["prompt"] for p in parts for it in p["items"]], seen, strict=True))
    for p, row in by_prompt.items():
        frames = read_all_frames(tmp_path / row["video"])
        assert frames.shape == scored[p].shape
        assert np.abs(frames.astype(np.int16) - scored[p]).mean() < 3.0  # mp4, not another sample
        assert row["reward"] == pytest.approx(float(scored[p].mean()) / 255) and row["text"] == HELD_OUT[p].text
    again = evaluate(model, cfg, HELD_OUT[:1], reward, iteration=9, rank=0, world=1)["items"][0]
    assert np.array_equal(read_all_frames(tmp_path / again["video"]), read_all_frames(tmp_path / rows[0]["video"]))


def test_unwritable_eval_videos_keep_the_rewards(tmp_path, capsys):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the output folder should be")
    cfg = load_config(SMOKE, ["--num_steps", "2", "--eval_videos", "save", "--output_dir", str(blocker),
                              "--eval_samples", "2"])
    model = build_world_model(cfg, "cpu").eval()
    part = evaluate(model, cfg, HELD_OUT[:2], lambda videos, prompts, **meta: [0.5] * len(videos),
                    iteration=3, rank=0, world=1)
    assert part["rewards"] == [0.5] * 4 and [it["video"] for it in part["items"]] == [None] * 4
    err = capsys.readouterr().err
    assert err.count("could not write iteration 3's held-out videos") == 1, err


def test_videos_are_not_written_unless_asked(tmp_path):
    cfg = load_config(SMOKE, ["--num_steps", "2", "--output_dir", str(tmp_path)])
    model = build_world_model(cfg, "cpu").eval()
    part = evaluate(model, cfg, HELD_OUT[:1], lambda videos, prompts, **meta: [None], iteration=0, rank=0, world=1)
    assert part["items"][0]["video"] is None and part["items"][0]["reason"] and not (tmp_path / "eval_videos").exists()


def test_eval_items_have_their_own_file(tmp_path):
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)
    row = {"iteration": 3, "prompt": 0, "sample": 0, "text": "a", "reward": None, "reason": "x", "run_id": None,
           "video": None}
    log.write_evaluation({"iteration": 3, "eval_reward_mean": math.nan}, [row])
    log.write_evaluation({"iteration": 4, "eval_reward_mean": math.nan}, [])  # nothing scored: no line
    assert [json.loads(line) for line in (tmp_path / "eval_rewards.jsonl").read_text().splitlines()] == [row]
    MetricsLog(tmp_path, enabled=True, tensorboard=False, append=True)  # a resume appends
    assert (tmp_path / "eval_rewards.jsonl").exists()
    MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)  # a fresh run starts over
    assert not (tmp_path / "eval_rewards.jsonl").exists()


def test_held_out_noise_is_no_training_rollouts_noise(monkeypatch):
    """Before: item (prompt p, sample s) was seeded derive_seed(seed, p, s), which is the seed of the rollouts
    of prompt slot 0 on rank s in iteration p (trailing zeros dropped): held-out items started from noise the
    policy had been trained on."""
    import training.evaluate as evaluation
    from training.data import derive_seed

    cfg = load_config(SMOKE, ["--eval_samples", "3", "--num_steps", "3"])
    model = build_world_model(cfg, "cpu").eval()
    seeds: list[int] = []
    monkeypatch.setattr(evaluation, "ode_latents", lambda *args: seeds.extend(args[4]) or torch.zeros(1))
    monkeypatch.setattr(evaluation, "decode_each", lambda *args: [np.zeros((2, 4, 4, 3), dtype=np.uint8)])
    evaluate(model, cfg, HELD_OUT, lambda videos, prompts, **meta: [0.5] * len(videos), iteration=0, rank=0, world=1)
    assert len(set(seeds)) == len(HELD_OUT) * 3
    rollouts = {derive_seed(cfg.seed, it, rank, slot, *chunk) for it in range(8) for rank in range(4)
                for slot in range(4) for chunk in ((), (1,))}
    updates = {derive_seed(cfg.seed, it, epoch) for it in range(8) for epoch in range(4)}
    assert not set(seeds) & (rollouts | updates)


def test_eval_rows_count_ineligible_rewards_by_kind_as_training_rows_do():
    """metrics.jsonl splits ineligible rewards into ineligible_none|nan|inf|error, eval.jsonl only counted them:
    a held-out mean missing because the reward service was down read like one the agent had refused. The row
    has eval_ineligible_<kind>, and each ineligible eval_rewards.jsonl row its ineligible_kind, as rewards.jsonl."""
    cfg = load_config(SMOKE, ["--eval_samples", "1", "--num_steps", "3"])
    model = build_world_model(cfg, "cpu").eval()

    def outage(videos, prompts, **meta):
        raise ConnectionError("reward service down")

    def verdict(videos, prompts, **meta):
        return [None] + [float("nan")] + [0.5] * (len(videos) - 2)

    down = evaluate(model, cfg, HELD_OUT, outage, iteration=1, rank=0, world=1)
    row = summarize_eval(1, [down])
    assert row["eval_ineligible_error"] == len(HELD_OUT) and row["eval_ineligible_none"] == 0
    assert {r["ineligible_kind"] for r in summarize_items(1, [down])} == {"error"}
    judged = summarize_eval(2, [evaluate(model, cfg, HELD_OUT, verdict, iteration=2, rank=0, world=1)])
    assert (judged["eval_ineligible_none"], judged["eval_ineligible_nan"], judged["eval_ineligible_error"]) == (1, 1, 0)
    assert judged["eval_ineligible_count"] == 2


def test_a_hung_held_out_reward_ends_ineligible_after_the_timeout():
    """Held-out evaluation called the reward directly, without reward_timeout_s: a reward that never returned
    hung the run. Its samples are now ineligible with the reason, and the next evaluation scores."""
    import threading

    cfg = load_config(SMOKE, ["--num_steps", "2", "--reward_timeout_s", "0.3"])
    model = build_world_model(cfg, "cpu").eval()
    release = threading.Event()
    calls = []

    def hangs_once(videos, prompts, **meta):
        calls.append(meta["phase"])
        if len(calls) == 1:
            release.wait(30)  # far past the timeout (released at the end)
        return [0.5] * len(videos)

    try:
        part = evaluate(model, cfg, HELD_OUT, hangs_once, iteration=0, rank=0, world=1)
        assert part["rewards"] == [None] * 3
        assert all("timed out after 0.3 s" in item["reason"] and item["ineligible_kind"] == "error"
                   for item in part["items"])
        assert evaluate(model, cfg, HELD_OUT, hangs_once, iteration=1, rank=0, world=1)["rewards"] == [0.5] * 3
        assert calls == ["eval", "eval"]
    finally:
        release.set()
