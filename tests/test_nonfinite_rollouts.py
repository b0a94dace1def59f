"""A rollout whose latents hold NaN or inf is never scored as a video (policy/vae.py, training/decode.py,
training/reward_runner.py, training/evaluate.py, training/generate.py). It used to decode to black frames
that the reward scored like any other clip. Tiny random real diffusers models; no hub."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from policy.vae import NonFiniteLatentsError, decode_latents, nonfinite_kinds, tiny_wan_vae
from policy.world_model import FlowWorldModel
from tests.launches import launch, run_to_end
from training.config import PromptSpec
from training.config_io import load_config
from training.reward_runner import RewardRunner

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def _latents(seed: int = 0) -> torch.Tensor:
    z = torch.randn(3, 16, 2, 4, 4, generator=torch.Generator().manual_seed(seed))
    z[1, 2, 1, 0, 0] = float("nan")
    z[2, 0, 0, 3, 3] = float("inf")
    return z


def test_decoding_refuses_latents_that_are_not_finite():
    vae = tiny_wan_vae(0)
    z = _latents()
    assert nonfinite_kinds(z) == [None, "nan", "inf"]
    with pytest.raises(NonFiniteLatentsError, match=r"batch rows 1 \(nan\), 2 \(inf\) are not finite") as info:
        decode_latents(vae, z)
    assert info.value.kinds == [None, "nan", "inf"]
    assert decode_latents(vae, z[:1]).shape == (1, 5, 32, 32, 3)  # a finite row still decodes


@pytest.mark.parametrize("decode", ["vae", "preview"])
def test_a_group_decodes_its_finite_rollouts_and_blanks_the_diverged_ones(decode):
    from training.decode import decode_group

    cfg = load_config(SMOKE, ["--decode", decode, "--height", "32", "--width", "32", "--num_frames", "5"])
    model = FlowWorldModel.tiny_wan(seed=0)
    z = _latents()
    frames, kinds = decode_group(model, z, cfg)
    assert kinds == [None, "nan", "inf"] and frames.shape == (3, 5, 32, 32, 3) and frames.dtype == np.uint8
    assert not frames[1:].any() and frames[0].any()
    if decode == "vae":
        assert np.array_equal(frames[0], model.decode(z[:1])[0])


def test_the_reward_never_sees_a_diverged_clip():
    """The reward is called per run of scorable clips, with the run's first_index and group_ids; the diverged
    clips are ineligible of their kind, in the batch's order."""
    calls = []

    def reward(videos, prompts, **meta):
        calls.append((len(videos), list(prompts), meta["first_index"], meta["group_ids"]))
        return [float(v.mean()) for v in videos]

    videos = [np.full((2, 4, 4, 3), k, dtype=np.uint8) for k in range(5)]
    prompts = [f"p{k}" for k in range(5)]
    with RewardRunner(reward, "mean") as runner:
        out = runner.submit(videos, prompts, unscored=[None, "nan", None, None, "inf"], first_index=10,
                            group_ids=[0, 0, 1, 1, 1], iteration=1).result(timeout=60)
        whole = runner.submit(videos[:2], prompts[:2], first_index=3, group_ids=[7, 7]).result(timeout=60)
    assert calls == [(1, ["p0"], 10, [0]), (2, ["p2", "p3"], 12, [1, 1]), (2, ["p0", "p1"], 3, [7, 7])]
    assert out.rewards == [0.0, None, 2.0, 3.0, None]
    assert out.counts["nan"] == 1 and out.counts["inf"] == 1 and out.kinds == [None, "nan", None, None, "inf"]
    assert "rollout diverged: its latents hold NaN" in out.reasons[1] and "inf" in out.reasons[4]
    assert whole.rewards == [0.0, 1.0]


def test_a_diverged_ode_clip_fails_alone_in_its_batch(monkeypatch):
    import training.generate as gen

    model = FlowWorldModel.tiny_wan(seed=0).eval()
    image = np.zeros((1, 32, 32, 3), dtype=np.uint8)
    cond = model.encode_prompts(image, ["x"], num_frames=5)
    real = gen.sample_ode

    def diverging(*args, **kwargs):
        latents = real(*args, **kwargs)
        latents[1] = float("nan")
        return latents

    monkeypatch.setattr(gen, "sample_ode", diverging)
    clips = gen.sample_videos(model, cond, 2, 1.0, [1, 2, 3])
    assert isinstance(clips[1], NonFiniteLatentsError)
    assert all(isinstance(c, np.ndarray) and c.shape == (5, 32, 32, 3) for c in (clips[0], clips[2]))
    monkeypatch.setattr(gen, "sample_ode", lambda *a, **k: real(*a, **k) * float("nan"))
    with pytest.raises(NonFiniteLatentsError):
        gen.sample_video(model, cond, "ode", None, 2, 1.0, seed=2)


def test_a_diverged_held_out_sample_is_ineligible_and_not_scored(monkeypatch):
    import training.evaluate as ev
    from training.models import build_world_model

    cfg = load_config(SMOKE, ["--eval_samples", "2", "--num_steps", "2"])
    model = build_world_model(cfg, "cpu").eval()
    real = ev.ode_latents

    def sample(model, cond, steps, shift, seeds, *args):
        latents = real(model, cond, steps, shift, seeds, *args)
        if seeds == [ev.sample_seed(cfg.seed, 0, 1)]:  # prompt 0, sample 1 diverges: its decode refuses it
            latents[:] = float("nan")
        return latents

    seen = []
    monkeypatch.setattr(ev, "ode_latents", sample)
    part = ev.evaluate(model, cfg, [PromptSpec("open the drawer", image_seed=3)],
                       lambda videos, prompts, **meta: seen.append(len(videos)) or [0.5] * len(videos),
                       iteration=1, rank=0, world=1)
    assert seen == [1] and sorted(part["rewards"], key=str) == [0.5, None]
    item = next(it for it in part["items"] if it["sample"] == 1)
    assert item["reward"] is None and "not finite" in item["reason"] and item["video"] is None
    row = ev.summarize_eval(1, [part])
    assert row["eval_ineligible_count"] == 1 and row["eval_reward_mean"] == 0.5


DIVERGING_RUN = """
import sys
import training.group_rollout as group_rollout
from training.train import main

real = group_rollout.rollout


def diverging(*args, **kwargs):  # the second rollout of every group diverges
    ro = real(*args, **kwargs)
    ro.latents[1] = float("nan")
    for step in ro.steps:  # as a divergence inside the SDE window leaves it: the mask of NaN x0 is NaN
        step.mask_mean[1] = float("nan")
    return ro


group_rollout.rollout = diverging
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # a training subprocess (~30-80 s here), as the other end-to-end runs
def test_a_training_run_keeps_a_diverged_rollout_out_of_its_rewards(tmp_path):
    """The trainer's call site (training/trainer.py step 1): the diverged rollouts are ineligible of kind nan and
    the reward scores the others; with nonfinite_loss: skip the run goes on, with the default (stop) it stops
    at once naming them (a diverged rollout shows no non-finite loss: it is never scored)."""
    import json
    import sys

    out = tmp_path / "run"
    cmd = [sys.executable, "-c", DIVERGING_RUN, "--config", str(SMOKE), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--max_iterations", "1", "--num_steps", "2", "--sde_window", "[0, 1]"]
    proc = launch(cmd, timeout=600, what="training", cwd=SMOKE.parents[2])
    assert proc.returncode == 1 and "the latents of 2 rollout(s) were NaN or inf" in proc.stderr, proc.stderr[-4000:]
    stopped = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])  # written before the stop
    assert stopped["nonfinite_losses"] == 0 and stopped["diverged_rollouts"] == 2  # the row says why it stopped
    out = tmp_path / "skip"
    cmd[cmd.index("--output_dir") + 1] = str(out)
    run_to_end([*cmd, "--nonfinite_loss", "skip"], timeout=600, what="training (nonfinite_loss: skip)")
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert row["ineligible_nan"] == 2 and row["ineligible_count"] == 2  # one per group of 4, two groups
    items = [json.loads(x) for x in (out / "rewards.jsonl").read_text().splitlines()]
    assert [it["reward"] is None for it in items] == [s == 1 for s in (it["sample"] for it in items)]
    why = [json.loads(x) for x in (out / "ineligible.jsonl").read_text().splitlines()]
    assert len(why) == 2 and all("rollout diverged: its latents hold NaN" in w["reason"] for w in why)
    assert [w["ineligible_kind"] for w in why] == ["nan", "nan"]


def _group(latents: torch.Tensor, frames: np.ndarray):
    from types import SimpleNamespace

    from training.update import Group

    return Group(cond=None, rollout=SimpleNamespace(latents=latents), frames=frames, text="x")


def test_diversity_leaves_the_diverged_rollouts_out():
    """D_prompt of a group is over its finite rollouts; a group with fewer than 2 has no value (it used to be
    NaN from the latents, and the frame distance counted the black placeholder)."""
    from evals.diversity import d_prompt, d_prompt_frames
    from training.rollout_log import diversity

    rng = np.random.default_rng(0)
    z = _latents()  # rows 1 (nan) and 2 (inf) diverged
    frames = rng.integers(1, 256, size=(3, 2, 4, 4, 3), dtype=np.uint8)
    frames[1:] = 0  # decode_group's placeholders
    z4 = torch.randn(4, 16, 2, 4, 4, generator=torch.Generator().manual_seed(1))
    z4[2] = float("nan")
    frames4 = rng.integers(0, 256, size=(4, 2, 4, 4, 3), dtype=np.uint8)
    frames4[2] = 0
    kinds = [None, "nan", "inf"] + [None, None, "nan", None]
    out = diversity([_group(z, frames), _group(z4, frames4)], kinds)
    keep = [0, 1, 3]
    assert out["diversity"] == [pytest.approx(d_prompt(z4[keep]))]  # group 0 has one finite rollout: no value
    assert out["diversity_frames"] == [pytest.approx(d_prompt_frames(frames4[keep]))]
    whole = diversity([_group(z4[keep], frames4[keep])], [None] * 3)  # nothing diverged: every rollout counts
    assert whole == {"diversity": out["diversity"], "diversity_frames": out["diversity_frames"]}
    with pytest.raises(ValueError, match="2 diverged flags for 3 rollouts"):
        diversity([_group(z, frames)], [None, None])


@pytest.mark.slow  # a training subprocess (~30-80 s here), as the other end-to-end runs
def test_a_training_run_writes_no_video_and_no_diversity_for_a_diverged_rollout(tmp_path):
    """rollout_videos_every with a diverged rollout per group: its rewards.jsonl row names no video and says
    why (it used to be written as a black mp4), and the diversity metrics come from the finite rollouts (they
    used to be null: the NaN latents made the group's D_prompt NaN)."""
    import json
    import os
    import sys

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    cmd = [sys.executable, "-c", DIVERGING_RUN, "--config", str(SMOKE), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--max_iterations", "1", "--num_steps", "2", "--sde_window", "[0, 1]",
           "--export", "none", "--rollout_videos_every", "1", "--nonfinite_loss", "skip"]
    run_to_end(cmd, timeout=600, what="training", env=env)
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert row["ineligible_nan"] == 2
    assert row["rollout_diversity"] is not None and row["rollout_diversity"] > 0
    # the finite rollouts' mask: sde_window [0, 1] is one first SDE step, where M = r_base (0.3 in smoke.yaml)
    assert row["mask_mean"] == pytest.approx(0.3)
    assert 0 < row["rollout_diversity_frames"] < 1
    items = [json.loads(x) for x in (out / "rewards.jsonl").read_text().splitlines()]
    diverged = [it for it in items if it["sample"] == 1]
    assert len(diverged) == 2 and all(it["reward"] is None and it["video"] is None for it in diverged)
    assert all(it["video_skipped"] == "rollout diverged: its latents hold NaN; no video written" for it in diverged)
    written = [it for it in items if it["sample"] != 1]
    assert all(it["video"] and "video_skipped" not in it for it in written)
    assert sorted(p.name for p in (out / "rollout_videos" / "iter_000001").iterdir()) == sorted(
        Path(it["video"]).name for it in written)


def test_mask_mean_leaves_the_diverged_rollouts_out():
    """The logged mask_mean is the mean of M over the (rollout, SDE step) items of the rollouts that did not
    diverge: a NaN mask of one diverged rollout (a NaN x0 in the SDE window) made the whole iteration's
    mask_mean NaN (null in metrics.jsonl), while the diversity metrics already left such rollouts out."""
    from types import SimpleNamespace

    from training.rollout_log import mask_means
    from training.update import Group

    def group(rows: list[list[float]]) -> Group:  # rows[step][sample]
        steps = [SimpleNamespace(mask_mean=torch.tensor(r, dtype=torch.float32)) for r in rows]
        frames = np.zeros((len(rows[0]), 1, 1, 1, 3), dtype=np.uint8)
        return Group(cond=None, rollout=SimpleNamespace(steps=steps), frames=frames, text="x")

    nan = float("nan")
    groups = [group([[0.5, nan, 0.7], [0.6, nan, 0.8]]), group([[0.4, 0.2, 0.9], [0.3, 0.5, 0.1]])]
    kinds = [None, "nan", None, None, None, None]
    items = mask_means(groups, kinds)
    assert sorted(items) == pytest.approx(sorted([0.5, 0.7, 0.6, 0.8, 0.4, 0.2, 0.9, 0.3, 0.5, 0.1]))
    assert mask_means(groups[1:], [None] * 3) == pytest.approx([0.4, 0.2, 0.9, 0.3, 0.5, 0.1])
    assert mask_means([group([[nan, nan]])], ["nan", "inf"]) == []  # nothing left: the iteration's mean is null
    with pytest.raises(ValueError, match="2 diverged flags for 3 rollouts"):
        mask_means(groups[:1], [None, None])


DIVERGING_IN_WINDOW = """
import sys
import training.group_rollout as group_rollout
from training.train import main

real = group_rollout.rollout


def diverging(*args, **kwargs):  # the second rollout of every group diverges inside the SDE window
    ro = real(*args, **kwargs)
    ro.latents[1] = float("nan")
    for rec in ro.steps:
        rec.x_next[1] = float("nan")
        rec.log_prob[1] = float("nan")
        rec.mask_mean[1] = float("nan")
    for rec in ro.steps[1:]:
        rec.x_t[1] = float("nan")
    return ro


group_rollout.rollout = diverging
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_rollout_that_diverged_inside_the_sde_window_costs_no_update_under_skip(tmp_path):
    """nonfinite_loss: skip, micro_batch 1: each diverged (ineligible) rollout is a micro-batch without a valid
    sample, whose forward for the collectives ran on its NaN record; the NaN reached the gradient, DeepSpeed
    dropped every optimizer step (grad_norm null, nonfinite_losses 4) and the weights never moved. Now the others
    train (training/update.py finite_inputs), and mask_mean leaves the diverged rollouts out."""
    import json
    import os
    import sys

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    cmd = [sys.executable, "-c", DIVERGING_IN_WINDOW, "--config", str(SMOKE), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--max_iterations", "2", "--checkpoint_every", "2", "--export", "none",
           "--micro_batch", "1", "--nonfinite_loss", "skip"]
    run_to_end(cmd, timeout=600, what="training", env=env)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["ineligible_nan"] for r in rows] == [2, 2]
    assert all(r["nonfinite_losses"] == 0 and r["grad_norm"] is not None and r["grad_norm"] > 0 for r in rows)
    assert rows[1]["mu_kl"] > 0  # the first iteration's step moved the policy away from the reference
    assert all(r["mask_mean"] is not None and 0.3 <= r["mask_mean"] <= 1.0 for r in rows)


def test_the_metrics_row_says_how_many_rollouts_diverged():
    """With nonfinite_loss: stop a diverged rollout stops the run, but the row of that iteration showed only
    ``nonfinite_losses: 0`` (a diverged rollout is never scored, so no loss of it is NaN) and ``ineligible_nan``,
    which a reward that returned NaN counts too: nothing in metrics.jsonl said the policy had diverged."""
    from tests.test_train_parts import _part
    from training.metrics import summarize

    row = summarize(1, [_part([1.0, None], ineligible_nan=1, diverged_rollouts=1),
                        _part([None, 0.5], ineligible_nan=1, diverged_rollouts=0)])
    assert row["nonfinite_losses"] == 0 and row["ineligible_nan"] == 2
    assert row["diverged_rollouts"] == 1  # one of the two NaN-ineligible items is a diverged rollout
