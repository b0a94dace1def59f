"""The precision of what a rollout records for the update (policy/rollout.py, "Latent precision"), on tiny random
Cosmos / Wan transformers in the bf16 numerics of a bf16 DeepSpeed engine (training.numerics.cast_like_engine).

The states x_t, x_next and prev_x0_hat stay float32 whatever the model's dtype: the transformer sees a bf16 copy
of its input, but the Gaussian of a step is evaluated on the float32 states. Stored in bf16 (half the memory),
the recorded x_next would no longer be the sample the log-prob was taken of: the update's ratio at unchanged
parameters would be off by up to ~17 nats on these tiny latents (a few hundred elements; a real latent has
millions), where it must be exactly 1.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from policy.rollout import RolloutConfig, rollout, step_log_prob
from policy.world_model import FlowWorldModel
from training.numerics import cast_like_engine
from training.update import chunk, take

G = 5
RCFG = RolloutConfig(num_steps=5, sde_window=(1, 4))  # steps 2 and 3 record prev_x0_hat (the window's first: none)


@pytest.fixture(scope="module", params=["cosmos", "wan"])
def bf16_rollout(request):
    torch.manual_seed(0)
    model = FlowWorldModel.tiny_cosmos() if request.param == "cosmos" else FlowWorldModel.tiny_wan()
    cast_like_engine(model.transformer, "bfloat16")
    model.eval()
    images = np.random.default_rng(0).integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
    with torch.no_grad():
        cond = model.encode_prompts(images, ["open the drawer"], num_frames=9).repeat_interleave(G)
        out = rollout(model, cond, RCFG, generator=torch.Generator().manual_seed(3))
    return model, cond, out


def test_a_bf16_model_records_float32_states(bf16_rollout):
    model, _, out = bf16_rollout
    assert model.transformer.dtype == torch.bfloat16
    assert out.latents.dtype == torch.float32
    for record in out.steps:
        assert record.x_t.dtype == record.x_next.dtype == torch.float32
        assert record.log_prob.dtype == torch.float64
    assert [r.prev_x0_hat.dtype for r in out.steps if r.prev_x0_hat is not None] == [torch.float32] * 2


@pytest.mark.parametrize("micro_batch", [1, 2, G])
def test_the_update_recomputes_the_recorded_log_prob_exactly_in_bf16(bf16_rollout, micro_batch):
    """At unchanged parameters every ratio is exactly 1, for any micro-batch split of the group (2: a short
    last one), as the update takes them (training.update.chunk / take)."""
    model, cond, out = bf16_rollout
    with torch.no_grad():
        for record in out.steps:
            for c in range(-(-G // micro_batch)):
                sl = chunk(c, micro_batch, G)
                log_prob, *_ = step_log_prob(model, cond.select(sl), take(record, sl, G), RCFG)
                assert torch.equal(log_prob, record.log_prob[sl]), (record.step, micro_batch)


def test_bf16_stored_states_would_move_the_log_prob(bf16_rollout):
    """Why the states are not stored in the model's dtype: rounding them to bf16 moves the recomputed log-prob
    off the recorded one (the update would see ratios != 1 at unchanged parameters)."""
    model, cond, out = bf16_rollout

    def bf16(t):
        return None if t is None else t.to(torch.bfloat16).float()

    worst = 0.0
    with torch.no_grad():
        for record in out.steps:
            rounded = dataclasses.replace(record, x_t=bf16(record.x_t), x_next=bf16(record.x_next),
                                          prev_x0_hat=bf16(record.prev_x0_hat))
            log_prob, *_ = step_log_prob(model, cond, rounded, RCFG)
            worst = max(worst, float((log_prob - record.log_prob).abs().max()))
    assert worst > 0.01  # nats; on a real latent (millions of elements) the ratios would hit the clip
