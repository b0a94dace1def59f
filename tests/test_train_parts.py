"""Small pieces of the trainer: preview decoder, prompt stream, DeepSpeed JSON, metric summary (prompt images: test_prompt_images.py)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from training.config import PromptSpec, TrainConfig
from training.data import PromptStream, load_frame, load_prompts, synthetic_frame
from training.metrics import progress_postfix, summarize
from training.metrics_log import MetricsLog
from training.preview import latent_preview

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def test_latent_preview_hand_computed():
    z = torch.zeros(1, 6, 3, 1, 1)
    z[0, 0, 1] = 2.0  # channels 0 and 3 -> red; mean (2 + 0) / 2 = 1 -> 127.5 (1 + tanh(0.5))
    z[0, 4, 2] = -4.0  # channels 1 and 4 -> green; mean -2 -> 127.5 (1 + tanh(-1))
    f = latent_preview(z, num_frames=5, height=2, width=2)
    assert f.shape == (1, 5, 2, 2, 3) and f.dtype == np.uint8
    assert f[0, 0, 0, 0].tolist() == [128, 128, 128]  # latent frame 0 -> pixel frame 0
    red = round(127.5 * (1 + math.tanh(0.5)))
    green = round(127.5 * (1 + math.tanh(-1.0)))
    assert f[0, 1, 1, 1].tolist() == [red, 128, 128] and f[0, 2, 0, 0].tolist() == [red, 128, 128]
    assert f[0, 3, 0, 0].tolist() == [128, green, 128] and f[0, 4, 1, 0].tolist() == [128, green, 128]
    with pytest.raises(ValueError, match="multiple"):
        latent_preview(z, num_frames=4, height=2, width=2)


def test_prompt_stream_is_resumable_and_covers_each_epoch():
    a = PromptStream(5, seed=3)
    first = a.take(7)
    assert sorted(first[:5]) == list(range(5))
    b = PromptStream(5, seed=3, position=4)
    assert b.take(3) == first[4:7]
    assert a.position == 7


def test_prompt_stream_draws_each_epoch_permutation_once(monkeypatch):
    """`take` draws an epoch's permutation once, not once per prompt: with a million prompts, 64 prompts of an
    iteration cost 64 permutations of a million (~2.4 s on every rank). The indices are unchanged: those of
    `index_at`, across an epoch boundary too."""
    import training.data as data

    draws = []
    real = np.random.default_rng
    monkeypatch.setattr(data.np.random, "default_rng", lambda seed: draws.append(seed) or real(seed))
    stream = PromptStream(10, seed=7, position=6)
    got = stream.take(14)  # positions 6..19: the last 4 of epoch 0, then all of epoch 1
    assert len(draws) == 2 and stream.position == 20  # one per epoch touched
    draws.clear()
    assert got == [PromptStream(10, seed=7).index_at(p) for p in range(6, 20)]
    assert sorted(got[4:]) == list(range(10))  # epoch 1 whole: no prompt skipped or repeated at the boundary


def test_prompt_orders_of_neighbouring_seeds_are_unrelated():
    """Epoch e's order came from default_rng(seed + e), so seed s + 1 drew epoch e + 1's order of seed s: runs of
    a seed sweep (0, 1, 2) saw one prompt sequence shifted by an epoch. Each (seed, epoch) now has its own
    stream (``prompt_order: derived``); ``seed_plus_epoch`` keeps the old order, for runs saved before."""
    n = 50
    for s in range(3):
        for e in range(3):
            assert not np.array_equal(PromptStream(n, s + 1).permutation(e), PromptStream(n, s).permutation(e + 1))
            assert sorted(PromptStream(n, s).permutation(e)) == list(range(n))
    old = PromptStream(n, 4, order="seed_plus_epoch")
    assert np.array_equal(old.permutation(2), np.random.default_rng(6).permutation(n))
    assert old.take(120) == [int(np.random.default_rng(4 + p // n).permutation(n)[p % n]) for p in range(120)]
    assert PromptStream(n, 4).take(7) == PromptStream(n, 4, order="derived", position=0).take(7)


def test_load_prompts_and_frames(tmp_path):
    from PIL import Image

    Image.fromarray(np.full((10, 20, 3), 200, np.uint8)).save(tmp_path / "a.png")
    (tmp_path / "p.jsonl").write_text(json.dumps({"text": "open", "image": "a.png"}) + "\n\n")
    prompts = load_prompts([PromptSpec(text="x", image_seed=2)], str(tmp_path / "p.jsonl"))
    assert [p.text for p in prompts] == ["x", "open"]
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps({"text": "close"}).encode() + b"\r\n")
    assert [p.text for p in load_prompts([], str(tmp_path / "bom.jsonl"))] == ["close"]  # Windows editors
    frame = load_frame(prompts[1], 16, 8)
    assert frame.shape == (16, 8, 3) and int(frame.mean()) == 200
    assert np.array_equal(load_frame(prompts[0], 16, 16), synthetic_frame(2, 16, 16))
    (tmp_path / "bad.jsonl").write_text(json.dumps({"image": "a.png"}) + "\n")
    with pytest.raises(ValueError, match="needs 'text'"):
        load_prompts([], str(tmp_path / "bad.jsonl"))
    (tmp_path / "broken.jsonl").write_text(json.dumps({"text": "ok"}) + "\n{text: 'no quotes'}\n")
    with pytest.raises(ValueError, match=r"broken\.jsonl:2: not valid JSON"):
        load_prompts([], str(tmp_path / "broken.jsonl"))
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=r"list\.jsonl:1: a prompt needs 'text'"):
        load_prompts([], str(tmp_path / "list.jsonl"))
    with pytest.raises(FileNotFoundError):
        load_frame(PromptSpec(text="y", image=str(tmp_path / "missing.png")), 8, 8)


@pytest.mark.parametrize(("row", "message"), [
    ({"text": 123}, r"rows\.jsonl:2: 'text' must be a non-empty string, got 123"),
    ({"text": "  "}, r"rows\.jsonl:2: 'text' must be a non-empty string, got '  '"),
    ({"text": "go", "image": 5}, r"rows\.jsonl:2: 'image' must be a file path \(a non-empty string\) or null, got 5"),
    ({"text": "go", "image": ""}, r"rows\.jsonl:2: 'image' must be a file path"),
    ({"text": "go", "image_seed": "3"}, r"rows\.jsonl:2: 'image_seed' must be an integer, got '3'"),
    ({"text": "go", "image_seed": 1.5}, r"rows\.jsonl:2: 'image_seed' must be an integer, got 1\.5"),
    ({"text": "go", "image_seed": True}, r"rows\.jsonl:2: 'image_seed' must be an integer, got True"),
    ({"text": "go", "image_seed": -3}, r"rows\.jsonl:2: 'image_seed' must be >= 0, got -3"),
])
def test_load_prompts_names_the_line_and_field_of_a_mistyped_row(tmp_path, row, message):
    """A numeric text failed only when the prompt was drawn; a numeric image was a bare TypeError."""
    (tmp_path / "rows.jsonl").write_text(json.dumps({"text": "ok", "image": None, "image_seed": 7}) + "\n"
                                         + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=message):
        load_prompts([], str(tmp_path / "rows.jsonl"))


def test_an_empty_prompt_file_is_named(tmp_path):
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n  \n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=rf"no training prompts: {tmp_path / name} holds no prompt rows"):
            load_prompts([], str(tmp_path / name))
        assert [p.text for p in load_prompts([PromptSpec("x")], str(tmp_path / name))] == ["x"]
    with pytest.raises(ValueError, match="no training prompts: the config lists none and names no prompt file"):
        load_prompts([], None)
    with pytest.raises(ValueError, match="no held-out prompts: the config lists none"):  # said 'training'
        load_prompts([], None, "held-out")


def test_a_prompt_file_that_is_not_utf8_is_named(tmp_path):
    """A Latin-1 export raised a bare UnicodeDecodeError that named no file."""
    (tmp_path / "latin.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=rf"{re.escape(str(tmp_path / 'latin.jsonl'))}:2: not UTF-8 text \(byte 0xe9 at column 14\)"):
        load_prompts([], str(tmp_path / "latin.jsonl"))


def test_deepspeed_config_values():
    from training.engine import deepspeed_config

    cfg = TrainConfig(tiny=True, reward="brightness", micro_batch=2, learning_rate=3e-3, zero_stage=3,
                      dataset=[PromptSpec(text="t")])
    ds = deepspeed_config(cfg, grad_accum_steps=6)
    assert ds["train_micro_batch_size_per_gpu"] == 2 and ds["gradient_accumulation_steps"] == 6
    assert "train_batch_size" not in ds and ds["zero_optimization"]["stage"] == 3
    assert ds["optimizer"]["type"] == "AdamW" and ds["optimizer"]["params"]["torch_adam"] is True
    assert ds["optimizer"]["params"]["lr"] == 3e-3 and ds["gradient_clipping"] == 1.0


def _part(rewards, **kw):
    base = {"rewards": rewards, "advantages": [], "skipped_groups": 0, "zero_std_groups": 0, "ineligible_none": 0, "ineligible_nan": 0,
            "ineligible_inf": 0, "ineligible_error": 0, "clip_fraction": [], "approx_kl": [], "mu_kl": [],
            "loss": [], "mask_mean": [0.5], "diversity": [1.0], "diversity_frames": [0.1],
            "seconds_rollout": 1.0, "seconds_reward": 2.0, "seconds_update": 3.0, "update_skipped": False, "lr": 1e-4,
            "grad_norms": [], "empty_steps": 0, "components": {}, "usage": {}, "adv_clipped": 0}
    base.update(kw)
    return base


def test_summarize_over_ranks_and_log(tmp_path):
    parts = [_part([1.0, None], skipped_groups=1, ineligible_none=1, advantages=[0.5, -0.5], approx_kl=[0.1]),
             _part([3.0, 2.0], approx_kl=[0.3], diversity=[3.0], zero_std_groups=2)]
    row = summarize(7, parts)
    assert row["iteration"] == 7 and row["reward_mean"] == pytest.approx(2.0)
    assert row["reward_std"] == pytest.approx(math.sqrt(2 / 3))
    assert row["eligible_fraction"] == 0.75 and row["ineligible_count"] == 1 and row["ineligible_none"] == 1
    assert row["skipped_groups"] == 1 and row["zero_std_groups"] == 2 and row["approx_kl"] == pytest.approx(0.2)
    assert row["rollout_diversity"] == 2.0 and row["adv_abs_max"] == 0.5
    assert math.isnan(row["mu_kl"])  # no update item -> NaN in memory, null in the JSONL
    assert row["nonfinite_losses"] == 0 and math.isnan(row["grad_norm"]) and math.isnan(row["grad_norm_max"])
    parts = [_part([1.0, None], components={"T": [1.0, None], "failure": [0.0, None]}),
             _part([0.0, 0.5], components={"T": [0.0, 0.5], "failure": [1.0, 0.0]}), _part([0.3])]
    judged = summarize(7, parts)  # over the items with a value (eligible), all ranks; a rank without: none
    assert judged["reward_T_mean"] == pytest.approx(0.5) and judged["reward_failure_mean"] == pytest.approx(1 / 3)
    assert "reward_T_mean" not in row  # a reward without components logs none
    costly = summarize(7, [_part([1.0], usage={"calls": 4, "input_tokens": 100}), _part([2.0], usage={"calls": 6})])
    assert costly["reward_usage_calls"] == 10 and costly["reward_usage_input_tokens"] == 100
    assert not any(k.startswith("reward_usage_") for k in row)
    clipped = summarize(7, [_part([1.0, 2.0], grad_norms=[0.5, 2.5]), _part([1.0, 2.0], grad_norms=[9.0])])
    assert clipped["grad_norm"] == 1.5 and clipped["grad_norm_max"] == 2.5  # rank 0's: the norm is global
    for norms in ([float("nan"), 2.0], [2.0, float("nan")]):  # a NaN step: NaN whatever its place, as grad_norm
        nan_step = summarize(7, [_part([1.0, 2.0], grad_norms=norms)])
        assert math.isnan(nan_step["grad_norm"]) and math.isnan(nan_step["grad_norm_max"]), norms
    for norms in ([float("inf"), 2.0], [2.0, float("inf")]):
        assert summarize(7, [_part([1.0, 2.0], grad_norms=norms)])["grad_norm_max"] == math.inf
    diverged = summarize(8, [_part([1.0, 2.0], loss=[0.5, float("nan")]), _part([1.0, 2.0], loss=[float("inf"), 1.5])])
    assert diverged["nonfinite_losses"] == 2 and diverged["loss"] == pytest.approx(1.0)  # the finite ones
    # micro-batches of 3 and 1 valid samples (G = 4, micro_batch 3): item means, not means of the two means
    uneven = summarize(9, [_part([1.0, 2.0], clip_fraction=[1 / 3, 1.0], approx_kl=[0.3, 0.1], loss=[2.0, 6.0],
                                 mu_kl=[], item_counts=[3, 1], mask_flip_fraction=[0.0, 0.5],
                                 mask_flip_counts=[3, 1])])
    assert uneven["clip_fraction"] == pytest.approx(0.5)  # (1 + 1) clipped items of 4, not (1/3 + 1) / 2
    assert uneven["approx_kl"] == pytest.approx((0.3 * 3 + 0.1) / 4) and uneven["loss"] == pytest.approx(3.0)
    assert math.isnan(uneven["mu_kl"])  # no reference (beta = 0): nothing to weigh
    assert uneven["mask_flip_fraction"] == pytest.approx(0.5 / 4) and math.isnan(row["mask_flip_fraction"])
    # the progress bar: approx_kl only with more than one optimizer step (one on-policy step: 0 by construction)
    assert progress_postfix(uneven, beta=0.0, steps_per_iteration=1) == {"reward": "1.5000"}
    assert progress_postfix({**uneven, "mu_kl": 73.9}, beta=0.01, steps_per_iteration=2) == {
        "reward": "1.5000", "kl_ref": "7.39e+01", "kl_old": "2.50e-01"}
    log = MetricsLog(tmp_path, enabled=True, tensorboard=True)
    log.write_iteration(row, [])
    log.close()
    line = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert line["mu_kl"] is None and line["seconds_update"] == 3.0
    assert any((tmp_path / "tensorboard").iterdir())


def test_rewards_log_one_line_per_rollout(tmp_path):
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)
    items = [{"rank": 0, "group": 0, "sample": 0, "prompt": "open the drawer", "reward": 0.5, "run_id": "run-1"},
             {"rank": 1, "group": 0, "sample": 1, "prompt": "stack", "reward": None, "run_id": None}]
    log.write_rewards(3, items)
    log.write_rewards(4, [])
    rows = [json.loads(x) for x in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    assert rows == [{"iteration": 3, **items[0]}, {"iteration": 3, **items[1]}]
    MetricsLog(tmp_path, enabled=False, tensorboard=False).write_rewards(5, items)  # other ranks write nothing
    assert len((tmp_path / "rewards.jsonl").read_text().splitlines()) == 2


def test_lora_targets_are_checked_one_by_one():
    """peft fails only when no target matches; a typo in one of several trained fewer adapters silently."""
    import torch

    from training.config import ConfigError
    from training.engine import check_lora_targets

    attn = torch.nn.Module()
    attn.to_q, attn.to_k = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    attn.to_out = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Dropout()])
    model = torch.nn.Module()
    model.blocks = torch.nn.ModuleList([attn])
    check_lora_targets(model, ["to_q", "to_k", "to_out.0"])  # a name or a "."-suffix of one, as peft matches
    with pytest.raises(ConfigError, match=r"lora_targets \['to_kk', 'out.0'\] match no module of the Module; "
                                          r"its linear layers end in: to_k, to_out.0, to_q$"):
        check_lora_targets(model, ["to_q", "to_kk", "out.0"])


def test_lr_factor_hand_values():
    """Warmup, then constant, linear or cosine decay to min_ratio over the run's optimizer steps."""
    from training.lr_schedule import lr_factor

    assert [lr_factor(k, 4) for k in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert lr_factor(0, 0) == 1.0 and lr_factor(10, 0) == 1.0  # no warmup
    assert lr_factor(0, 1) == 1.0
    # 2 warmup steps, 10 in all: the decay runs over steps 2..10 (progress (k - 2) / 8)
    assert [lr_factor(k, 2, 10, "linear") for k in (0, 1, 2, 6, 10, 12)] == [0.5, 1.0, 1.0, 0.5, 0.0, 0.0]
    assert lr_factor(6, 2, 10, "linear", 0.2) == pytest.approx(1 - 0.8 * 0.5)
    assert lr_factor(4, 2, 10, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_factor(6, 2, 10, "cosine", 0.1) == pytest.approx(0.1 + 0.9 * 0.5)
    assert lr_factor(10, 2, 10, "cosine", 0.1) == pytest.approx(0.1) and lr_factor(99, 2, 10, "cosine", 0.1) == pytest.approx(0.1)
    assert lr_factor(0, 0, 4, "linear") == 1.0 and lr_factor(3, 0, 4, "linear") == 0.25


def test_lr_scheduler_decays_over_the_runs_optimizer_steps():
    from training.config_io import load_config
    from training.lr_schedule import lr_scheduler, total_optimizer_steps

    cfg = load_config(SMOKE, ["--max_iterations", "5", "--inner_epochs", "2", "--lr_schedule", "linear",
                              "--learning_rate", "0.1"])
    assert total_optimizer_steps(cfg) == 5 * 2 * cfg.optimizer_steps_per_epoch
    assert lr_scheduler(load_config(SMOKE, [])) is None  # constant, no warmup: DeepSpeed's own handling
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    sched = lr_scheduler(cfg)(opt)
    rates = []
    for _ in range(total_optimizer_steps(cfg)):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    n = total_optimizer_steps(cfg)
    assert rates == pytest.approx([0.1 * (1 - k / n) for k in range(n)])


def test_a_resume_trims_every_log_to_its_checkpoint(tmp_path):
    """Crashed after iteration 3, checkpoint at 2: the attempt's rows of iteration 3 (and a torn line) went on
    being counted next to the resumed run's (ineligible counts and rollout tables doubled)."""
    first = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)
    for it in (1, 2, 3):
        first.write_iteration({"iteration": it, "reward_mean": 0.5}, [{
            "ineligible_items": [{"prompt": "p", "reason": "video fault", "ineligible_kind": "none"}],
            "reward_items": [{"rank": 0, "group": 0, "sample": 0, "reward": 0.5}]}])
        first.write_evaluation({"iteration": it, "eval_reward_mean": 0.1 * it},
                               [{"iteration": it, "prompt": 0, "sample": 0, "reward": 0.1}])
    first.close()
    with (tmp_path / "metrics.jsonl").open("a") as fh:
        fh.write('{"iteration": 4, "rew')  # torn by the crash: appending after it would merge two rows
    before = (tmp_path / "rewards.jsonl").read_text()
    assert MetricsLog(tmp_path, enabled=False, tensorboard=False).trim_after(2) == {}  # other ranks: nothing
    resumed = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=True)
    assert resumed.trim_after(3) == {"metrics.jsonl": 1}  # nothing past 3 but the torn line
    assert (tmp_path / "rewards.jsonl").read_text() == before
    assert resumed.trim_after(2) == {name: 1 for name in ("metrics.jsonl", "ineligible.jsonl", "eval.jsonl",
                                                          "rewards.jsonl", "eval_rewards.jsonl")}
    resumed.write_iteration({"iteration": 3, "reward_mean": 0.7}, [])
    for name in ("metrics.jsonl", "ineligible.jsonl", "eval.jsonl", "rewards.jsonl", "eval_rewards.jsonl"):
        rows = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        assert [r["iteration"] for r in rows] == ([1, 2, 3] if name == "metrics.jsonl" else [1, 2]), name
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_resume_purges_the_crashed_attempts_tensorboard_points(tmp_path):
    """Crashed after iteration 4, checkpoint at 2: TensorBoard showed steps 1, 2, 3, 4, 3, 4."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    first = MetricsLog(tmp_path, enabled=True, tensorboard=True, append=False)
    for it in (1, 2, 3, 4):
        first.write_iteration({"iteration": it, "reward_mean": 0.5}, [])
    first.close()
    resumed = MetricsLog(tmp_path, enabled=True, tensorboard=True, append=True)
    resumed.trim_after(2)
    for it in (3, 4):
        resumed.write_iteration({"iteration": it, "reward_mean": 0.9}, [])
    resumed.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    points = [(e.step, round(e.value, 2)) for e in events.Scalars("train/reward_mean")]
    assert points == [(1, 0.5), (2, 0.5), (3, 0.9), (4, 0.9)]


def test_latent_preview_counts_every_channel_also_past_the_last_multiple_of_3():
    """16 latent channels (Wan): channel 15 belongs to red (15 mod 3 = 0) as the docstring formula says; it
    was dropped with every channel past the last multiple of 3."""
    z = torch.zeros(1, 16, 1, 1, 1)
    z[0, 15] = 6.0  # red: channels 0, 3, ..., 15 -> mean 6 / 6 = 1 -> 127.5 (1 + tanh(0.5))
    z[0, 13] = -5.0  # green: channels 1, 4, ..., 13 -> mean -1 -> 127.5 (1 + tanh(-0.5))
    f = latent_preview(z, num_frames=1, height=1, width=1)
    assert f[0, 0, 0, 0].tolist() == [round(127.5 * (1 + math.tanh(0.5))), round(127.5 * (1 + math.tanh(-0.5))), 128]


def test_the_share_of_clipped_advantages_is_logged_over_all_ranks(tmp_path):
    """AdvantageStats.adv_clipped_fraction was computed but never logged: the row holds the clipped share of all
    ranks' updated samples (a_max too small shows as a value near 1), null when no sample was updated."""
    import json

    from training.grpo import advantage_metric_parts, group_advantages
    from training.metrics_log import MetricsLog

    ranks = [group_advantages([0.0, 10.0, None], [0, 0, 1], a_max=0.5, eps=1.0),  # both valid clipped
             group_advantages([0.0, 1.0, 0.0, 1.0], [0, 0, 1, 1], a_max=5.0, eps=0.0)]  # 4 valid, none clipped
    parts = [_part([1.0], **advantage_metric_parts(*r)) for r in ranks]
    assert parts[0]["adv_clipped"] == 2 and parts[0]["advantages"] == pytest.approx([-0.5, 0.5])
    row = summarize(4, parts)
    assert row["adv_clipped_fraction"] == pytest.approx(2 / 6)
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)
    log.write_iteration(row, [])
    log.write_iteration(summarize(5, [_part([None], ineligible_none=1)]), [])
    log.close()
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert logged[0]["adv_clipped_fraction"] == pytest.approx(2 / 6) and logged[1]["adv_clipped_fraction"] is None
