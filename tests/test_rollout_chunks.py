"""A group sampled a few rollouts at a time (`rollout_batch`): policy.rollout.cat_rollouts and the trainer's
sample_group, on tiny random Cosmos / Wan models."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from policy.rollout import RolloutConfig, SDEStepRecord, cat_rollouts, rollout, step_log_prob
from policy.world_model import FlowWorldModel
from tests.launches import run_to_end
from training.config_io import load_config
from training.data import derive_seed

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"
RCFG = RolloutConfig(num_steps=5, sde_window=(1, 4))  # window after an ODE step: prev_x0_hat is recorded


@pytest.fixture(scope="module", params=["cosmos", "wan"])
def setup(request):
    m = FlowWorldModel.tiny_cosmos() if request.param == "cosmos" else FlowWorldModel.tiny_wan()
    m.eval()
    imgs = np.random.default_rng(0).integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
    return m, m.encode_prompts(imgs, ["stack the blocks"], num_frames=9).repeat_interleave(3)


def _slice(record: SDEStepRecord, sl: slice) -> SDEStepRecord:
    return dataclasses.replace(record, x_t=record.x_t[sl], x_next=record.x_next[sl], sigma=record.sigma[sl],
                               sigma_next=record.sigma_next[sl], log_prob=record.log_prob[sl],
                               mask_mean=record.mask_mean[sl],
                               prev_x0_hat=None if record.prev_x0_hat is None else record.prev_x0_hat[sl],
                               binary_mask=None if record.binary_mask is None else record.binary_mask[sl])


def test_cat_rollouts_joins_chunks_in_order_and_stays_on_policy(setup):
    model, cond = setup
    parts = [rollout(model, cond.select(slice(0, 2)), RCFG, generator=torch.Generator().manual_seed(1)),
             rollout(model, cond.select(slice(2, 3)), RCFG, generator=torch.Generator().manual_seed(2))]
    whole = cat_rollouts(parts, cond)
    assert torch.equal(whole.latents, torch.cat([parts[0].latents, parts[1].latents]))
    assert [r.step for r in whole.steps] == [1, 2, 3] and whole.cond is cond
    for k, record in enumerate(whole.steps):
        assert torch.equal(record.x_next[2:], parts[1].steps[k].x_next)
        assert torch.equal(record.log_prob[:2], parts[0].steps[k].log_prob)
        assert (record.binary_mask is None) == (record.prev_x0_hat is None)
        if record.binary_mask is not None:
            assert torch.equal(record.binary_mask[2:], parts[1].steps[k].binary_mask)
        # an update micro-batch across the chunk boundary recomputes the recorded likelihood (ratio 1)
        lp, _, _, _ = step_log_prob(model, cond.select(slice(1, 3)), _slice(record, slice(1, 3)), RCFG)
        assert torch.allclose(torch.exp(lp - record.log_prob[1:3]), torch.ones(2, dtype=torch.float64), atol=1e-4)


def test_cat_rollouts_refuses_parts_that_do_not_fit(setup):
    model, cond = setup
    a = rollout(model, cond.select(slice(0, 2)), RCFG, generator=torch.Generator().manual_seed(1))
    other = rollout(model, cond.select(slice(2, 3)), RolloutConfig(num_steps=5, sde_window=(0, 2)),
                    generator=torch.Generator().manual_seed(2))
    with pytest.raises(ValueError, match="recorded"):
        cat_rollouts([a, other], cond)
    with pytest.raises(ValueError, match="2 samples for a conditioning batch of 3"):
        cat_rollouts([a], cond)
    with pytest.raises(ValueError, match="no rollouts"):
        cat_rollouts([], cond)


@pytest.mark.parametrize("rollout_batch", [None, 3, 4])
def test_a_whole_group_keeps_the_seed_it_always_had(setup, rollout_batch):
    """rollout_batch >= G (or unset) samples exactly as before: one batch, the (seed, it, rank, slot) noise;
    so runs and resumes from before the setting go on drawing the same noise."""
    from training.group_rollout import sample_group

    model, cond = setup
    cfg = load_config(SMOKE, ["--group_size", "3", *(["--rollout_batch", str(rollout_batch)] if rollout_batch else [])])
    rcfg = RolloutConfig(num_steps=5, sde_window=(1, 4))
    got = sample_group(model, cond, rcfg, cfg, torch.device("cpu"), (0, 5, 1, 2))
    want = rollout(model, cond, rcfg, generator=torch.Generator().manual_seed(derive_seed(0, 5, 1, 2)))
    assert torch.equal(got.latents, want.latents)


def test_a_chunked_group_draws_each_chunks_noise_from_its_own_seed(setup):
    from training.group_rollout import sample_group

    model, cond = setup
    cfg = load_config(SMOKE, ["--group_size", "3", "--rollout_batch", "2"])  # chunks of 2 and 1
    got = sample_group(model, cond, RCFG, cfg, torch.device("cpu"), (0, 5, 1, 2))
    for c, sl in enumerate((slice(0, 2), slice(2, 3))):
        part = rollout(model, cond.select(sl), RCFG, generator=torch.Generator().manual_seed(derive_seed(0, 5, 1, 2, c)))
        assert torch.equal(got.latents[sl], part.latents)
        assert all(torch.equal(r.log_prob[sl], p.log_prob) for r, p in zip(got.steps, part.steps, strict=True))
    again = sample_group(model, cond, RCFG, cfg, torch.device("cpu"), (0, 5, 1, 2))
    assert torch.equal(again.latents, got.latents)


def test_rollout_batch_is_validated():
    from training.config import ConfigError

    with pytest.raises(ConfigError, match="rollout_batch must be >= 1"):
        load_config(SMOKE, ["--rollout_batch", "0"])
    assert load_config(SMOKE, ["--rollout_batch", "none"]).rollout_batch is None


@pytest.mark.slow
def test_training_with_a_chunked_group(tmp_path):
    """G = 4 sampled 3 + 1 and updated in micro-batches of 3 + 1: the run trains and logs every rollout."""
    out = tmp_path / "chunked"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--max_iterations", "2", "--checkpoint_every", "2", "--export", "none",
           "--rollout_batch", "3", "--micro_batch", "3"]
    run_to_end(cmd, timeout=600, what="training", env=env)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["eligible_fraction"] == 1.0 for r in rows)
    assert len((out / "rewards.jsonl").read_text().splitlines()) == 16
