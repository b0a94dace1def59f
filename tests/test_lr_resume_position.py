"""The learning-rate schedule's position after a resume, with fp16 steps DeepSpeed skipped on overflow.

DeepSpeed's ``_take_model_step`` counts every optimizer step in ``global_steps`` but, when the fp16 gradients
overflowed, skips the step, counts it in ``skipped_steps`` and does not step the scheduler. A resume set the
scheduler's position to ``global_steps``: ahead of the uninterrupted run by the skipped steps (further into the
warmup or the decay than the run it continues)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch

from training.lr_schedule import apply_optimizer_settings, lr_factor


def _engine(steps_taken: int, overflows: set[int], factor) -> SimpleNamespace:  # noqa: ANN001
    """An engine after ``steps_taken`` optimizer steps, stepped as DeepSpeed's _take_model_step does."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.1)
    engine = SimpleNamespace(optimizer=optimizer, lr_scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, factor),
                             global_steps=0, skipped_steps=0)
    for step in range(steps_taken):
        if step in overflows:
            engine.skipped_steps += 1  # no optimizer step, no scheduler step
        else:
            engine.lr_scheduler.step()
        engine.global_steps += 1
    return engine


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")  # no real steps here
@pytest.mark.parametrize("schedule", ["warmup", "cosine"])
def test_a_resume_continues_the_schedule_where_the_uninterrupted_run_is(schedule):
    factor = functools.partial(lr_factor, warmup_steps=8 if schedule == "warmup" else 0, total_steps=20,
                               schedule="constant" if schedule == "warmup" else "cosine", min_ratio=0.1)
    uninterrupted = _engine(6, {1, 4}, factor)
    resumed = _engine(0, set(), factor)  # a fresh engine, then DeepSpeed's load restores the step counts
    resumed.global_steps, resumed.skipped_steps = uninterrupted.global_steps, uninterrupted.skipped_steps
    apply_optimizer_settings(resumed, 0.1, 0.0)
    assert resumed.lr_scheduler.last_epoch == uninterrupted.lr_scheduler.last_epoch == 4
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(uninterrupted.optimizer.param_groups[0]["lr"])
    for engine in (uninterrupted, resumed):  # and both go on alike
        engine.lr_scheduler.step()
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(uninterrupted.optimizer.param_groups[0]["lr"])


def _run(factor, steps: int, ckpt=None, saved=None) -> SimpleNamespace:  # noqa: ANN001
    """An engine of ``factor`` (an LRFactor) resumed (``saved``: the checkpoint's record) at ``ckpt`` optimizer
    steps (through training.engine.load's path), then stepped to ``steps``; the rate of every step in ``rates``."""
    engine = _engine(0, set(), factor)
    if ckpt is not None:
        engine.global_steps = ckpt
        apply_optimizer_settings(engine, 0.1, 0.0, saved)
    engine.rates = []
    for _ in range(engine.global_steps, steps):
        engine.rates.append(engine.optimizer.param_groups[0]["lr"])
        engine.optimizer.step()
        engine.lr_scheduler.step()
        engine.global_steps += 1
    return engine


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_a_resume_with_a_longer_horizon_stretches_the_rest_of_the_decay_without_a_jump(schedule):
    """max_iterations raised at a resume: the factor was recomputed as if the run had been planned for the new
    horizon from its start, so the rate jumped up at the resume (linear, 10 -> 20 steps, at step 6: from 0.55 to
    0.8 of learning_rate), against "stretches what is left of it" (config.py, README)."""
    from training.lr_schedule import LRFactor, schedule_state

    planned = LRFactor(2, 10, schedule, 0.1)
    first = _run(planned, 6)  # the launch that saved at step 6, planned for 10 steps
    saved = schedule_state(first)
    longer = _run(LRFactor(2, 20, schedule, 0.1), 20, ckpt=6, saved=saved)
    assert longer.rates[0] == pytest.approx(0.1 * planned(6))  # goes on from the rate reached
    assert all(a >= b for a, b in zip(longer.rates, longer.rates[1:], strict=False))  # decaying, no jump up
    assert longer.rates[-1] > 0.1 * 0.1 and longer.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.1)
    # a later resume of the longer run, same horizon, continues on the same line
    again = _run(LRFactor(2, 20, schedule, 0.1), 20, ckpt=12, saved=schedule_state(_run(
        LRFactor(2, 20, schedule, 0.1), 12, ckpt=6, saved=saved)))
    assert again.rates == pytest.approx(longer.rates[6:])
    # the same horizon is the uninterrupted run; in the warmup, a new horizon only moves the decay's end
    assert _run(planned, 10, ckpt=6, saved=saved).rates == pytest.approx(_run(planned, 10).rates[6:])
    warm = _run(LRFactor(2, 20, schedule, 0.1), 20, ckpt=1, saved=schedule_state(_run(planned, 1)))
    assert warm.rates == pytest.approx(_run(LRFactor(2, 20, schedule, 0.1), 20).rates[1:])


def test_a_finished_decay_stays_at_its_end_and_an_old_checkpoint_takes_the_new_horizon():
    from training.lr_schedule import LRFactor, schedule_state

    done = _run(LRFactor(0, 10, "linear", 0.2), 10)
    assert _run(LRFactor(0, 20, "linear", 0.2), 20, ckpt=10, saved=schedule_state(done)).rates == \
        pytest.approx([0.1 * 0.2] * 10)
    for legacy in (None, {"anchor_step": "2"}):  # no record (a checkpoint from before it), or not one of ours
        assert _run(LRFactor(0, 20, "linear", 0.2), 20, ckpt=10, saved=legacy).rates[0] == pytest.approx(0.1 * 0.6)


def test_the_checkpoint_records_the_decay_and_load_hands_it_on(tmp_path, monkeypatch):
    """training.engine.save writes schedule_state into the client state; training.engine.load passes it on."""
    from training import engine as ds_engine
    from training.lr_schedule import LRFactor

    first = _run(LRFactor(0, 10, "linear", 0.0), 6)
    saved = {}
    first.save_checkpoint = lambda folder, tag, client_state, save_latest: saved.update(client_state)
    ds_engine.save(first, tmp_path, 3, 0, local_rank=0)
    assert saved["lr_schedule"] == {"schedule": "linear", "anchor_step": 0, "anchor_progress": 0.0, "total_steps": 10,
                                    "position": 6}
    resumed = _engine(0, set(), LRFactor(0, 20, "linear", 0.0))
    resumed.global_steps = 6
    resumed.load_checkpoint = lambda folder, tag, load_lr_scheduler_states: ("path", saved)
    assert ds_engine.load(resumed, tmp_path, "iter_000003", learning_rate=0.1, weight_decay=0.0,
                          max_iterations=10) == (3, 0, 0)
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.4)  # not 0.1 * 0.7


def test_the_resume_says_where_the_rate_goes_on_from_and_when_the_decay_had_ended():
    from training.lr_schedule import LRFactor, horizon_note, schedule_state

    saved = schedule_state(_run(LRFactor(0, 10, "linear", 0.0), 5))
    assert horizon_note(saved, LRFactor(0, 10, "linear", 0.0).resumed(saved, 5), 5, 0.1) is None  # same horizon
    note = horizon_note(saved, LRFactor(0, 20, "linear", 0.0).resumed(saved, 5), 5, 0.1)
    assert note == "lr_schedule linear: the decay now ends at optimizer step 20 (was 10); it goes on from 0.05 at step 5"
    done = schedule_state(_run(LRFactor(0, 10, "linear", 0.2), 10))  # at min_lr_ratio 0 it is refused (below)
    note = horizon_note(done, LRFactor(0, 20, "linear", 0.2).resumed(done, 10), 10, 0.1)
    assert "had finished its decay, so the added steps train at min_lr_ratio 0.2 x learning_rate (0.02)" in note


def test_a_finished_decay_at_min_lr_ratio_0_given_more_iterations_is_refused_naming_the_options():
    """A run whose decay ended at min_lr_ratio 0, resumed with a larger max_iterations, trained every added
    iteration at rate 0 (rollouts and reward calls spent, the weights never moved) after a note on stderr. The
    resume now stops, before any rollout, naming min_lr_ratio and lr_schedule; with min_lr_ratio raised it trains
    on at that fraction of learning_rate, and a decay not yet finished still stretches."""
    from training.config import ConfigError
    from training.lr_schedule import LRFactor, schedule_state

    done = schedule_state(_run(LRFactor(0, 10, "cosine", 0.0), 10))
    with pytest.raises(ConfigError, match=r"min_lr_ratio 0.*rate 0.*raise min_lr_ratio.*lr_schedule: constant"):
        _run(LRFactor(0, 20, "cosine", 0.0), 20, ckpt=10, saved=done)
    assert _run(LRFactor(0, 20, "cosine", 0.25), 20, ckpt=10, saved=done).rates == pytest.approx([0.1 * 0.25] * 10)
    half = schedule_state(_run(LRFactor(0, 10, "linear", 0.0), 5))
    assert _run(LRFactor(0, 20, "linear", 0.0), 20, ckpt=5, saved=half).rates[0] == pytest.approx(0.05)
    # trained on at min_lr_ratio 0.25, stopped at step 15, resumed with the same horizon but the run's first
    # settings (min_lr_ratio 0): the last 5 steps at rate 0, without even the note
    on = schedule_state(_run(LRFactor(0, 20, "cosine", 0.25), 15, ckpt=10, saved=done))
    with pytest.raises(ConfigError, match="steps from 15 to 20 would all train at rate 0"):
        _run(LRFactor(0, 20, "cosine", 0.0), 20, ckpt=15, saved=on)


def test_a_finished_run_at_min_lr_ratio_0_resumed_with_more_steps_per_iteration_but_no_iteration_left_is_not_refused(
        tmp_path):
    """max_iterations unchanged, inner_epochs (or optimizer_steps_per_epoch) doubled: the decay horizon doubles, so
    the rate-0 refusal fired, though the launch trains no iteration (before: the "nothing to train" note and the
    export again). The load decides with the iterations left (training.engine.load's max_iterations)."""
    from training import engine as ds_engine
    from training.config import ConfigError
    from training.lr_schedule import LRFactor, schedule_state

    done = _run(LRFactor(0, 10, "cosine", 0.0), 10)
    client = {"iteration": 10, "data_position": 0, "rng": [ds_engine.rng_state()], "lr_schedule": schedule_state(done)}
    resumed = _engine(0, set(), LRFactor(0, 20, "cosine", 0.0))
    resumed.global_steps = 10
    resumed.load_checkpoint = lambda folder, tag, load_lr_scheduler_states: ("path", client)
    assert ds_engine.load(resumed, tmp_path, "iter_000010", learning_rate=0.1, weight_decay=0.0,
                          max_iterations=10) == (10, 0, 0)
    with pytest.raises(ConfigError, match="would all train at rate 0"):  # one more iteration: refused
        ds_engine.load(resumed, tmp_path, "iter_000010", learning_rate=0.1, weight_decay=0.0, max_iterations=11)


@pytest.mark.parametrize("warmup", [0, 2])
def test_a_constant_run_resumed_with_a_decaying_schedule_starts_the_decay_from_learning_rate(warmup):
    """lr_schedule: constant (no warmup: no scheduler, so no record) resumed as linear: the decay was taken as
    planned for the whole run from its start, and with a warmup the constant run's record as a decay under way,
    so the rate dropped at the resume (at step 6 of 10: to 0.55 x learning_rate) on a run that had trained at
    learning_rate. The decay now starts at the resume, from learning_rate, and ends at min_lr_ratio."""
    from training.lr_schedule import LRFactor, horizon_note, schedule_state

    if warmup:
        first = _run(LRFactor(warmup, 10, "constant", 0.1), 6)
    else:
        first = SimpleNamespace(lr_scheduler=None, global_steps=6, skipped_steps=0)
    saved = schedule_state(first)
    assert saved is not None and saved["schedule"] == "constant" and saved["position"] == 6
    for total in (10, 20):
        resumed = _run(LRFactor(warmup, total, "linear", 0.1), total, ckpt=6, saved=saved)
        assert resumed.rates[0] == pytest.approx(0.1)
        assert all(a > b for a, b in zip(resumed.rates, resumed.rates[1:], strict=False))
        assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.1)
    note = horizon_note(saved, LRFactor(warmup, 20, "linear", 0.1).resumed(saved, 6), 6, 0.1)
    assert note == ("lr_schedule linear: the run trained at a constant rate so far; the decay starts at optimizer "
                    "step 6 from learning_rate (0.1) and ends at step 20")
    # before the warmup's end, the warmup ends first; a constant resume of a constant run stays constant
    early = schedule_state(SimpleNamespace(lr_scheduler=None, global_steps=1, skipped_steps=0))
    assert _run(LRFactor(4, 10, "linear", 0.0), 10, ckpt=1, saved=early).rates == \
        pytest.approx(_run(LRFactor(4, 10, "linear", 0.0), 10).rates[1:])
    assert _run(LRFactor(2, 10, "constant", 0.0), 10, ckpt=6, saved=saved).rates == pytest.approx([0.1] * 4)


def test_the_rate_0_refusal_comes_from_layout_json_before_any_model_is_built(tmp_path):
    """The decay's record was only in the client state inside mp_rank_00_model_states.pt, so `--check` passed and
    the launch built the model before the load refused. Each checkpoint's layout.json records it too (with the
    scheduler position), and plan_resume (`--check` and the launch, before the model) refuses from it."""
    from training.checkpointing import _markers
    from training.config import ConfigError, PromptSpec, TrainConfig
    from training.lr_schedule import LRFactor, schedule_state
    from training.resume import StateLayout, plan_resume

    ckpt = tmp_path / "checkpoints"
    (ckpt / "iter_000010").mkdir(parents=True)
    for name in ("mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        (ckpt / "iter_000010" / name).write_bytes(b"")
    done = schedule_state(_run(LRFactor(0, 10, "cosine", 0.0), 10))
    _markers(ckpt, 10, StateLayout(2, "float32"), 1, {}, 0, done)

    def cfg(**kw) -> TrainConfig:  # noqa: ANN003
        return TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")], zero_stage=2, resume=True,
                           output_dir=str(tmp_path), lr_schedule="cosine", **{"min_lr_ratio": 0.0, **kw})

    with pytest.raises(ConfigError, match="min_lr_ratio 0 the steps from 10 to 20 would all train at rate 0"):
        plan_resume(cfg(max_iterations=20), 1, StateLayout(2, "float32"))
    for ok in (cfg(max_iterations=20, min_lr_ratio=0.1), cfg(max_iterations=10, inner_epochs=2)):
        assert plan_resume(ok, 1, StateLayout(2, "float32"))[0].tag == "iter_000010"


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")
@pytest.mark.parametrize(("before", "after"), [("linear", "cosine"), ("cosine", "linear")])
def test_a_resume_that_switches_linear_and_cosine_goes_on_from_the_rate_reached(before, after):
    """lr_schedule linear <-> cosine at a resume: the checkpoint's progress along the decay was read on the other
    curve, so the rate jumped at the resume (warmup 2, step 6 of 20, min_lr_ratio 0.1: linear 0.8 x learning_rate,
    read on the cosine 0.89), listed only as a changed setting. It now goes on from the rate reached along the new
    curve to the same end (as a new horizon or a constant run's decay does), and the resume says so."""
    from training.lr_schedule import LRFactor, horizon_note, schedule_state

    for total in (20, 30):  # the same horizon, and a longer one
        saved = schedule_state(_run(LRFactor(2, 20, before, 0.1), 6))
        reached = 0.1 * LRFactor(2, 20, before, 0.1)(6)
        resumed = _run(LRFactor(2, total, after, 0.1), total, ckpt=6, saved=saved)
        assert resumed.rates[0] == pytest.approx(reached)
        assert all(a > b for a, b in zip(resumed.rates, resumed.rates[1:], strict=False))
        assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.1)
        note = horizon_note(saved, LRFactor(2, total, after, 0.1).resumed(saved, 6), 6, 0.1)
        assert note is not None and note.startswith(f"lr_schedule {after}: the run decayed along {before} so far; "
                                                    f"it goes on from {reached:.3g} at step 6 along {after}"), note
        # a later resume of the switched run, its record taken up on the same line
        later = _run(LRFactor(2, total, after, 0.1), total, ckpt=9, saved=schedule_state(
            _run(LRFactor(2, total, after, 0.1), 9, ckpt=6, saved=saved)))
        assert later.rates == pytest.approx(resumed.rates[3:])
    # in the warmup nothing has decayed yet: the new curve from its start
    warm = schedule_state(_run(LRFactor(4, 20, before, 0.1), 2))
    assert _run(LRFactor(4, 20, after, 0.1), 20, ckpt=2, saved=warm).rates == \
        pytest.approx(_run(LRFactor(4, 20, after, 0.1), 20).rates[2:])


@pytest.mark.parametrize(("before", "after"), [("linear", "cosine"), ("cosine", "linear")])
def test_a_finished_decay_resumed_on_the_other_curve_still_says_its_added_steps_train_at_min_lr_ratio(before, after):
    """A run that had finished its decay, resumed with more iterations and the other curve: its added steps all train
    at min_lr_ratio x learning_rate, as with the same curve, whose note says so and how to train at another rate. The
    switch's note said only "it goes on from 0.02 at step 10 along cosine to min_lr_ratio x learning_rate at step
    20", which reads as a decay still to come."""
    from training.lr_schedule import LRFactor, horizon_note, schedule_state

    done = schedule_state(_run(LRFactor(0, 10, before, 0.2), 10))
    resumed = LRFactor(0, 20, after, 0.2).resumed(done, 10)
    assert [resumed(s) for s in range(10, 20)] == pytest.approx([0.2] * 10)
    note = horizon_note(done, resumed, 10, 0.1)
    assert note is not None and note.startswith(f"lr_schedule {after}: the run decayed along {before} so far"), note
    assert "had finished its decay, so the added steps train at min_lr_ratio 0.2 x learning_rate (0.02)" in note
