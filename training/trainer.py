"""The DynDiff-GRPO training loop (DESIGN.md §6, paper Sec. 4.2). Reads top to bottom.

Before the first iteration (training/run_start.py): the cheap checks and the logs, then the model, its reference and
the DeepSpeed engine, then the resume position. One iteration, on every rank for its share of the prompts:

1. rollouts: for each prompt, G rollouts of the current policy under ``torch.no_grad`` in eval mode
   (``policy.rollout.rollout``; ``rollout_batch`` at a time, joined by ``cat_rollouts``), recording
   every SDE step; decode them to uint8 frames (training/decode.py: a diverged rollout's NaN / inf latents
   are not decoded, and the reward never sees it: ineligible);
2. rewards: the configured reward on the decoded clips (sync or async), validated
   (None / NaN / inf -> ineligible, counted); with ``reward_overlap: groups`` (default) each group's
   clips go to the reward as soon as they are decoded and are scored in the background
   (training/reward_runner.py) while the next group samples, and step 2 waits for what is left (a call
   past ``reward_timeout_s`` ends ineligible with the reason, so a hung reward never hangs the run);
3. advantages per prompt group over eligible rewards (``training.grpo.group_advantages``); with
   ``rollout_videos_every``, the iteration's clips go to mp4 in a background thread (training/rollout_log.py,
   training/videos.py), except the diverged ones;
4. update (training/update.py): ``inner_epochs`` passes over (group, SDE step, micro-batch of samples)
   items in a seeded random order, ``loss = clipped GRPO + beta * mu-KL`` on each, through DeepSpeed,
   which accumulates ``gradient_accumulation_steps`` micro-batches per optimizer step;
5. metrics (training/metrics.py); with ``eval_every``, the held-out evaluation (training/evaluate.py
   -> eval.jsonl; also once before the first iteration, and first thing in a resumed run whose stop
   signal skipped it); every ``checkpoint_every`` iterations and after the last, a checkpoint on every
   rank (a stop signal that arrives during the evaluation or the save stops the run there; none past logs rank 0
   could not write, and W&B alone failing saves one, then stops: training/checkpointing.py);
6. after the last iteration (``export: final``), rank 0 exports the last checkpoint to
   ``output_dir/final`` (training/export.py), which training/generate.py samples.

Decisions where the issue was silent:

* Whole groups stay on one rank (advantages need no communication); every rank runs the same
  number of micro-batches so ZeRO's collectives stay in step. Samples without a valid advantage
  (ineligible reward or skipped group) stay out of the forward pass (training/update.py); when no rank
  has a valid sample the update phase is skipped on all ranks (``update_skipped = 1``).
* The loss of an optimizer step is the mean over its valid (sample, SDE step) items on all ranks, so
  ``micro_batch`` is only a memory setting (training/update.py says how). mu-KL excludes conditioning
  frames. The logged ``loss``, ``clip_fraction``, ``approx_kl`` and ``mu_kl`` are means over valid items.
* A prompt whose image cannot be read mid-run skips its group for the iteration, recorded with the prompt's
  line (training/prompt_failures.py: a never-scored stand-in keeps the ranks in step); all of them: a stop.
* Rollout noise comes from a generator seeded by (seed, iteration, rank, prompt slot), so a resumed
  run draws exactly the noise of an uninterrupted one.
* With ``beta = 0`` the reference pass is skipped; otherwise it runs for every micro-batch on every
  rank (also where no sample is valid), because under ZeRO-3 each forward gathers parameters
  collectively.
* ``decode: preview`` replaces the VAE by the fixed latent->RGB preview of training/preview.py
  (a fast alternative for quick CPU experiments; the smoke config decodes with the tiny VAE).
* A fresh run starts a new metrics.jsonl; ``--resume`` appends to it, after dropping the rows of every
  log past the checkpoint it loads (training/metrics_log.py ``trim_after``). Every launch writes its resolved
  config to ``output_dir/config.yaml`` (rank 0), so a checkpoint can be exported later from the run
  folder alone.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from training import engine as ds_engine
from training.best import (
    agreed_eval_means,
    counted_mean,
    early_stop_message,
    evals_since_best,
    is_new_best,
    on_eval_schedule,
    pending_eval,
)
from training.checkpointing import checkpoint as save_checkpoint
from training.checkpointing import logs_agreed
from training.config import TrainConfig
from training.decode import decode_group
from training.evaluate import eval_key, evaluate_everywhere
from training.group_rollout import sample_group
from training.grpo import advantage_metric_parts, group_advantages
from training.metrics import gather, progress_postfix, summarize
from training.models import encode_frames
from training.preemption import (
    RewardsStalled,
    StopRequest,
    TrainingDiverged,
    TrainingStopped,
    finish_with_resume,
    skipped_at_end,
)
from training.prompt_failures import PromptImagesFailed, first_frames
from training.rank_failures import (
    RankFailure,
    Tried,
    agreed_count,
    attempt,
    closed_before_stop,
    failed_on,
    stop_on,
)
from training.reward_outcome import RewardOutcome
from training.reward_runner import RewardRunner, merge_outcomes
from training.rollout_log import diversity, ineligible_items, mask_means, reward_items, submit_rollout_videos
from training.run_end import Opened, finish
from training.run_start import build_engine, resume_position, start_run
from training.update import Group, metric_parts, rollout_config, update_policy


def last_wandb_todo(evaluation: int | None, export_to: Path | None) -> str:
    """What a W&B failure after the last iteration's checkpoint leaves to do (`training.rank_failures.RankFailed`):
    ``evaluation``, the iteration whose held-out evaluation the stop skipped (None: none was due, or it ran and W&B
    failed on its rows, its files written); ``export_to``, the final export (``export: final``)."""
    todo = finish_with_resume(skipped_at_end(evaluation, export_to))
    return f"that was the run's last iteration: once W&B is back, {todo}"


def train(cfg: TrainConfig, *, local_rank: int = 0, reward_tokens: dict[str, str] | None = None,
          reward_settings: Any = None, reward_tools: Any = None) -> Path:
    """Run (or resume) training as configured; returns the output directory. `reward_tokens` (http rewards),
    `reward_settings` and `reward_tools` (agent reward: `graph.settings.BackboneSettings`, a
    `tools.toolbox.Toolbox`) are read by the entry point. What the run opens is closed on every way out (a model
    that cannot load after the logs opened, an exception in the loop, a Ctrl-C too: training/run_end.py)."""
    with Opened() as opened:
        return _train(cfg, opened, local_rank, reward_tokens, reward_settings, reward_tools)


def _train(cfg: TrainConfig, opened: Opened, local_rank: int, reward_tokens: dict[str, str] | None,
           reward_settings: Any, reward_tools: Any) -> Path:
    """`train`, each thing it opens set on ``opened`` as it opens it."""
    run = start_run(cfg, opened, local_rank, reward_tokens, reward_settings, reward_tools)  # training/run_start.py
    cfg, rank, world, device, log = run.cfg, run.rank, run.world, run.device, run.log  # cfg: its shift resolved
    prompts, places, per_rank, out_dir, ckpt_dir = run.prompts, run.places, run.per_rank, run.out_dir, run.ckpt_dir
    eval_prompts, reward_fn, group, rcfg = run.eval_prompts, run.reward_fn, cfg.group_size, rollout_config(cfg)
    engine, reference = build_engine(run, opened)  # the model, its reference and the DeepSpeed engine
    world_model = engine.module.world_model
    start, stream, stamp, skipped = resume_position(run, engine, reward_settings)  # and the run's records
    bar = None
    if rank == 0 and cfg.progress:
        from tqdm import tqdm

        bar = opened.bar = tqdm(total=cfg.max_iterations, initial=start, desc="grpo", unit="it")

    # scores on the process's bridge loop (graph.bridge); a call past reward_timeout_s ends ineligible
    rewards = opened.rewards = RewardRunner(reward_fn, cfg.reward or "", timeout_s=cfg.reward_timeout_s)
    video_writer = opened.video_writer = ThreadPoolExecutor(1, thread_name_prefix="rollout-videos")
    close = opened.close  # what the run opened, before a stop (RankFailed on every rank: training/rank_failures.py)

    # eval_patience counts on from eval.jsonl, among rows of this launch's measurement (training/best.py);
    # rows past the checkpoint (a crash after them) are redone
    key = eval_key(cfg, eval_prompts) if eval_prompts else None
    means = {i: m for i, m in agreed_eval_means(log.eval_path, key).items() if i <= start} if cfg.resume and key else {}

    def held_out(iteration: int) -> RankFailure | None:  # training/evaluate.py: every rank samples, rank 0 logs; a
        engine.module.eval()  # failure on any rank stops every rank (RankFailed: training/rank_failures.py)
        row, unsynced = evaluate_everywhere(world_model, cfg, eval_prompts, reward_fn, log, ckpt_dir,
                                            iteration=iteration, rank=rank, world=world, places=run.eval_places,
                                            key=key, close=close, partitioned=engine.zero_optimization_stage() == 3)
        if (mean := counted_mean(row)) is not None:  # none for an incomplete evaluation too (training/best.py)
            means[iteration] = mean
        else:  # a repeated evaluation without a mean replaces the earlier one, as training.best.eval_means reads it
            means.pop(iteration, None)
        return unsynced  # W&B alone failing: the checkpoint of `iteration` is saved (or was), then the run stops

    def stop_early(iteration: int) -> None:  # eval_patience ran out at `iteration`: say so; the caller stops
        if rank == 0:  # rank 0 wrote eval.jsonl
            print(early_stop_message(cfg, iteration, ckpt_dir, log.eval_path, key), flush=True)

    # preemption.py: before the opening evaluation, where a scheduler's signal took the default action (the rank
    stops = opened.stops = StopRequest().install() if cfg.on_signal == "checkpoint" else None  # killed, W&B open)
    end = cfg.max_iterations
    export_to = out_dir / "final" if cfg.export == "final" else None  # what a stop after the last iteration skips
    # the opening evaluation: a fresh run's baseline, or the one a resume owes (a stop skipped it, a new measurement)
    if eval_prompts and (start == 0 or pending_eval(cfg, start, log.eval_path, key)):
        stop_on([held_out(start)], start, ckpt_dir, close)  # W&B alone failed (its files whole): stop, as after a save
        if stops is not None and (signum := stops.agreed(device)):  # came during it: stop now, as after a save
            dist.barrier()  # (a fresh run's baseline: nothing trained, no checkpoint; a resume's: its checkpoint's)
            raise closed_before_stop(close, TrainingStopped(
                start, signum, str(ckpt_dir / ds_engine.iteration_tag(start)) if start else None, saved=False,
                last=start == cfg.max_iterations, export_to=export_to))
    if start > 0 and cfg.eval_patience is not None and evals_since_best(means) >= cfg.eval_patience and start < end:
        # the patience ran out at the checkpoint (training/best.py): where the run without a stop signal ended;
        # it trained on to its next evaluation
        stop_early(start)
        end = start

    def checkpoint(iteration: int) -> None:  # every rank (training/checkpointing.py): a failure stops every rank
        save_checkpoint(engine, ckpt_dir, iteration, stream.position, skipped=skipped, rank=rank, local_rank=local_rank,
                        world=world, layout=run.layout, stamp=stamp, keep=cfg.keep_checkpoints, evals=(log.eval_path, key),
                        close=close)
    # rank 0's logs of an iteration could not be written: agreed before its evaluation and checkpoint (logs_agreed:
    unlogged: RankFailure | None = None  # training/checkpointing.py), at the next iteration's first gather or after
    # the loop (rank_failures.py); a divergence stop (no checkpoint) names them in TrainingDiverged's message, with
    # the iteration's W&B failure (`unsynced`, agreed in the same iteration: with W&B every iteration is)
    done = start  # the last iteration trained
    for it in range(start, end):
        # -- 1. rollouts ----------------------------------------------------------------------
        t0 = time.perf_counter()
        mine = stream.take(cfg.prompts_per_iteration)[rank * per_rank:(rank + 1) * per_rank]
        engine.module.eval()
        groups: list[Group] = []
        pending: list[Future[RewardOutcome]] = []
        unscored: list[str | None] = []  # per clip, "nan" / "inf" for a diverged rollout (training/decode.py)
        refused: list[str | None] = []  # per clip, why its prompt's group is skipped (training/prompt_failures.py)
        # first frames: one that cannot be read skips its group (a stand-in keeps the ranks' collectives in step)
        firsts, failed = first_frames([prompts[i] for i in mine], [places[i] for i in mine], cfg, it + 1, rank)
        conds, unencoded = attempt(rank, "encoding the iteration's prompts", encode_frames, world_model, cfg, firsts,
                                   [prompts[i].text for i in mine], device)  # agreed before the first forward
        ranks_say = gather({"failed": failed, "unlogged": unlogged, "unencoded": unencoded})  # and: did rank 0
        stop_on([p["unlogged"] for p in ranks_say], it, ckpt_dir, close)  # fail to write the last logs
        stop_on([p["unencoded"] for p in ranks_say], it + 1, ckpt_dir, close)
        failures = [f for part in ranks_say for f in part["failed"] if f is not None]  # all ranks'
        unlogged = attempt(rank, "writing failed_prompts.jsonl", log.write_failed_prompts, it + 1, failures)[1]
        if len(failures) == cfg.prompts_per_iteration:  # nothing to learn from on any rank: stop on every rank
            raise closed_before_stop(close, PromptImagesFailed(it + 1, failures, ckpt_dir, log.failed_prompts_path,
                                                               recorded=unlogged is None))
        assert conds is not None  # else stop_on raised above
        with Tried(rank, world, "sampling the iteration's rollouts",  # agreed at step 4; under ZeRO-3 alone at
                   exit_alone=close if engine.zero_optimization_stage() == 3 else None) as tried:  # once: its forwards
            with torch.no_grad():
                for slot, index in enumerate(mine):
                    spec = prompts[index]
                    cond = conds[slot].repeat_interleave(group)
                    ro = sample_group(world_model, cond, rcfg, cfg, device, (cfg.seed, it, rank, slot))
                    frames, diverged = decode_group(world_model, ro.latents, cfg)  # diverged: never scored
                    skip = [None if (failure := failed[slot]) is None else failure.reason] * group  # never scored
                    unscored += diverged
                    refused += skip
                    groups.append(Group(cond=cond, rollout=ro, frames=frames, text=spec.text))
                    if cfg.reward_overlap == "groups":  # scored in the background while the next group samples
                        pending.append(rewards.submit(frames, [spec.text] * group, iteration=it + 1, fps=cfg.fps,
                                                      group_ids=[slot] * group, rank=rank, phase="train",
                                                      first_index=slot * group, unscored=diverged, refused=skip))
            left_out = [kind or why for kind, why in zip(unscored, refused, strict=True)]  # no video, no metrics
            t1 = time.perf_counter()
            # the last forward: a failure from here (a wrong number of rewards) is agreed at step 4 under ZeRO-3 too
            tried.forwards_done("scoring the iteration's rollouts")  # (training/rank_failures.py)
            # -- 2. rewards and 3. advantages ---------------------------------------------------------
            texts = [g.text for g in groups for _ in range(group)]
            group_ids = [gi for gi in range(len(groups)) for _ in range(group)]
            if cfg.reward_overlap == "off":
                pending.append(rewards.submit([clip for g in groups for clip in g.frames], texts, iteration=it + 1,
                                              fps=cfg.fps, group_ids=group_ids, rank=rank, phase="train",
                                              first_index=0, unscored=unscored, refused=refused))
            outcome = merge_outcomes([p.result() for p in pending])
            adv, valid, stats = group_advantages(outcome.rewards, group_ids, cfg.a_max, cfg.adv_eps)
            for gi, g in enumerate(groups):
                g.advantages = adv[gi * group:(gi + 1) * group].to(device)
                g.valid = valid[gi * group:(gi + 1) * group].to(device)
            t2 = time.perf_counter()
            # rollout_videos_every (training/rollout_log.py): written in the background while the update runs
            videos = submit_rollout_videos(video_writer, out_dir, groups, cfg, it + 1, rank, left_out)

        # -- 4. update (training/update.py) -----------------------------------------------------
        total = agreed_count(0.0 if tried.failure else float(valid.sum()), tried.failure, device, it + 1, ckpt_dir,
                             close)  # valid samples on all ranks; a failure of steps 1-3 on one: RankFailed on all
        lr = float(engine.get_lr()[0])  # the rate of this iteration's first optimizer step
        with Tried(rank, world, "updating the policy", exit_alone=close) as updating:  # its backward and step are
            upd = update_policy(engine, groups, cfg, rcfg, reference=reference, iteration=it,  # collectives: alone
                                grad_accum=run.grad_accum, device=device, valid_total=total)  # with several ranks
        stop_on([updating.failure], it + 1, ckpt_dir, close)  # one rank: RankFailed (training/rank_failures.py)
        t3 = time.perf_counter()

        # -- 5. metrics and checkpoints -------------------------------------------------------
        names = videos.result() if videos is not None else None
        local = {
            "rewards": outcome.rewards,
            **advantage_metric_parts(adv, valid, stats),  # training/grpo.py
            **{f"ineligible_{k}": v for k, v in outcome.counts.items()},
            **metric_parts(upd),  # training/update.py
            "mask_mean": mask_means(groups, left_out),  # per (rollout, SDE step), diverged / stand-ins left out
            **diversity(groups, left_out),  # over the rollouts that did not diverge, stand-ins left out
            "seconds_rollout": t1 - t0, "seconds_reward": t2 - t1, "seconds_update": t3 - t2,
            "diverged_rollouts": sum(1 for kind in unscored if kind),
            "failed_prompts": sum(1 for f in failed if f is not None),
            "lr": lr,
            "ineligible_items": ineligible_items(outcome, texts),  # training/rollout_log.py
            "reward_items": reward_items(outcome, texts, group_ids, group, rank, adv, valid, names, left_out),
            "components": outcome.components, "usage": outcome.usage,
        }
        parts = gather(local)
        row = summarize(it + 1, parts)
        why = [item for p in parts for item in p["ineligible_items"]]
        # written also when failed_prompts.jsonl was not (a checkpoint of the iteration left a hole a resume never
        # filled); the first failure is the one agreed
        unwritten = attempt(rank, "writing the iteration's logs", log.write_iteration, row, parts)[1]
        unlogged = unlogged or unwritten
        unsynced = attempt(rank, "logging the iteration to W&B", log.wandb_iteration, row)[1]  # after the files
        done = it + 1
        if why and row["eligible_fraction"] == 0 and rank == 0:  # nothing to learn from: say why at once
            note = (f"iteration {it + 1}: every reward was ineligible (no update); e.g. {why[0]['reason'][:300]} "
                    f"(all reasons: {log.ineligible_path})")
            (bar.write if bar is not None else print)(note)
        if bar is not None:
            bar.set_postfix(progress_postfix(row, beta=cfg.beta,
                                             steps_per_iteration=cfg.inner_epochs * cfg.optimizer_steps_per_epoch))
            bar.update(1)
        diverged_count = int(row["diverged_rollouts"])  # NaN / inf latents: a diverged policy too
        if (row["nonfinite_losses"] or diverged_count) and cfg.nonfinite_loss == "stop":  # every rank sees the same
            raise closed_before_stop(close, TrainingDiverged(it + 1, int(row["nonfinite_losses"]), ckpt_dir,
                                                             rollouts=diverged_count, unlogged=unlogged or unsynced))
        signum = stops.agreed(device) if stops is not None else 0  # a signal on any rank stops them all here
        skipped = skipped + 1 if row["update_skipped"] else 0  # the same row on every rank: they stop together
        stalled = (cfg.max_skipped_iterations is not None and skipped >= cfg.max_skipped_iterations
                   and it + 1 < cfg.max_iterations)  # the last iteration ends the run as usual
        scheduled = (it + 1) % cfg.checkpoint_every == 0 or it + 1 == cfg.max_iterations
        due = bool(eval_prompts) and on_eval_schedule(cfg, it + 1)
        # rank 0's logs, before the evaluation: none is spent on an iteration whose checkpoint is refused; W&B alone
        # failing (wandb_down) saves the iteration, then stops: with W&B every iteration (one small gather), where
        # the next iteration's gather found it with an older checkpoint (up to checkpoint_every - 1 trained again)
        agreed = bool(signum or stalled or scheduled or due or cfg.wandb_project)
        wandb_down = logs_agreed(unlogged, unsynced, it + 1, ckpt_dir, close) if agreed else None
        evaluated = due and not (signum or stalled or wandb_down)  # skipped for a stop: the resumed run evaluates
        if evaluated:  # this iteration first (pending_eval); W&B failing on its rows saves the iteration too
            wandb_down = held_out(it + 1)
        plateau = evaluated and cfg.eval_patience is not None and evals_since_best(means) >= cfg.eval_patience
        new_best = evaluated and is_new_best(means, it + 1)  # checkpointed: `--tag best` can export it
        saved = bool(signum or stalled or wandb_down or plateau or new_best or scheduled)
        if saved:
            checkpoint(it + 1)
        if stops is not None and not (signum or stalled) and (late := stops.agreed(device)):
            signum = late  # a signal during the evaluation or the save: stop now, not after another iteration
            if not saved:
                if not agreed:  # (agreed already where the iteration evaluated)
                    wandb_down = logs_agreed(unlogged, unsynced, it + 1, ckpt_dir, close)
                checkpoint(it + 1)
        owed = it + 1 if due and not evaluated else None  # the held-out evaluation a stop here skipped
        if signum or stalled:
            dist.barrier()  # every rank has written its part before any of them exits
            folder = str(ckpt_dir / ds_engine.iteration_tag(it + 1))  # closed with the stop's exit code (W&B's)
            stop = TrainingStopped(it + 1, signum, folder, last=it + 1 == cfg.max_iterations, evaluation=owed,
                                   export_to=export_to) if signum else \
                RewardsStalled(it + 1, skipped, folder, why[0]["reason"] if why else "no group had 2 eligible rewards",
                               log.ineligible_path)
            if wandb_down is not None:  # the stop's exit code is what a scheduler's requeue reads
                stop.add_note(f"also: {failed_on(wandb_down)}")
            raise closed_before_stop(close, stop)
        stop_on([wandb_down], it + 1, ckpt_dir, close,  # after its checkpoint: --resume continues from it, or
                todo=last_wandb_todo(owed, export_to)  # only runs what the stop skipped
                if it + 1 == cfg.max_iterations else None)
        if plateau and it + 1 < cfg.max_iterations:  # eval_patience: end here as if this were the last iteration
            stop_early(it + 1)
            break

    # -- 6. the trained policy (training/export.py): rank 0, after the ranks agreed and shut down (run_end.py)
    finish(cfg, rank=rank, start=start, done=done, unlogged=unlogged, opened=opened, ckpt_dir=ckpt_dir)
    return out_dir
