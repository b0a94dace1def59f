"""Clip suite: preset composition, motion semantics per pattern, rendering, determinism, contact (files and CLI:
test_clipsuite_files.py)."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest

from evals.clipsuite import (
    FAILURE_PATTERNS,
    PATTERN_LABELS,
    ClipSpec,
    clip_layout,
    render_clip,
    suite_specs,
)
from evals.motions import LIFT_Z, TASKS
from evals.scenes import BOX_HALF, BOX_WALL, BOX_WALL_HALF_HEIGHT, FINGER_HALF, HALF, HIDDEN
from evals.variants import VARIANTS, plan_clip

SIDE = 48


def _spec(pattern: str, task: str | None = None, preset: str = "small", seed: int = 0) -> ClipSpec:
    for spec in suite_specs(preset, seed):  # type: ignore[arg-type]
        if spec.pattern == pattern and (task is None or spec.task == task):
            return spec
    raise AssertionError(f"no {pattern}/{task} clip in {preset}")


def _plan(spec: ClipSpec, variant: str | None = None):
    layout = clip_layout(spec.task, spec.seed)
    v = spec.variant if variant is None else variant
    return layout, plan_clip(spec.task, spec.pattern, v, layout, spec.frames, np.random.default_rng([spec.seed, 1]))


# ---------------------------------------------------------------- composition (no rendering)

def test_paper_preset_mirrors_the_paper_counts_and_order():
    specs = suite_specs("paper", 0)
    assert len(specs) == 180
    assert Counter(s.label for s in specs) == {"ordinary": 100, "failure": 57, "unobservable": 3, "progress": 20}
    labels = [s.label for s in specs]
    assert set(labels[:100]) == {"ordinary"}
    assert set(labels[100:160]) == {"failure", "unobservable"}  # the 60 reference-negative clips first
    assert set(labels[160:]) == {"progress"}
    assert {s.pattern for s in specs} == set(PATTERN_LABELS)
    per_pattern = Counter(s.pattern for s in specs)
    assert all(per_pattern[p] >= 4 for p in FAILURE_PATTERNS)
    assert Counter(s.task for s in specs if s.label == "ordinary") == dict.fromkeys(TASKS, 25)
    for pattern, options in VARIANTS.items():  # every sub-variant appears somewhere in the paper suite
        assert {s.variant for s in specs if s.pattern == pattern} == set(options), pattern
    assert len({s.name for s in specs}) == 180 and len({s.seed for s in specs}) == 180
    assert all(s.label == PATTERN_LABELS[s.pattern] for s in specs)


def test_small_preset_covers_every_pattern_with_short_clips():
    specs = suite_specs("small", 0)
    assert {s.pattern for s in specs} == set(PATTERN_LABELS)
    assert {s.label for s in specs} == {"ordinary", "failure", "unobservable", "progress"}
    assert {s.task for s in specs} == set(TASKS)
    assert all(33 <= s.frames <= 49 and s.fps == 16.0 for s in specs)


def test_instructions_name_the_target_and_the_goal():
    for spec in suite_specs("paper", 3)[:8]:
        layout = clip_layout(spec.task, spec.seed)
        assert layout.objects[0].name in spec.instruction
        goal = {"push": layout.zone and layout.zone[0], "place": layout.container and layout.container[0],
                "stack": layout.objects[1].name, "pick_lift": "table"}[spec.task]
        assert goal and goal in spec.instruction


def test_pick_lift_instructions_ask_for_the_height_the_labels_use():
    """"Grasp the X and raise it off the table" was met by the partial clips (raised 0.3-2.5 cm, labelled
    progress): an exact reader could call them successes. Both phrasings now ask for more than the object's own
    height (LIFT_SUCCESS, 5 cm), which the success clips reach (13.5 cm) and the partial ones stay under half of."""
    from evals.motions import LIFT_SUCCESS
    from evals.scenes import HALF

    assert LIFT_SUCCESS == 2 * HALF  # "its own height"
    lifts = [s.instruction for p in ("paper", "small") for seed in range(4) for s in suite_specs(p, seed)
             if s.task == "pick_lift"]
    assert {text.split()[0] for text in lifts} == {"Pick", "Grasp"}  # both phrasings drawn
    assert all("its own height" in text for text in lifts), lifts


def test_specs_are_seeded():
    assert suite_specs("paper", 7) == suite_specs("paper", 7)
    a, b = suite_specs("small", 0), suite_specs("small", 1)
    assert [s.seed for s in a] != [s.seed for s in b]
    assert [s.instruction for s in a] != [s.instruction for s in b]


def test_unknown_preset_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown clip-suite preset 'huge'.*paper, small"):
        suite_specs("huge", 0)  # type: ignore[arg-type]


# ---------------------------------------------------------------- motion semantics per pattern

@pytest.mark.parametrize("task", TASKS)
def test_success_ends_with_the_object_at_its_goal(task):
    spec = _spec("success", task, preset="paper")
    layout, plan = _plan(spec)
    end = plan.states.objects[-1, 0]
    if task == "pick_lift":
        assert end[2] == pytest.approx(LIFT_Z, abs=1e-6)
    elif task == "push":
        assert np.allclose(end[:2], layout.zone[1], atol=1e-6) and end[2] == pytest.approx(HALF)
    elif task == "place":
        assert np.allclose(end[:2], layout.container[1], atol=1e-6) and end[2] < 0.05
    else:
        base = layout.objects[1].pos
        assert np.allclose(end, [base[0], base[1], 3 * HALF], atol=1e-6)
    assert np.linalg.norm(end - plan.states.objects[0, 0]) > 0.05
    assert np.all(plan.states.objects[:, 1:] == plan.states.objects[0, 1:])  # nothing else moves


@pytest.mark.parametrize("task", TASKS)
def test_partial_progress_moves_the_object_but_stops_short(task):
    spec = _spec("success", task, preset="paper")
    layout, success = _plan(spec)
    _, partial = _plan(dataclasses.replace(spec, pattern="partial"))
    start, goal = success.states.objects[0, 0], success.states.objects[-1, 0]
    end = partial.states.objects[-1, 0]
    assert np.linalg.norm(end - start) > 0.01 and np.linalg.norm(end - goal) > 0.02


@pytest.mark.parametrize("pattern,variant", [("approach_no_contact", "miss"), ("approach_no_contact", "hover"),
                                             ("ineffective_contact", "stay"), ("occlusion", "miss"),
                                             ("blur", "stay"), ("text_overlay", "miss")])
@pytest.mark.parametrize("task", TASKS)
def test_failed_attempts_never_move_the_object(pattern, variant, task):
    spec = dataclasses.replace(_spec("success", task, preset="paper"), pattern=pattern)
    _, plan = _plan(spec, variant)
    objects = plan.states.objects
    assert np.all(objects == objects[0])
    assert np.linalg.norm(plan.states.gripper - plan.states.gripper[0], axis=1).max() > 0.05  # the gripper moves


def test_slip_lifts_then_drops_back():
    spec = dataclasses.replace(_spec("success", "pick_lift", preset="paper"), pattern="ineffective_contact")
    _, plan = _plan(spec, "slip")
    z = plan.states.objects[:, 0, 2]
    assert z.max() > HALF + 0.01 and z[-1] == pytest.approx(HALF)


def test_physical_invalidation_patterns():
    base = _spec("success", "place", preset="paper")
    _, tp = _plan(dataclasses.replace(base, pattern="teleport"))
    steps = np.linalg.norm(np.diff(tp.states.objects[:, 0], axis=0), axis=1)
    assert steps.max() > 0.08 and np.count_nonzero(steps) == 1  # one jump, no continuous motion
    _, ip = _plan(dataclasses.replace(base, pattern="interpenetration"))
    assert ip.states.gripper[:, 2].min() < 0.0  # the tool centre goes below the table top
    for pattern in ("motion_without_contact", "floating"):
        _, plan = _plan(dataclasses.replace(base, pattern=pattern))
        obj, grip = plan.states.objects[:, 0], plan.states.gripper
        assert np.linalg.norm(obj[-1] - obj[0]) > 0.05, pattern
        assert np.linalg.norm(obj - grip, axis=1).min() > 0.08, pattern


def test_wrong_object_moves_a_distractor_not_the_target():
    _, plan = _plan(_spec("wrong_object", "stack", preset="paper"))
    objects = plan.states.objects
    assert np.all(objects[:, 0] == objects[0, 0])
    assert np.linalg.norm(objects[-1, 2] - objects[0, 2]) > 0.05


def test_pushed_objects_never_pass_through_another_object():
    """Nothing collides in the scenes, so a layout with an object in the push's path showed the pushed object
    (success, wrong_object) merge with it in clips labelled ordinary."""
    for seed in range(4):
        for spec in suite_specs("paper", seed):
            if spec.task != "push" or spec.label != "ordinary":
                continue
            objects = _plan(spec)[1].states.objects
            moved = objects[:, 1] if spec.pattern == "wrong_object" else objects[:, 0]
            others = np.delete(objects, 1 if spec.pattern == "wrong_object" else 0, axis=1)
            gap = np.linalg.norm((moved[:, None] - others)[..., :2], axis=-1).min()
            assert gap >= 2 * HALF * np.sqrt(2), (spec.name, gap)


def test_a_missed_grasp_keeps_its_open_fingers_out_of_the_target():
    for seed in range(4):
        for spec in suite_specs("paper", seed):
            if spec.variant != "miss" or spec.task == "push":
                continue
            st = _plan(spec)[1].states
            for side in (-1, 1):
                finger = st.gripper + side * np.stack([st.opening, 0 * st.opening, 0 * st.opening], axis=1)
                low = finger[:, 2] - FINGER_HALF[2] < st.objects[:, 0, 2] + HALF  # level with the target
                dist = np.linalg.norm((finger - st.objects[:, 0])[:, :2], axis=1)
                assert dist[low].min(initial=1.0) > HALF * np.sqrt(2), (spec.name, dist[low].min())


def _finger_in_box_walls(layout, states) -> float:
    """Deepest overlap (m) of a finger box with a container wall over the clip (0 when none)."""
    (bx, by), w, t, h = layout.container[1], BOX_HALF, BOX_WALL, BOX_WALL_HALF_HEIGHT
    walls = np.array([(bx + w, by, t, w), (bx - w, by, t, w), (bx, by + w, w, t), (bx, by - w, w, t)])
    deepest = 0.0
    for side in (-1, 1):
        finger = states.gripper + side * np.stack([states.opening, 0 * states.opening, 0 * states.opening], axis=1)
        level = finger[:, 2] - FINGER_HALF[2] < 2 * h  # the finger's bottom below the walls' top
        for cx, cy, sx, sy in walls:
            ox = FINGER_HALF[0] + sx - np.abs(finger[:, 0] - cx)
            oy = FINGER_HALF[1] + sy - np.abs(finger[:, 1] - cy)
            deepest = max(deepest, float(np.where(level, np.minimum(ox, oy), 0.0).clip(0.0).max()))
    return deepest


def test_place_fingers_never_pass_through_the_box_walls():
    """Nothing collides: fully open fingers (OPEN_GAP, the walls' own offset) released every placed object with
    both fingers inside the box walls, and an object about 10 cm from the box could have its grasp put a finger
    through the near wall (layout seeds 144, 256, 276), in clips labelled ordinary."""
    for seed in (0, 144, 256, 276):
        layout = clip_layout("place", seed)
        plan = plan_clip("place", "success", "", layout, 81, np.random.default_rng([seed, 1]))
        assert _finger_in_box_walls(layout, plan.states) < 1e-4, seed
    for spec in suite_specs("paper", 0):
        if spec.task == "place" and spec.label in ("ordinary", "progress", "unobservable"):
            layout, plan = _plan(spec)
            assert _finger_in_box_walls(layout, plan.states) < 1e-4, spec.name


def test_degradation_and_unobservable_plans():
    _, static = _plan(_spec("static"))
    assert np.all(static.states.gripper == static.states.gripper[0])
    _, frozen = _plan(_spec("frozen"))
    g = frozen.states.gripper
    half = len(g) // 2
    assert np.all(g[half + 1:] == g[-1]) and np.linalg.norm(g[half] - g[0]) > 0.01
    out = dataclasses.replace(_spec("out_of_view"))
    _, pan = _plan(out, "pan")
    assert np.linalg.norm(pan.states.camera[-1, :3] - pan.states.camera[0, :3]) > 1.0
    _, occ = _plan(out, "occluded_end")
    assert not np.allclose(occ.states.occluder[-1], HIDDEN) and np.allclose(occ.states.occluder[0], HIDDEN)


# ---------------------------------------------------------------- rendering

def test_same_seed_same_frames_different_seed_differs():
    spec = dataclasses.replace(_spec("success", seed=0), frames=6)
    a = render_clip(spec, width=SIDE, height=SIDE)
    b = render_clip(spec, width=SIDE, height=SIDE)
    assert a.shape == (6, SIDE, SIDE, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b)
    other = dataclasses.replace(_spec("success", seed=1), frames=6)
    assert not np.array_equal(a, render_clip(other, width=SIDE, height=SIDE))


def test_rendered_success_moves_static_does_not_uniform_is_flat():
    success = render_clip(_spec("success"), width=SIDE, height=SIDE).astype(int)
    assert np.abs(success[-1] - success[0]).mean() > 2.0
    assert (np.abs(np.diff(success, axis=0)).mean(axis=(1, 2, 3)) > 0).sum() > len(success) // 2
    static = render_clip(_spec("static"), width=SIDE, height=SIDE)
    assert np.all(static == static[0])
    uniform = render_clip(_spec("uniform"), width=SIDE, height=SIDE)
    assert np.all(uniform == uniform[0, 0, 0])


def test_blur_and_text_and_background_effects_show_in_pixels():
    import cv2

    spec = _spec("blur")
    _, plan = _plan(spec)
    frames = render_clip(spec, width=64, height=64)
    sharpness = np.array([cv2.Laplacian(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), cv2.CV_64F).var() for f in frames])
    assert sharpness[plan.effects.blur].max() < sharpness[~plan.effects.blur].min()

    spec = _spec("text_overlay")
    _, plan = _plan(spec)
    frames = render_clip(spec, width=96, height=96).astype(int)
    green = (frames[..., 1] > 180) & (frames[..., 0] < 90) & (frames[..., 2] < 110)
    assert green[plan.effects.text].sum(axis=(1, 2)).min() > 20 and green[~plan.effects.text].sum() == 0

    spec = _spec("background_simplified")
    layout, plan = _plan(spec)
    frames = render_clip(spec, width=SIDE, height=SIDE)
    flat = np.all(frames == np.array(layout.background_rgb, dtype=np.uint8), axis=-1).mean(axis=(1, 2))
    assert flat[0] == 0 and flat[plan.states.simplify].min() > 0.5


def _finger_depth_in_object(obj, centre, finger) -> float:
    """Deepest point (m) of a finger box's footprint inside an object's footprint (0 when apart): points on a grid."""
    gx, gy = np.meshgrid(np.linspace(-1, 1, 9) * FINGER_HALF[0], np.linspace(-1, 1, 9) * FINGER_HALF[1])
    rel = np.stack([gx.ravel() + finger[0] - centre[0], gy.ravel() + finger[1] - centre[1]], axis=1)
    if obj.shape == "cylinder":
        return float((HALF - np.linalg.norm(rel, axis=1)).max().clip(0.0))
    c, s = np.cos(obj.yaw), np.sin(obj.yaw)
    local = rel @ np.array([[c, -s], [s, c]])  # world offsets into the object's own axes
    return float((HALF - np.abs(local)).min(axis=1).max().clip(0.0))


def test_pushing_fingers_touch_the_object_without_sinking_into_it():
    """The push set the tool centre HALF + 14 mm behind the object's centre whatever the push direction and the
    cube's yaw; the closed fingers reach up to 22 mm from it along x, so in clips labelled ordinary they sank up
    to 14 mm into the pushed object (nothing collides)."""
    for spec in suite_specs("paper", 0):
        if spec.task != "push" or spec.label not in ("ordinary", "progress"):
            continue
        layout, plan = _plan(spec)
        moved = 1 if spec.pattern == "wrong_object" else 0
        st, obj = plan.states, layout.objects[moved]
        deepest, nearest = 0.0, 1.0
        for t in range(len(st.gripper)):
            for side in (-1, 1):
                finger = st.gripper[t] + side * np.array([st.opening[t], 0.0, 0.0])
                if finger[2] - FINGER_HALF[2] >= 2 * HALF:  # above the object
                    continue
                deepest = max(deepest, _finger_depth_in_object(obj, st.objects[t, moved], finger))
                nearest = min(nearest, float(np.linalg.norm((finger - st.objects[t, moved])[:2])))
        assert deepest < 5e-4, (spec.name, deepest)
        assert nearest < HALF * np.sqrt(2) + 0.02, (spec.name, nearest)  # but it does reach the object


@pytest.mark.parametrize("task", ["pick_lift", "place", "stack"])
def test_closed_fingers_grip_a_turned_cube_without_sinking_into_it(task):
    """The fingers closed to HALF from the object's centre whatever its yaw, but a cube turned up to 0.3 rad reaches
    up to 5 mm further along x within the fingers' width: in clips labelled ordinary they sank into its corners."""
    for spec in suite_specs("paper", 0)[:100]:  # the ordinary clips
        if spec.task != task:
            continue
        layout, plan = _plan(spec)
        st = plan.states
        for i, obj in enumerate(layout.objects):
            for side in (-1, 1):
                finger = st.gripper + side * np.stack([st.opening, 0 * st.opening, 0 * st.opening], axis=1)
                level = np.abs(finger[:, 2] - st.objects[:, i, 2]) < FINGER_HALF[2] + HALF
                depth = max((_finger_depth_in_object(obj, st.objects[t, i], finger[t])
                             for t in np.flatnonzero(level)), default=0.0)
                assert depth < 5e-4, (spec.name, i, depth)
