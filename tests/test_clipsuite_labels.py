"""Clip suite label quality: two variant names never show the same clip, a progress clip is never a success by the
task's own criterion, and a failed attempt shows no unphysical finger penetration (MuJoCo's signed distances)."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest

from evals.clipsuite import ClipSpec, clip_layout, suite_specs
from evals.contact import finger_penetration
from evals.motions import LIFT_SUCCESS
from evals.scenes import HALF, ZONE_HALF
from evals.variants import plan_clip

SEEDS = range(4)  # the CLI's default suite seed is 0; a few more cover the layouts the suite draws


def _specs(preset: str = "paper"):
    for seed in SEEDS:
        yield from suite_specs(preset, seed)  # type: ignore[arg-type]


def _states(spec: ClipSpec, variant: str | None = None):
    layout = clip_layout(spec.task, spec.seed)
    v = spec.variant if variant is None else variant
    plan = plan_clip(spec.task, spec.pattern, v, layout, spec.frames, np.random.default_rng([spec.seed, 1]))
    return layout, plan.states


def test_push_slip_and_stay_are_different_clips():
    """Both push variants rendered the same stall (the object never moved) under two variant names, so one clip
    counted twice in the reliability figures. stay: the object never moves; slip: it slides part of the way
    towards the target square, the gripper slips off, and it stops well short of the square."""
    specs = [s for p in ("paper", "small") for s in _specs(p) if s.task == "push" and s.pattern == "ineffective_contact"]
    assert specs
    for spec in specs:
        layout, stay = _states(spec, "stay")
        _, slip = _states(spec, "slip")
        assert np.all(stay.objects == stay.objects[0]), spec.name
        track, zone = slip.objects[:, 0], np.asarray(layout.zone[1])
        moved = track[-1] - track[0]
        toward = (zone - track[0, :2]) / np.linalg.norm(zone - track[0, :2])
        assert np.dot(moved[:2], toward) > 0.008 and moved[2] == pytest.approx(0.0), (spec.name, moved)
        assert np.abs(track[-1, :2] - zone).max() > ZONE_HALF, spec.name  # stopped short of the square
        last = int(np.flatnonzero(np.any(track != track[-1], axis=1)).max()) + 1  # the object stops here ...
        assert last < len(track) - 3, spec.name
        gap = np.linalg.norm(slip.gripper[-1, :2] - track[-1, :2])  # ... and the gripper has left it
        assert gap > 0.04 or slip.gripper[-1, 2] > 2 * HALF + 0.05, spec.name


def test_partial_pick_lift_stays_clearly_below_the_lift_success_height():
    """Partial pick_lift clips ended with the object 4-9 cm above the table: lifted, by the instruction ("lift it
    above the table") and by LIFT_SUCCESS, so clips labelled progress showed a success. A partial clip ends with
    the object grasped and raised at most half of LIFT_SUCCESS."""
    specs = [s for p in ("paper", "small") for s in _specs(p) if s.task == "pick_lift" and s.pattern == "partial"]
    assert len(specs) >= 4 * len(SEEDS)
    for spec in specs:
        _, st = _states(spec)
        rise = st.objects[-1, 0, 2] - st.objects[0, 0, 2]
        assert 0.003 < rise < LIFT_SUCCESS / 2, (spec.name, rise)
        assert st.opening[-1] < st.opening[0], spec.name  # grasped: the fingers are closed on it


def test_missed_attempts_keep_the_fingers_out_of_walls_and_objects():
    """A missed grasp or push (the fingers touch nothing) could put a finger through the container's walls (place:
    the miss offset ignored the box) or through a distractor (push: the side-shifted corridor ignored it)."""
    specs = [s for p in ("paper", "small") for s in _specs(p) if s.variant in ("miss", "hover")]
    assert {s.task for s in specs} == {"pick_lift", "push", "place", "stack"}
    for spec in specs:
        layout, st = _states(spec)
        depth = finger_penetration(layout, st)
        assert depth < 1e-3, (spec.name, depth)


def test_rendered_push_slip_and_stay_differ_in_pixels():
    """The rendered clips, not only the plans: the two names no longer give the same frames."""
    from dataclasses import replace

    from evals.clipsuite import render_clip

    spec = next(s for s in suite_specs("paper", 0) if s.task == "push" and s.pattern == "ineffective_contact")
    spec = replace(spec, frames=17)
    slip, stay = (render_clip(replace(spec, variant=v), width=32, height=32) for v in ("slip", "stay"))
    assert np.array_equal(slip[0], stay[0]) and not np.array_equal(slip[-1], stay[-1])


def test_partial_push_stops_clearly_short_of_the_square():
    """A partial push stopped the clock 35-60% of the way through the push, wherever the square was: an object
    10-13 cm from the square's centre ended with its centre inside the square (about 1 partial push in 10, e.g.
    paper seeds 5, 6, 8, 9, 14), pushed onto it as the instruction asks, in clips meant to show progress
    that is not there yet. It now stops at most half way to the square's edge, as push slip does."""
    for seed in range(120):
        layout = clip_layout("push", seed)
        st = plan_clip("push", "partial", "", layout, 81, np.random.default_rng([seed, 1])).states
        track, zone = st.objects[:, 0, :2], np.asarray(layout.zone[1])
        d = (zone - track[0]) / np.linalg.norm(zone - track[0])
        rel = np.abs(track[0] - zone)
        edge = max((rel[i] - ZONE_HALF) / abs(d[i]) for i in range(2) if rel[i] > ZONE_HALF)
        travel = float(np.dot(track[-1] - track[0], d))
        assert np.abs(track[-1] - zone).max() > ZONE_HALF, seed  # its centre is not on the square
        assert 0.005 < travel <= 0.5 * edge + 1e-6, (seed, travel, edge)  # pushed, half way to the edge at most


@pytest.mark.parametrize("task", ["pick_lift", "push", "place", "stack"])
def test_a_floating_object_never_flies_through_the_idle_gripper(task):
    """The gripper idled around its drawn home while the object flew from its start to the goal: in about half of
    the floating clips the object passed within 5 cm of the tool centre, through the fingers (up to 3 cm deep),
    as if handed to the gripper, in clips meant to show an object moving with no gripper near it."""
    for seed in range(40):
        layout = clip_layout(task, seed)
        st = plan_clip(task, "floating", "", layout, 81, np.random.default_rng([seed, 1])).states
        assert np.linalg.norm(st.objects[:, 0] - st.gripper, axis=1).min() > 0.08, seed
        assert finger_penetration(layout, st, ("objects",)) == 0.0, seed
        assert np.abs(st.gripper[:, 0]).max() < 0.22 and st.gripper[:, 2].max() < 0.3, seed  # in view
