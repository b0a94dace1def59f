"""`evals.contact.finger_penetration` poses each frame through `evals.scenes.poser` (as `render_states` does): the
object's yaw (set once) turns it, and each frame's gripper, opening and object positions are its own, none left over
from an earlier frame."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evals.contact import finger_penetration
from evals.scenes import FINGER_HALF, HALF, HIDDEN, OPEN_GAP, Layout, SceneObject, SceneStates

SNUG = HALF + FINGER_HALF[0] + 0.002  # fingers 2 mm off a square-on cube's faces: a turned cube's corners reach in


def _clip(yaw: float, grip: list, opening: list, objects: list) -> tuple[Layout, SceneStates]:
    layout = Layout(objects=(SceneObject("red", "cube", (0.0, 0.0, HALF), yaw),))
    t = len(grip)
    states = SceneStates(gripper=np.array(grip, dtype=float), opening=np.array(opening, dtype=float),
                         objects=np.array(objects, dtype=float)[:, None, :],
                         camera=np.tile([0.0, 0.0, 0.05, 0.95, 90.0, -38.0], (t, 1)),
                         occluder=np.tile(HIDDEN, (t, 1)), simplify=np.zeros(t, dtype=bool))
    return layout, states


@pytest.mark.parametrize("yaw, deep", [(0.0, False), (math.pi / 4, True), (-3 * math.pi / 4, True)])
def test_the_objects_yaw_turns_it_under_the_fingers(yaw, deep):
    layout, states = _clip(yaw, [[0, 0, HALF]], [SNUG], [[0, 0, HALF]])
    depth = finger_penetration(layout, states, ("objects",))
    assert (depth > 0.005) if deep else depth == 0.0, depth


def test_each_frame_is_posed_from_its_own_states():
    """Frame 0 closes on the turned cube; frame 1 opens and frame 2 moves the cube away: only frame 0 penetrates, and
    a clip of the later frames alone, or of frame 0's pose with the cube moved, does not."""
    at, away = [0, 0, HALF], [0.1, 0, HALF]
    layout, states = _clip(math.pi / 4, [at, at, at], [SNUG, OPEN_GAP, SNUG], [at, at, away])
    assert finger_penetration(layout, states, ("objects",)) > 0.005
    later = _clip(math.pi / 4, [at, at], [OPEN_GAP, SNUG], [at, away])
    assert finger_penetration(*later, ("objects",)) == 0.0
    reversed_ = _clip(math.pi / 4, [at, at, at], [OPEN_GAP, SNUG, SNUG], [at, away, at])
    assert finger_penetration(*reversed_, ("objects",)) > 0.005  # the last frame's pose counts too
