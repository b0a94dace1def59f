"""training/update.py's `update_policy` driven directly: one process group of one rank (gloo) and a
stand-in engine that reduces like DeepSpeed (each micro-batch loss divided by gradient_accumulation_steps,
the optimizer step every grad_accum micro-batches). The policy is a linear log-prob in 4 parameters, so
the gradient the loop builds can be compared with the gradient of the objective computed in one go
(tests/test_grpo_weighting.py checks the reduction assumption against a real 2-rank engine)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

from tests.launches import destroy_process_group
from training.config import TrainConfig
from training.grpo import clipped_policy_loss
from training.update import Group, UpdateLog, chunk, take, update_policy

G = 5


@pytest.fixture(scope="module", autouse=True)
def one_rank_group(tmp_path_factory):
    if dist.is_initialized():  # pragma: no cover - another module left one
        yield
        return
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    destroy_process_group()


@dataclass
class Record:
    """Stands in for an SDEStepRecord: features per sample and the old log-prob."""

    x: torch.Tensor
    log_prob: torch.Tensor
    binary_mask: torch.Tensor | None = None
    """The rollout's B; None at a step without mask history (step 0 here), as in SDEStepRecord."""


class Cond:
    def __init__(self, n: int) -> None:
        self.n = n
        # [n, 1, F=2, 1, 1]: frame 0 is a conditioning frame (0), frame 1 generated (1), as Conditioning has
        self.cond_mask = torch.tensor([0.0, 1.0]).view(1, 1, 2, 1, 1).repeat(n, 1, 1, 1, 1)

    def select(self, rows: slice | torch.Tensor) -> Cond:  # a slice or an index tensor, as Conditioning's
        return Cond(len(torch.arange(self.n)[rows]))


class Engine:
    """Reduces like DeepSpeed's engine: backward(loss / grad_accum); an optimizer step every grad_accum."""

    def __init__(self, grad_accum: int) -> None:
        self.theta = torch.ones(4, dtype=torch.float64, requires_grad=True)
        self.grad_accum, self.micro, self.calls = grad_accum, 0, 0
        self.step_grads: list[torch.Tensor] = []
        self.norm: float | None = None
        self.module = SimpleNamespace(world_model=None, train=lambda: None)

    def __call__(self, cond, record, rcfg):  # noqa: ANN001, ANN204 (engine call)
        assert cond.n == record.x.shape[0]
        self.calls += 1
        lp = record.x @ self.theta * 0.1
        return lp, lp[:, None], torch.ones_like(lp)[:, None], _flips(record)

    def backward(self, loss: torch.Tensor) -> None:
        (loss / self.grad_accum).backward()

    def is_gradient_accumulation_boundary(self) -> bool:  # DeepSpeed's: the next step() is an optimizer step
        return (self.micro + 1) % self.grad_accum == 0

    def step(self) -> None:
        self.micro += 1
        if self.micro % self.grad_accum == 0:
            self.step_grads.append(self.theta.grad.clone())
            self.norm = float(self.theta.grad.norm())
            self.theta.grad = None

    def get_global_grad_norm(self) -> float | None:  # DeepSpeed's: the last optimizer step's, None before one
        return self.norm


def _flips(record: Record) -> torch.Tensor:
    """What the stand-in engine reports as each sample's binary-mask flip fraction."""
    return (record.x[:, 0] > 0).float() * 0.5


def _groups(valid_rows: list[list[int]], sde_steps: int, seed: int = 0) -> list[Group]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for row in valid_rows:
        steps = [Record(torch.randn(G, 4, generator=gen, dtype=torch.float64),
                        torch.randn(G, generator=gen, dtype=torch.float64) * 0.1,
                        None if k == 0 else torch.zeros(G, 1, 1, 1, 1, dtype=torch.bool)) for k in range(sde_steps)]
        out.append(Group(cond=Cond(G), rollout=SimpleNamespace(steps=steps), frames=None, text="t",
                         advantages=torch.randn(G, generator=gen, dtype=torch.float64),
                         valid=torch.tensor(row, dtype=torch.bool)))
    return out


def _cfg(micro_batch: int, sde_steps: int, epochs: int = 1, **kw) -> TrainConfig:
    return dataclasses.replace(TrainConfig(), group_size=G, micro_batch=micro_batch, sde_window=(0, sde_steps),
                               inner_epochs=epochs, beta=0.0, clip_range=0.2, **kw)


def _objective_gradient(groups: list[Group]) -> torch.Tensor:
    """Gradient of the mean over every valid (sample, SDE step) item, in one go."""
    theta = torch.ones(4, dtype=torch.float64, requires_grad=True)
    lp, old, adv = [], [], []
    for g in groups:
        for rec in g.rollout.steps:
            lp.append((rec.x @ theta * 0.1)[g.valid])
            old.append(rec.log_prob[g.valid])
            adv.append(g.advantages[g.valid])
    clipped_policy_loss(torch.cat(lp), torch.cat(old), torch.cat(adv), 0.2)[0].backward()
    return theta.grad


@pytest.mark.parametrize("micro_batch", [1, 2, 3, G])
def test_each_optimizer_step_is_the_gradient_of_the_mean_over_valid_items(micro_batch):
    groups = _groups([[1, 1, 0, 1, 1], [0, 1, 1, 0, 1]], sde_steps=2)
    micro = 2 * 2 * math.ceil(G / micro_batch)
    engine = Engine(grad_accum=micro)
    log = update_policy(engine, groups, _cfg(micro_batch, 2, epochs=2), rcfg=None, reference=None, iteration=3,
                        grad_accum=micro, device=torch.device("cpu"))
    want = _objective_gradient(groups)
    assert len(engine.step_grads) == 2  # one optimizer step per epoch
    for got in engine.step_grads:  # the stand-in engine does not move theta, so both epochs agree
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-15)
    assert engine.calls == 2 * micro  # every micro-batch ran, with or without a valid sample
    assert sum(log.item_counts) == 2 * 2 * 7  # epochs x SDE steps x valid samples
    assert len(log.losses) == len(log.clip_fracs) == len(log.approx_kls) == len(log.item_counts)
    assert len(log.mask_flips) == len(log.mask_flip_counts) and sum(log.mask_flip_counts) == 2 * 1 * 7  # step 1 only
    assert log.mu_kls == [] and not log.skipped
    assert log.grad_norms == pytest.approx([float(g.norm()) for g in engine.step_grads])  # one per optimizer step


def test_mask_flips_are_logged_as_means_over_valid_samples():
    groups = _groups([[1, 0, 1, 1, 0]], sde_steps=2)
    engine = Engine(grad_accum=2)  # 1 group x 2 SDE steps x 1 micro-batch of G
    log = update_policy(engine, groups, _cfg(G, 2), rcfg=None, reference=None, iteration=0, grad_accum=2,
                        device=torch.device("cpu"))
    valid = groups[0].valid
    # only the step with a B: step 0 (no mask history) cannot flip and would halve the logged rate
    want = [float(_flips(groups[0].rollout.steps[1])[valid].mean())]
    assert log.mask_flips == pytest.approx(want) and log.mask_flip_counts == [3] and log.item_counts == [3, 3]


def test_grad_norms_are_read_after_each_optimizer_step_only():
    groups = _groups([[1] * G, [1, 0, 1, 0, 1]], sde_steps=2)
    engine = Engine(grad_accum=4)  # 2 groups x 2 SDE steps x 2 micro-batches = 8 micro-batches: 2 steps
    log = update_policy(engine, groups, _cfg(3, 2), rcfg=None, reference=None, iteration=1, grad_accum=4,
                        device=torch.device("cpu"))
    assert len(engine.step_grads) == 2 and len(log.grad_norms) == 2
    assert log.grad_norms == pytest.approx([float(g.norm()) for g in engine.step_grads])
    assert log.grad_norms[0] != log.grad_norms[1]  # each its own step's, not the last one read twice


def test_nothing_valid_skips_the_phase():
    groups = _groups([[0] * G, [0] * G], sde_steps=1)
    engine = Engine(grad_accum=2)
    log = update_policy(engine, groups, _cfg(G, 1), rcfg=None, reference=None, iteration=0, grad_accum=2,
                        device=torch.device("cpu"))
    assert log == UpdateLog(skipped=True)
    assert engine.calls == 0


def test_order_is_seeded_by_iteration():
    def order(iteration: int) -> list[tuple]:
        seen = []

        class Spy(Engine):
            def __call__(self, cond, record, rcfg):  # noqa: ANN001, ANN204
                seen.append(float(record.x[0, 0]))
                return super().__call__(cond, record, rcfg)

        groups = _groups([[1] * G, [1] * G], sde_steps=2)
        update_policy(Spy(8), groups, _cfg(3, 2), rcfg=None, reference=None, iteration=iteration, grad_accum=8,
                      device=torch.device("cpu"))
        return seen

    assert order(1) == order(1)
    assert order(1) != order(2)


def test_chunk_and_take():
    assert [chunk(c, 2, G) for c in range(3)] == [slice(0, 2), slice(2, 4), slice(4, 5)]
    rec = Record(torch.arange(10.0).reshape(G, 2), torch.arange(float(G)))
    part = take(rec, slice(1, 3), G)
    assert part.x.tolist() == [[2.0, 3.0], [4.0, 5.0]] and part.log_prob.tolist() == [1.0, 2.0]
    assert rec.x.shape == (G, 2)  # a copy


# mu-KL inside the update (beta > 0, the default): the stand-in policy's transition mean has a conditioning
# frame (equal to the reference's there, std 0, as in policy.dyndiff) and one generated element whose mean
# is x @ theta * 0.3; the reference's mean there is x @ 1 * 0.2 with std 0.5.
BETA, REF_STD = 0.5, 0.5


def _policy_mean(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """[n, 1, 2, 1, 1]: frame 0 (conditioning) = 1.0, frame 1 (generated) = x @ theta * 0.3."""
    gen = (x @ theta * 0.3).view(-1, 1, 1, 1, 1)
    return torch.cat([torch.ones_like(gen), gen], dim=2)


def _reference(cond, record, rcfg):  # noqa: ANN001, ANN202 (the frozen-copy reference's call)
    ref_mean = _policy_mean(record.x, torch.full((4,), 2.0 / 3.0, dtype=torch.float64))  # x @ 1 * 0.2
    ref_std = torch.tensor([0.0, REF_STD], dtype=torch.float64).view(1, 1, 2, 1, 1).expand_as(ref_mean)
    return None, ref_mean, ref_std, None


class KLEngine(Engine):
    def __call__(self, cond, record, rcfg):  # noqa: ANN001, ANN204 (engine call)
        lp, _, std, flips = super().__call__(cond, record, rcfg)
        return lp, _policy_mean(record.x, self.theta), std, flips


@pytest.mark.parametrize("micro_batch", [2, G])
def test_mu_kl_enters_the_step_with_beta_over_the_generated_frames(micro_batch):
    """Hand-written objective: (1/N) sum over the N valid (sample, SDE step) items of
    clipped_i + BETA * ((mu_i - mu_ref_i) / (REF_STD + eps))^2, mu_i the item's one generated element
    (the conditioning frame is excluded: counted, it halved every item's mu-KL)."""
    groups = _groups([[1, 1, 0, 1, 1], [0, 1, 1, 0, 1]], sde_steps=2)
    cfg = dataclasses.replace(_cfg(micro_batch, 2), beta=BETA)
    micro = 2 * 2 * math.ceil(G / micro_batch)
    engine = KLEngine(grad_accum=micro)
    log = update_policy(engine, groups, cfg, rcfg=None, reference=_reference, iteration=0, grad_accum=micro,
                        device=torch.device("cpu"))
    theta = torch.ones(4, dtype=torch.float64, requires_grad=True)
    pol, kl, kl_values = [], [], []
    for g in groups:
        for rec in g.rollout.steps:
            x, old, adv = rec.x[g.valid], rec.log_prob[g.valid], g.advantages[g.valid]
            pol.append(clipped_policy_loss(x @ theta * 0.1, old, adv, 0.2)[0] * len(x))
            d = (x @ theta * 0.3 - x.sum(1) * 0.2) / (REF_STD + cfg.mu_kl_eps)
            kl.append((d ** 2).sum())
            kl_values.extend((d.detach() ** 2).tolist())
    n = sum(int(g.valid.sum()) for g in groups) * 2  # valid samples x SDE steps = 14 items
    ((sum(pol) + BETA * sum(kl)) / n).backward()
    assert len(engine.step_grads) == 1
    assert torch.allclose(engine.step_grads[0], theta.grad, rtol=1e-12, atol=1e-15)
    # the logged mu-KL (per micro-batch mean, weighted by item counts) is the mean over the items
    assert len(log.mu_kls) == len(log.item_counts)
    logged = sum(v * c for v, c in zip(log.mu_kls, log.item_counts, strict=True)) / sum(log.item_counts)
    assert logged == pytest.approx(sum(kl_values) / n, rel=1e-12)


def test_the_log_ratio_clamp_is_the_configs_max_log_ratio():
    """max_log_ratio was fixed at clipped_policy_loss's default (20): a run could not tighten or widen the clamp
    on log rho. Old log-probs 10 nats below the policy's: a bound of 2 caps rho at e^2, the default does not."""
    losses = {}
    for bound in (2.0, 20.0):
        groups = _groups([[1] * G], sde_steps=1)
        groups[0].rollout.steps[0].log_prob -= 10.0
        groups[0].advantages = groups[0].advantages.abs()  # A > 0: the min takes the clipped branch, rho capped
        groups[0].advantages[0] = -1.0  # A < 0 with rho far above 1 + delta: the unclipped rho, which the bound sets
        log = update_policy(Engine(1), groups, _cfg(G, 1, max_log_ratio=bound), rcfg=None, reference=None,
                            iteration=0, grad_accum=1, device=torch.device("cpu"))
        rec, adv = groups[0].rollout.steps[0], groups[0].advantages
        want = clipped_policy_loss(rec.x @ torch.ones(4, dtype=torch.float64) * 0.1, rec.log_prob, adv, 0.2,
                                   max_log_ratio=bound)[0]
        losses[bound] = log.losses[0]
        assert log.losses[0] == pytest.approx(float(want), rel=1e-12)
    assert losses[2.0] != pytest.approx(losses[20.0])
