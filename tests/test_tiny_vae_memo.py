"""`policy.vae.tiny_wan_vae` calibrates a seed's responsive decoder once per process: a later build of the same
(seed, z_dim) loads the stored weights and leaves torch's random state where a full build leaves it."""

from __future__ import annotations

import torch

import policy.vae as vae_mod
from policy.vae import tiny_wan_vae


def _fresh(seed: int, z_dim: int = 16):
    vae_mod._RESPONSIVE_DECODERS.clear()
    return tiny_wan_vae(seed, z_dim), torch.get_rng_state()


def test_a_second_build_of_a_seed_skips_the_calibration_and_is_the_same_model(monkeypatch):
    want, want_rng = _fresh(3)
    calls: list[int] = []
    real = vae_mod.init_responsive_decoder
    monkeypatch.setattr(vae_mod, "init_responsive_decoder", lambda *a, **k: calls.append(1) or real(*a, **k))
    torch.manual_seed(1234)  # another random state before the build: the build seeds itself
    got = tiny_wan_vae(3)
    assert calls == []
    assert torch.equal(torch.get_rng_state(), want_rng)
    got_sd, want_sd = got.state_dict(), want.state_dict()
    assert got_sd.keys() == want_sd.keys()
    assert all(torch.equal(got_sd[k], want_sd[k]) for k in want_sd)
    assert not got.training and not any(p.requires_grad for p in got.parameters())


def test_builds_are_separate_models_and_other_seeds_calibrate(monkeypatch):
    a, _ = _fresh(5)
    b = tiny_wan_vae(5)
    with torch.no_grad():
        next(b.decoder.parameters()).add_(1.0)  # a caller changing its copy leaves the next build alone
    c = tiny_wan_vae(5)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), c.state_dict().values(), strict=True))
    calls: list[int] = []
    real = vae_mod.init_responsive_decoder
    monkeypatch.setattr(vae_mod, "init_responsive_decoder", lambda *a, **k: calls.append(1) or real(*a, **k))
    tiny_wan_vae(6)
    tiny_wan_vae(5, z_dim=8)
    assert calls == [1, 1]
