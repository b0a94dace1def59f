"""`text_encoder: offload` (training/models.py): the text encoder waits in host memory and is moved to the
device only while prompts are encoded; the features, and so the run, are the same as with it resident.
On CPU both places are one device, so a recording encoder checks where it was sent and when."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from policy.world_model import FlowWorldModel
from tests.launches import run_to_end
from training.config import PromptSpec
from training.config_io import load_config
from training.evaluate import evaluate
from training.models import build_world_model, text_encoder_on
from training.rewards import build_reward

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"
HELD_OUT = [PromptSpec("open the drawer", image_seed=12), PromptSpec("stack the blocks", image_seed=13)]


class Recording:
    """A text encoder that records its moves and encodes, in order."""

    def __init__(self, inner, log: list) -> None:
        self.inner, self.log = inner, log

    def to(self, device=None, dtype=None):  # noqa: ANN001, ANN201 (TextEncoder protocol)
        self.log.append(f"to {device}")
        return self

    def encode(self, texts, *, device, dtype):  # noqa: ANN001, ANN201
        self.log.append("encode")
        return self.inner.encode(texts, device=device, dtype=dtype)


def _model(monkeypatch, log: list) -> None:
    real = FlowWorldModel.tiny_cosmos

    def tiny(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        model = real(*args, **kwargs)
        model._frozen["text_encoder"] = Recording(model.text_encoder, log)
        return model

    monkeypatch.setattr(FlowWorldModel, "tiny_cosmos", staticmethod(tiny))


def test_text_encoder_on_moves_it_in_for_the_block_and_out_after_it(monkeypatch):
    log: list = []
    _model(monkeypatch, log)
    cfg = load_config(SMOKE, ["--text_encoder", "offload"])
    model = build_world_model(cfg, "cpu")
    assert log == []  # the build leaves it in host memory (FlowWorldModel.to would have moved it)
    with text_encoder_on(model, cfg, "cpu"):
        model.text_encoder.encode(["a"], device="cpu", dtype=None)
    with pytest.raises(RuntimeError, match="boom"), text_encoder_on(model, cfg, "cpu"):
        raise RuntimeError("boom")
    assert log == ["to cpu", "encode", "to cpu", "to cpu", "to cpu"]  # in, encode, out; in, out on error
    log.clear()
    resident = load_config(SMOKE, [])
    assert resident.text_encoder == "resident"
    model = build_world_model(resident, "cpu")
    with text_encoder_on(model, resident, "cpu"):
        pass
    assert log == ["to cpu"]  # built onto the device with the model, then never moved


def test_held_out_prompts_are_encoded_in_one_visit_with_the_same_rewards(monkeypatch):
    log: list = []
    _model(monkeypatch, log)
    rewards = {}
    for mode in ("resident", "offload"):
        cfg = load_config(SMOKE, ["--eval_samples", "2", "--num_steps", "3", "--text_encoder", mode])
        model = build_world_model(cfg, "cpu").eval()
        log.clear()
        rewards[mode] = evaluate(model, cfg, HELD_OUT, build_reward(cfg.reward or "", cfg.reward_options),
                                 iteration=0, rank=0, world=1)["rewards"]
        moves = [entry for entry in log if entry != "encode"]
        assert log.count("encode") == 2 and moves == ([] if mode == "resident" else ["to cpu", "to cpu"])
    assert rewards["offload"] == rewards["resident"] and len(rewards["resident"]) == 4


def test_an_unknown_placement_is_refused():
    from training.config import ConfigError

    with pytest.raises(ConfigError, match="text_encoder"):
        load_config(SMOKE, ["--text_encoder", "gpu"])


@pytest.mark.slow
def test_training_with_the_text_encoder_offloaded_matches_resident(tmp_path):
    """Two iterations each way (one process): the same rewards and losses, so the rollout prompts were
    encoded to the same features before sampling."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    rows = {}
    for mode in ("resident", "offload"):
        out = tmp_path / mode
        cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out),
               "--progress", "false", "--tensorboard", "false", "--max_iterations", "2", "--checkpoint_every", "2",
               "--export", "none", "--text_encoder", mode]
        run_to_end(cmd, timeout=600, what="training", env=env)
        rows[mode] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for a, b in zip(rows["resident"], rows["offload"], strict=True):
        assert (a["reward_mean"], a["loss"]) == (b["reward_mean"], b["loss"])
