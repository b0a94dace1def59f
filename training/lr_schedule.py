"""The learning rate of every optimizer step (``TrainConfig.lr_warmup_steps``, ``lr_schedule``, ``min_lr_ratio``)
and where a resume takes it up.

`lr_scheduler` hands DeepSpeed a ``LambdaLR`` of `LRFactor`, stepped after each optimizer step; its position is
the optimizer steps applied (`schedule_position`). A resume sets that position and the launch's learning rate
(`apply_optimizer_settings`).

Decision where the issue was silent: a resume whose decay horizon (``max_iterations * inner_epochs *
optimizer_steps_per_epoch``) differs from the checkpointed run's stretches (or shrinks) what is left of the decay
over the new remaining steps, from the progress the run had reached: the rate goes on from where it was. The
factor used to be recomputed as if the run had been planned for the new horizon from its start, so raising
``max_iterations`` made the rate jump at the resume (a finished cosine run at ``min_lr_ratio`` 0.1, doubled:
from 0.1 to 0.55 of ``learning_rate``, on a policy the decay had settled). The decay's progress is therefore
piecewise linear in the step: it starts at 0 at the end of the warmup, and each such resume starts a new piece
at its step (`LRFactor.anchor_step`, ``anchor_progress``), which the checkpoint's client state records
(`schedule_state`) so that later resumes go on along the same line. A run that had finished its decay stays at
``min_lr_ratio``; at ``min_lr_ratio`` 0 such a resume is refused (`zero_rate_refusal`, a ConfigError before
the model is built, from the record in the checkpoint's ``layout.json``: `resume_refusal`, which ``--check``
runs too; at the load for a checkpoint whose ``layout.json`` lacks it), unless it trains no iteration, since re-stretching would make the rate jump back up and going on would train every
added step at rate 0. A checkpoint from before the record resumes as the run planned for the new horizon.

A run that trained at a constant rate (``lr_schedule: constant``, with a warmup or without a scheduler at all)
records that it did (``"schedule": "constant"``): resumed with a decaying schedule, its decay starts at the
resume's step (or the warmup's end) from ``learning_rate``, progress 0, and ends at the new horizon. It used to
be taken as planned for the new horizon from the run's start (no record), or its record as a decay under way,
and the rate dropped at the resume on a policy that had trained at ``learning_rate``. The record also holds the
scheduler's position (``position``), so that training.resume can decide the refusal from ``layout.json``.

A resume that switches ``lr_schedule`` between linear and cosine starts a new piece at its step, at the progress
where the new curve gives the rate the run had reached (`same_rate_progress`), and says so (`horizon_note`): the
recorded progress used to be read on the other curve, so the rate jumped at the resume (at 22% of a decay to
``min_lr_ratio`` 0.1: 0.8 of ``learning_rate`` on the linear, 0.89 on the cosine), listed only as a changed setting.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from training.config import ConfigError, LRSchedule, TrainConfig


def lr_factor(step: int, warmup_steps: int, total_steps: int = 0, schedule: LRSchedule = "constant",
              min_ratio: float = 0.0, anchor_step: int | None = None, anchor_progress: float = 0.0) -> float:
    """Learning-rate multiplier of optimizer step ``step`` (0-based; ``TrainConfig.lr_warmup_steps``,
    ``lr_schedule``, ``min_lr_ratio``). Warmup: ``(step + 1) / warmup_steps`` for ``step < warmup_steps`` (the
    first step already moves: DeepSpeed's WarmupLR starts at its minimum, an optimizer step of an RL
    iteration spent at lr 0). Then, with the decay's progress ``p``, clipped to [0, 1]: constant ``1``; linear
    ``1 - (1 - min_ratio) p``; cosine ``min_ratio + (1 - min_ratio) (1 + cos(pi p)) / 2``. ``p`` goes linearly
    from ``anchor_progress`` at ``anchor_step`` (default: 0 at ``warmup_steps``) to 1 at ``total_steps``;
    past ``total_steps`` the factor stays at its end."""
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    start = warmup_steps if anchor_step is None else anchor_step
    progress = anchor_progress + (1.0 - anchor_progress) * (step - start) / max(1, total_steps - start)
    progress = min(1.0, max(0.0, progress))
    if schedule == "linear":
        return 1.0 - (1.0 - min_ratio) * progress
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class LRFactor:
    """`lr_factor` of a run's settings, as the ``LambdaLR``'s function (module docstring for the anchor)."""

    warmup_steps: int
    total_steps: int
    schedule: LRSchedule
    min_ratio: float
    anchor_step: int | None = None
    anchor_progress: float = 0.0

    def __call__(self, step: int) -> float:
        return lr_factor(step, self.warmup_steps, self.total_steps, self.schedule, self.min_ratio,
                         self.anchor_step, self.anchor_progress)

    def state(self) -> dict[str, Any]:
        """What the checkpoint records (`schedule_state`): the schedule and the decay's current piece."""
        return {"schedule": self.schedule, "anchor_step": self.warmup_steps if self.anchor_step is None
                else self.anchor_step, "anchor_progress": self.anchor_progress, "total_steps": self.total_steps}

    def resumed(self, saved: Any, position: int) -> LRFactor:
        """This launch's factor going on from ``position`` (optimizer steps taken) of a run whose checkpoint
        recorded ``saved`` (`state`; None or a malformed record: a checkpoint from before it, taken as the run
        planned for this launch's horizon). Another horizon starts a new piece at ``position`` with the progress
        the saved one had reached there (the warmup, if not over, ends first). A run saved at a constant rate
        starts the decay at ``position`` (module docstring)."""
        if _constant(saved) and self.schedule != "constant":
            return replace(self, anchor_step=max(position, self.warmup_steps), anchor_progress=0.0)
        if not _valid(saved):
            return self
        start, progress, total = int(saved["anchor_step"]), float(saved["anchor_progress"]), int(saved["total_steps"])
        curve = saved.get("schedule", self.schedule)  # a record from before it: taken as this launch's
        # linear <-> cosine: a new piece from the rate reached (module docstring)
        switched = curve != self.schedule and self.schedule != "constant"
        if (total == self.total_steps and not switched) or position <= start:  # the same line, or not begun
            out = replace(self, anchor_step=start, anchor_progress=progress)
        else:
            reached = progress + (1.0 - progress) * (position - start) / max(1, total - start)
            out = replace(self, anchor_step=position, anchor_progress=min(1.0, max(0.0, reached)))
        return replace(out, anchor_progress=same_rate_progress(out.anchor_progress, curve, self.schedule)) \
            if switched else out


def same_rate_progress(progress: float, was: str, now: LRSchedule) -> float:
    """The progress along the decay ``now`` (linear or cosine) at which it gives the rate that ``was`` gives at
    ``progress``, for any ``min_lr_ratio``: both are ``min + (1 - min) shape(p)``, with shape ``1 - p`` (linear)
    and ``(1 + cos(pi p)) / 2`` (cosine). 0 and 1 stay."""
    shape = 1.0 - progress if was == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))
    back = 1.0 - shape if now == "linear" else math.acos(min(1.0, max(-1.0, 2.0 * shape - 1.0))) / math.pi
    return min(1.0, max(0.0, back))


def _constant(saved: Any) -> bool:
    """Whether ``saved`` records a run that trained at a constant rate (`schedule_state`)."""
    return isinstance(saved, dict) and saved.get("schedule") == "constant"


def _valid(saved: Any) -> bool:
    """Whether ``saved`` records a decay (`LRFactor.state`; one from before ``schedule`` was recorded too)."""
    if not isinstance(saved, dict) or saved.get("schedule", "linear") not in ("linear", "cosine"):
        return False
    counts = [saved.get(k) for k in ("anchor_step", "total_steps")]
    progress = saved.get("anchor_progress")
    return (all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
            and isinstance(progress, int | float) and not isinstance(progress, bool) and 0.0 <= progress <= 1.0)


def total_optimizer_steps(cfg: TrainConfig) -> int:
    """Optimizer steps of a run that updates in every iteration: what ``lr_schedule`` decays over."""
    return cfg.max_iterations * cfg.inner_epochs * cfg.optimizer_steps_per_epoch


def launch_factor(cfg: TrainConfig) -> LRFactor:
    """The `LRFactor` a launch of ``cfg`` plans (before a resume takes up the checkpoint's decay)."""
    return LRFactor(cfg.lr_warmup_steps, total_optimizer_steps(cfg), cfg.lr_schedule, cfg.min_lr_ratio)


def lr_scheduler(cfg: TrainConfig) -> Callable[[Any], Any] | None:
    """``deepspeed.initialize(lr_scheduler=...)``: builds a ``LambdaLR`` of `LRFactor` on DeepSpeed's
    optimizer, which the engine steps after each optimizer step; None for a constant rate without warmup."""
    if cfg.lr_warmup_steps == 0 and cfg.lr_schedule == "constant":
        return None
    factor = launch_factor(cfg)
    return lambda optimizer: torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def resume_refusal(cfg: TrainConfig, saved: Any, iteration: int) -> str | None:
    """`zero_rate_refusal` of a ``--resume`` launch of ``cfg`` from the checkpoint at ``iteration`` whose
    ``layout.json`` records ``saved`` (`schedule_state`, with the scheduler's ``position``): training.resume asks
    it before any model is built (``--check`` too). None without a usable position (a checkpoint from before it
    was recorded: the load decides, `apply_optimizer_settings`)."""
    position = saved.get("position") if isinstance(saved, dict) else None
    if not isinstance(position, int) or isinstance(position, bool) or position < 0:
        return None
    factor = launch_factor(cfg).resumed(saved, position)
    return zero_rate_refusal(saved, factor, position, iteration < cfg.max_iterations)


def schedule_state(engine: Any) -> dict[str, Any] | None:
    """The schedule and decay's current piece of ``engine``'s scheduler (`LRFactor.state`) and its ``position``,
    for the checkpoint (client state and ``layout.json``); without a scheduler (`lr_scheduler`: a constant rate),
    ``schedule`` constant and the position; None for a scheduler not of `lr_scheduler`'s."""
    scheduler = engine.lr_scheduler
    if scheduler is None:
        return {"schedule": "constant", "position": schedule_position(engine.global_steps, engine.skipped_steps)}
    factor = scheduler.lr_lambdas[0] if isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR) else None
    return {**factor.state(), "position": scheduler.last_epoch} if isinstance(factor, LRFactor) else None


def schedule_position(global_steps: int, skipped_steps: int) -> int:
    """The scheduler position of an engine restored with these DeepSpeed counters: the optimizer steps applied.
    DeepSpeed counts a step whose fp16 gradients overflowed in ``global_steps`` and ``skipped_steps`` and does
    not step the scheduler for it, so an uninterrupted run's scheduler is at ``global_steps - skipped_steps``
    (a resume set ``global_steps``: ahead of it by every skipped step, further into the warmup or decay)."""
    return max(0, global_steps - skipped_steps)


def apply_optimizer_settings(engine: Any, learning_rate: float, weight_decay: float,
                             saved_schedule: Any = None, *, trains: bool = True) -> str | None:
    """Set every parameter group's ``lr`` and ``weight_decay`` (after a resume: loading the optimizer state
    restores the saved ones, so a run resumed with a lower learning_rate, as a diverged run is told to
    be, went on with the old one while the resume warning named the new). Under a warmup or a decaying
    schedule the rate is ``learning_rate * lr_factor(optimizer steps taken)``: `schedule_position`, the steps
    the engine applied, where the uninterrupted run's scheduler is, along the decay the checkpoint recorded
    (``saved_schedule``: `schedule_state` of the run saved; module docstring). ``trains``: whether the launch has
    an iteration left to train (`zero_rate_refusal`). Returns `horizon_note`'s note."""
    scheduler = engine.lr_scheduler  # lr_scheduler's LambdaLR, or None
    factor, note = 1.0, None
    if scheduler is not None:  # go on from the restored optimizer step count, towards the launch's rate
        scheduler.base_lrs = [learning_rate] * len(scheduler.base_lrs)
        scheduler.last_epoch = schedule_position(int(engine.global_steps), int(engine.skipped_steps))
        if isinstance(own := scheduler.lr_lambdas[0], LRFactor):
            resumed = own.resumed(saved_schedule, scheduler.last_epoch)
            if (problem := zero_rate_refusal(saved_schedule, resumed, scheduler.last_epoch, trains)) is not None:
                raise ConfigError(problem)
            scheduler.lr_lambdas = [resumed] * len(scheduler.lr_lambdas)
            note = horizon_note(saved_schedule, resumed, scheduler.last_epoch, learning_rate)
        factor = scheduler.lr_lambdas[0](scheduler.last_epoch)
    for group in engine.optimizer.param_groups:
        group["lr"] = learning_rate * factor
        group["weight_decay"] = weight_decay
    return note


def _finished(saved: Any, factor: LRFactor, position: int) -> bool:
    """Whether ``factor`` (`LRFactor.resumed` at ``position``) continues, over a new horizon, a decay the
    checkpointed run (``saved``) had already finished: every step from ``position`` on is at ``min_ratio``."""
    return (factor.schedule != "constant" and _valid(saved) and saved["total_steps"] != factor.total_steps
            and factor.anchor_progress >= 1.0 and position >= factor.warmup_steps)


def zero_rate_refusal(saved: Any, factor: LRFactor, position: int, trains: bool) -> str | None:
    """Why a resume cannot go on: its checkpoint's decay had finished (``saved``: its record; `LRFactor.resumed`
    at ``position``: progress 1 from the start of its piece), and at ``min_lr_ratio`` 0 every optimizer step
    this launch has left (a larger ``max_iterations``; or the same horizon, after a launch that trained on at a
    raised ``min_lr_ratio``) would train at rate 0: each iteration's rollouts and reward calls spent, the weights
    never moved (a note on stderr, or nothing, was all it said). None otherwise, and when the launch trains no
    iteration (``trains`` False: the checkpoint is at ``max_iterations``, which a larger ``inner_epochs`` or
    ``optimizer_steps_per_epoch`` leaves as it is while the horizon grows; training.resume.nothing_to_train says
    so); `horizon_note` says what a finished decay at a ratio above 0 does."""
    if (not trains or factor.schedule == "constant" or not _valid(saved) or factor.anchor_progress < 1.0 or factor.min_ratio > 0.0
            or not factor.warmup_steps <= position < factor.total_steps):
        return None
    return (f"--resume: lr_schedule {factor.schedule} had finished its decay (the checkpoint records it at its end "
            f"from optimizer step {factor.anchor_step}), and with min_lr_ratio 0 the steps from {position} to "
            f"{factor.total_steps} would all train at rate 0: the weights would not move. To train on, raise "
            "min_lr_ratio (they train at min_lr_ratio x learning_rate, e.g. --min_lr_ratio 0.1), or set "
            "lr_schedule: constant (--lr_schedule constant: learning_rate); or start a new run from the export")


def horizon_note(saved: Any, factor: LRFactor, position: int, learning_rate: float) -> str | None:
    """What a resume says when its decay horizon differs from the checkpointed run's (``saved``; None otherwise,
    and for a constant rate), or when a run saved at a constant rate starts its decay: the rate it goes on from, and when the decay had already ended (a finished run given
    more iterations), that those train at ``min_lr_ratio * learning_rate``, and how to train at another rate."""
    if _constant(saved) and factor.schedule != "constant":
        return (f"lr_schedule {factor.schedule}: the run trained at a constant rate so far; the decay starts at "
                f"optimizer step {factor.anchor_step} from learning_rate ({learning_rate:.3g}) and ends at step "
                f"{factor.total_steps}")
    if factor.schedule == "constant" or not _valid(saved):
        return None
    finished = _finished(saved, factor, position)  # also after a switch of curve: it said a decay was to come
    if (curve := saved.get("schedule", factor.schedule)) != factor.schedule:
        text = (f"lr_schedule {factor.schedule}: the run decayed along {curve} so far; it goes on from "
                f"{learning_rate * factor(position):.3g} at step {position}" + ("" if finished else
                f" along {factor.schedule} to min_lr_ratio x learning_rate at step {factor.total_steps}"))
    elif saved["total_steps"] == factor.total_steps:
        return None
    else:
        text = (f"lr_schedule {factor.schedule}: the decay now ends at optimizer step {factor.total_steps} (was "
                f"{saved['total_steps']}); it goes on from {learning_rate * factor(position):.3g} at step {position}")
    if finished:
        text += (f"; the run had finished its decay, so the added steps train at min_lr_ratio {factor.min_ratio:g} "
                 f"x learning_rate ({learning_rate * factor.min_ratio:.3g}): raise min_lr_ratio, or set "
                 "lr_schedule: constant, to train on at a higher rate")
    return text
