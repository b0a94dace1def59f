"""Held-out evaluation during training (``eval_every``): is the policy improving on prompts it never
trains on, as the run's own reward sees it?

Before the first iteration (a fresh run's baseline, iteration 0), every ``eval_every`` iterations and
after the last, each rank samples its share of the (held-out prompt, sample) items with the
deterministic ODE sampler (``training.generate.sample_video``), the run's reward scores them, and
rank 0 appends one row to ``OUTPUT_DIR/eval.jsonl`` (TensorBoard ``eval/*``)::

    iteration, eval_reward_mean, eval_reward_std (population), eval_eligible_fraction,
    eval_ineligible_count (and by kind, eval_ineligible_none|nan|inf|error, as metrics.jsonl: an outage is
    not the agent's verdict), eval_outages, eval_complete (see below), eval_videos, seconds_eval, and eval_reward_<name>_mean for each component
    of a reward that reports them (training/metrics.py; the agent's T, P, V, failure, unverifiable)

and one line per sample to ``OUTPUT_DIR/eval_rewards.jsonl`` (``summarize_items``), ordered by prompt and
sample: iteration, prompt (index), sample, text, reward (null when ineligible), reason, ineligible_kind (an
ineligible one's, as rewards.jsonl), run_id (the
agent's trace), video and, when the reward reports them, components. With ``eval_videos: save`` each
rank writes the samples it scored to ``OUTPUT_DIR/eval_videos/iter_NNNNNN/pPPP_sSS.mp4`` (``video`` is
that path relative to OUTPUT_DIR, else null; training/videos.py).

Decisions where the issue was silent:

* Item (prompt p, sample s) always starts from the noise seeded by ``sample_seed(seed, p, s)``
  (training/data.py), at every evaluation and on any number of ranks, so the curve moves only with the
  policy. It is the seed ``python -m training.generate --seed SEED`` uses, so the last row can be
  reproduced from the exported policy, and a stream apart from the rollouts' seeds: the seed it replaced,
  ``derive_seed(seed, p, s)``, was that of the rollouts of prompt slot 0 on rank s in iteration p, so held-out
  items started from noise the policy had been trained on. ``eval_key`` names the derivation, so rows of
  the earlier one (a run resumed across the change) are not compared with its own.
* The reward is called as in training, through a `training.reward_runner.RewardRunner` bounded by
  ``reward_timeout_s``: a held-out reward call that hangs makes that rank's samples ineligible with the
  reason, instead of hanging the run (it used to be called directly, without a limit).
* Items are dealt round-robin to ranks; a rank with fewer items samples its last item again and
  discards it, so every rank runs the same number of transformer forwards (ZeRO-3 gathers
  parameters collectively in each forward).
* Evaluation draws no global random numbers, so it changes nothing in training: a run with
  ``eval_every`` ends with the same weights as one without (tests/test_train_e2e.py).
* Ineligible rewards are counted, never averaged in; with none eligible the mean is NaN (logged null).
  A sample whose latents are not finite (a diverged policy: `policy.vae.NonFiniteLatentsError`) is
  ineligible with that reason and no video; it is neither decoded nor scored (it used to decode to black
  frames that the reward scored, or, now that decoding refuses it, would have stopped the run).
* A held-out prompt whose image cannot be read (gone since the launch check) no longer stops the run: its
  samples are ineligible (kind ``error``) with a reason naming the prompt's line and image, and are neither
  scored nor saved; they are still sampled, from a stand-in frame (training/prompt_failures.py), so every rank
  runs the same forwards.
* An evaluation in which an outage took some rewards (kind ``error`` from the reward: the reward service or the
  agent's machinery down, a reward call past ``reward_timeout_s``) is incomplete: ``eval_outages`` counts them and
  ``eval_complete`` is false. Its ``eval_reward_mean`` is still written (what the samples that were scored
  scored), but it averages an accidental subset of the held-out set, so it is never chosen as the best checkpoint
  and counts neither way for ``eval_patience`` (`training.best.counted_mean`), as a mean of nothing does not;
  it used to be taken like any other. The stand-ins of a prompt whose image cannot be read count in
  ``eval_ineligible_error`` but not in ``eval_outages``: that prompt is gone from every later evaluation too, and
  a rerun would not bring it back, so the means stay comparable among themselves (their reasons name the prompt).
* Any other exception (a decode error, a reward that answers with the wrong number of rewards, the agent's
  trace store) stops the run on every rank, naming the rank and the error (training/rank_failures.py; the
  trainer's ``held_out``). A sample whose decode raises does not stop the rank's sampling at once: its other
  items are still sampled and the first exception is raised after them, so its transformer forwards stay in
  step with the other ranks' (ZeRO-3) until the ranks agree. A transformer forward that raises (out of memory,
  say) leaves its rank's forwards out of step with the others' from there on: under ZeRO-3 each forward gathers
  parameters from every rank, so that rank ends alone, as a failure in the rollouts' forwards does
  (training/rank_failures.py ``Tried(exit_alone=...)``: one line naming the rank and the error, the run's files
  closed, the other ranks stopping on its closed connections). It used to skip that sample and sample on, its
  gathers paired with the other ranks' gathers of other parameters, then wait in the gather of the ranks'
  results while they were still in their parameter gathers (a hang until the collective timeout, naming no
  error). Without ZeRO-3 it is agreed in that gather, as before. The prompts are encoded first (`encode_share`: the
  text and image encoders and the VAE are no part of the module ZeRO partitions, so nothing there gathers)
  and the ranks agree on a failure there before the first transformer forward, in one more collective per
  evaluation: a rank whose encode raised used to skip all its forwards, waiting in the gather of the ranks'
  results while the others gathered parameters in their first forward (gloo: a collective mismatch that
  aborted the processes, or a hang), instead of every rank stopping with the error.
* Videos are written by training/videos.py (a file that cannot be written: one line on stderr,
  ``video: null``, the rewards still count), before the reward is called, so they exist even when the
  reward fails.
* TensorBoard gets no videos (its ``add_video`` needs moviepy); W&B gets the files rank 0 can read
  (training/wandb_log.py), which on one node or a shared filesystem is all of them. W&B is sent the row and
  videos after eval.jsonl and eval_rewards.jsonl are written; W&B alone failing is handed back to the trainer,
  which saves the iteration's checkpoint, then stops (training/checkpointing.py).
* Every row (eval.jsonl and eval_rewards.jsonl) carries ``eval_key`` (`eval_key`): a short hash of what the
  evaluation measures, i.e. the reward and its options, the held-out prompts' content (text, image path,
  image_seed, meta), eval_samples, seed and the sampler (num_steps, shift, guidance_scale, the negative
  prompt when guidance uses it, height, width, num_frames, fps, image_fit). A resume may change any of them (only a warning); held-out
  means are compared only among rows of one key (training/best.py). Not in the key: the policy (that is
  what is measured), the content of an image file behind an unchanged path, and the model behind an agent
  reward (environment settings; training/provenance.py notes a change of it).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from policy.vae import NonFiniteLatentsError
from policy.world_model import FlowWorldModel
from training.config import PromptSpec, TrainConfig
from training.data import SAMPLE_NOISE, sample_seed
from training.generate import decode_each, ode_latents
from training.metrics import component_means, gather
from training.metrics_log import MetricsLog
from training.models import encode_frames, negative_prompt
from training.prompt_failures import PromptFailure, first_frames
from training.rank_failures import RankFailure, Tried, agree, attempt, first_failure, stop_on
from training.reward_outcome import KINDS
from training.reward_runner import RewardRunner
from training.sampler_shift import sampling_shift
from training.videos import eval_video_name, write_samples

EVAL_KEY_SETTINGS = ("reward", "reward_options", "eval_samples", "seed", "num_steps", "shift", "guidance_scale",
                     "height", "width", "num_frames", "fps", "image_fit")
"""The TrainConfig settings that change what a held-out evaluation measures (besides its prompts and the
negative prompt, which counts only with guidance: `training.models.negative_prompt`)."""


def eval_key(cfg: TrainConfig, prompts: Sequence[PromptSpec]) -> str:
    """A 12-hex-digit hash of what an evaluation of ``cfg`` on ``prompts`` measures (`EVAL_KEY_SETTINGS` and
    the prompts' content, module docstring): equal keys, comparable held-out means; pure."""
    what = {"settings": {name: getattr(cfg, name) for name in EVAL_KEY_SETTINGS},
            "negative_prompt": negative_prompt(cfg), "prompts": [asdict(p) for p in prompts], "noise": SAMPLE_NOISE}
    text = json.dumps(what, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def rank_items(n_items: int, rank: int, world: int) -> list[tuple[int, bool]]:
    """(item index, counts) pairs this rank samples: items rank, rank + world, ... and, when it has fewer
    than ceil(n_items / world), its last item again (or item 0) with counts=False."""
    share = list(range(rank, n_items, world))
    length = -(-n_items // world)
    filler = share[-1] if share else 0
    return [(i, True) for i in share] + [(filler, False)] * (length - len(share))


def rank_work(n_prompts: int, cfg: TrainConfig, rank: int, world: int) -> list[tuple[tuple[int, int], bool]]:
    """((prompt, sample), counts) per item this rank samples (`rank_items` over every prompt's samples); pure."""
    items = [(p, s) for p in range(n_prompts) for s in range(cfg.eval_samples)]
    return [(items[index], counts) for index, counts in rank_items(len(items), rank, world)]


def encode_share(world_model: FlowWorldModel, cfg: TrainConfig, prompts: Sequence[PromptSpec], *, iteration: int,
                 rank: int, world: int, places: Sequence[str] | None = None
                 ) -> tuple[dict[int, Any], dict[int, PromptFailure]]:
    """The conditioning of each prompt this rank samples, by prompt index, and the failures of those whose image
    could not be read (encoded from a stand-in frame: training/prompt_failures.py). No transformer forward."""
    mine_p = sorted({p for (p, _), _ in rank_work(len(prompts), cfg, rank, world)})
    frames0, failures = first_frames([prompts[p] for p in mine_p],
                                     [places[p] if places is not None else f"eval_dataset[{p}]" for p in mine_p],
                                     cfg, iteration, rank)
    conds = encode_frames(world_model, cfg, frames0, [prompts[p].text for p in mine_p],
                          next(world_model.transformer.parameters()).device)
    return dict(zip(mine_p, conds, strict=True)), {p: f for p, f in zip(mine_p, failures, strict=True) if f is not None}


def evaluate(world_model: FlowWorldModel, cfg: TrainConfig, prompts: Sequence[PromptSpec], reward_fn: Any,
             *, iteration: int, rank: int, world: int, places: Sequence[str] | None = None,
             encoded: tuple[dict[int, Any], dict[int, PromptFailure]] | None = None,
             forwards_done: Callable[[], None] | None = None) -> dict[str, Any]:
    """This rank's part of one evaluation: {"rewards": [...], "seconds": float, "items": [...]} (rewards None
    when ineligible; items: one dict per reward, for `summarize_items`). ``places``: where each prompt was given
    (`training.data.load_placed_prompts`), named when its image cannot be read. ``encoded``: `encode_share`'s
    answer when the caller encoded the prompts (`evaluate_everywhere`); else they are encoded here.
    ``forwards_done()`` is called once the rank's last transformer forward ran (`training.rank_failures.Tried`);
    an exception of a forward passes through at once (module docstring)."""
    t0 = time.perf_counter()
    shift = sampling_shift(cfg)  # the trainer's cfg holds the resolved number
    videos, texts, groups = [], [], []
    mine: list[dict[str, Any]] = []
    diverged: list[dict[str, Any]] = []
    broken: Exception | None = None  # the first sample that failed (module docstring)
    conds, failed = encoded or encode_share(world_model, cfg, prompts, iteration=iteration, rank=rank, world=world,
                                            places=places)
    with torch.no_grad():
        for (p, s), counts in rank_work(len(prompts), cfg, rank, world):
            # a failed prompt's stand-in too: every rank runs the same forwards (ZeRO-3); one that raises passes
            # through, as its rank's forwards are out of step with the others' from there (module docstring)
            latents = ode_latents(world_model, conds[p], cfg.num_steps, shift, [sample_seed(cfg.seed, p, s)],
                                  cfg.guidance_scale)
            try:
                frames = decode_each(world_model, latents)[0]
                if isinstance(frames, NonFiniteLatentsError):
                    raise frames
            except NonFiniteLatentsError as exc:  # a diverged sample: ineligible, never decoded or scored
                if counts:
                    kind = next((k for k in exc.kinds if k), "nan")
                    diverged.append({"prompt": p, "sample": s, "text": prompts[p].text, "video": None, "reward": None,
                                     "reason": f"not scored: {exc}", "run_id": None, "ineligible_kind": kind})
                continue
            except Exception as exc:  # a decode error, say: raised once the rank's forwards are done (ZeRO-3)
                broken = broken or exc
                continue
            if p in failed:
                if counts:
                    diverged.append({"prompt": p, "sample": s, "text": prompts[p].text, "video": None, "reward": None,
                                     "reason": failed[p].reason, "run_id": None, "ineligible_kind": "error",
                                     "stand_in": True})  # no outage (`outages`); not written to the logs
                continue
            if counts:
                videos.append(frames)
                texts.append(prompts[p].text)
                groups.append(p)
                mine.append({"prompt": p, "sample": s, "text": prompts[p].text, "video": None})
    if forwards_done is not None:
        forwards_done()
    if broken is not None:
        raise broken
    if cfg.eval_videos == "save":  # before the reward: the files exist even when the reward fails
        names = write_samples(cfg.output_dir, [(eval_video_name(iteration, it["prompt"], it["sample"]), frames)
                                               for it, frames in zip(mine, videos, strict=True)],
                              cfg.fps, f"iteration {iteration}'s held-out videos")
        for item, name in zip(mine, names, strict=True):
            item["video"] = name
    rewards: list[float | None] = []
    components: dict[str, list[float | None]] = {}
    if videos:
        # through a RewardRunner, so a hung reward ends ineligible after reward_timeout_s as in training
        with RewardRunner(reward_fn, cfg.reward or "", timeout_s=cfg.reward_timeout_s) as runner:
            outcome = runner.submit(videos, texts, iteration=iteration, fps=cfg.fps, group_ids=groups, rank=rank,
                                    phase="eval").result()
        rewards, components = outcome.rewards, outcome.components
        for k, item in enumerate(mine):
            item.update(reward=outcome.rewards[k], reason=outcome.reasons[k], run_id=outcome.run_id(k))
            if outcome.rewards[k] is None:  # as rewards.jsonl (training/rollout_log.py)
                item["ineligible_kind"] = outcome.kind(k) or "none"
            if components:
                item["components"] = {name: values[k] for name, values in components.items()}
    mine += diverged
    rewards += [None] * len(diverged)
    return {"rewards": rewards, "seconds": time.perf_counter() - t0, "items": mine, "components": components}


def evaluate_everywhere(world_model: FlowWorldModel, cfg: TrainConfig, prompts: Sequence[PromptSpec], reward_fn: Any,
                        log: MetricsLog, ckpt_dir: Path, *, iteration: int, rank: int, world: int,
                        places: Sequence[str] | None, key: str | None, close: Callable[[int], None],
                        partitioned: bool = False) -> tuple[dict[str, Any], RankFailure | None]:
    """One held-out evaluation (collective: call on every rank): each rank's `evaluate`, gathered; rank 0
    writes eval.jsonl and eval_rewards.jsonl, then W&B. Returns the eval.jsonl row and rank 0's W&B failure
    (files written: the caller saves the iteration's checkpoint, then stops on it, training/checkpointing.py), the
    same on every rank. A failure on any rank, of its part or of rank 0's files, raises
    `training.rank_failures.RankFailed` on every rank, after ``close()`` (what the run opened), with one rank too. ``partitioned`` (ZeRO-3, several ranks): a failure
    of a transformer forward ends its rank alone (``Tried(exit_alone=close)``; module docstring)."""
    encoded, failure = attempt(rank, "encoding the held-out prompts", lambda: encode_share(
        world_model, cfg, prompts, iteration=iteration, rank=rank, world=world, places=places))
    # agreed before any transformer forward (module docstring): under ZeRO-3 each gathers from every rank
    stop_on([agree(failure)], iteration, ckpt_dir, close)
    what = "the held-out evaluation"
    part = None
    with Tried(rank, world, what, exit_alone=close if partitioned else None) as tried:  # as the rollouts
        part = evaluate(world_model, cfg, prompts, reward_fn, iteration=iteration, rank=rank, world=world,
                        places=places, encoded=encoded, forwards_done=lambda: tried.forwards_done(what))
    # the ranks' parts carry the agreement on a failure
    gathered = gather({"part": part, "failure": tried.failure})
    stop_on([g["failure"] for g in gathered], iteration, ckpt_dir, close)
    parts = [g["part"] for g in gathered]

    def record() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        row = summarize_eval(iteration, parts, key)  # the same on every rank (all parts gathered)
        items = summarize_items(iteration, parts, key)
        log.write_evaluation(row, items)
        return row, items

    written, failure = attempt(rank, "writing the held-out evaluation's logs", record)
    unsynced = None if written is None else \
        attempt(rank, "logging the held-out evaluation to W&B", log.wandb_evaluation, *written)[1]
    # rank 0 writes: the one agreement an evaluation adds; W&B alone is handed back (the files are whole)
    said = gather({"failure": failure, "unsynced": unsynced})
    stop_on([part["failure"] for part in said], iteration, ckpt_dir, close)
    assert written is not None  # no failure on this rank
    return written[0], first_failure([part["unsynced"] for part in said])


def summarize_eval(iteration: int, parts: Sequence[dict[str, Any]], key: str | None = None) -> dict[str, Any]:
    """The eval.jsonl row from all ranks' `evaluate` outputs (with ``eval_key`` ``key`` when given)."""
    rewards = [r for p in parts for r in p["rewards"]]
    eligible = np.array([r for r in rewards if r is not None], dtype=np.float64)
    return {"iteration": iteration,
            "eval_reward_mean": float(eligible.mean()) if len(eligible) else math.nan,
            "eval_reward_std": float(eligible.std()) if len(eligible) else math.nan,
            "eval_eligible_fraction": len(eligible) / len(rewards) if rewards else 0.0,
            "eval_ineligible_count": len(rewards) - len(eligible),
            **{f"eval_ineligible_{kind}": sum(it.get("ineligible_kind") == kind for p in parts for it in p.get("items", []))
               for kind in KINDS},
            "eval_outages": (lost := outages(parts)), "eval_complete": lost == 0,
            "eval_videos": len(rewards),
            "seconds_eval": float(parts[0]["seconds"]),
            **component_means([p["components"] for p in parts], "eval_reward_"),
            **({"eval_key": key} if key is not None else {})}


def outages(parts: Sequence[dict[str, Any]]) -> int:
    """How many held-out rewards of all ranks' `evaluate` outputs an outage took (kind ``error`` from the reward:
    the service or the agent's machinery down, a timeout), not counting the stand-ins of prompts whose image cannot
    be read (module docstring)."""
    return sum(it.get("ineligible_kind") == "error" and not it.get("stand_in") for p in parts
               for it in p.get("items", []))


def summarize_items(iteration: int, parts: Sequence[dict[str, Any]], key: str | None = None) -> list[dict[str, Any]]:
    """The eval_rewards.jsonl lines from all ranks' `evaluate` outputs: one per sample, by prompt and sample
    (with ``eval_key`` ``key`` when given)."""
    rows = [{"iteration": iteration, "prompt": it["prompt"], "sample": it["sample"], "text": it["text"],
             "reward": it["reward"], "reason": it["reason"], "run_id": it["run_id"], "video": it["video"],
             **({"ineligible_kind": it["ineligible_kind"]} if "ineligible_kind" in it else {}),
             **({"components": it["components"]} if "components" in it else {}),
             **({"eval_key": key} if key is not None else {})}
            for p in parts for it in p["items"]]
    return sorted(rows, key=lambda r: (r["prompt"], r["sample"]))
