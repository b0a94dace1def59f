"""Footprint geometry for scripted contact: how far behind an object the fingers stop when pushing, and where they
stop when closing on it.

Nothing collides in the scenes (``contype=0``), so a scripted push must put the fingers against the object
by construction. The fingers are two boxes along world x (the gripper never turns) and the object a cube of
any yaw or a cylinder, so the distance at which they touch depends on the push direction and the yaw: a
fixed standoff sank the fingers up to 14 mm into the pushed object, and a fixed closing offset up to 5 mm into
the corners of a turned cube.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from evals.scenes import (
    BOX_HALF,
    BOX_WALL,
    BOX_WALL_HALF_HEIGHT,
    FINGER_HALF,
    HALF,
    OPEN_GAP,
    Layout,
    SceneStates,
    poser,
    scene_xml,
)

CONTACT_GAP = 0.001
"""Clearance left between the fingers and a pushed object (m): touching at a frame's resolution."""
GRIPPER_REACH = math.hypot(OPEN_GAP + 0.015, 0.016)
"""Horizontal reach of the gripper from its tool centre: the palm's half diagonal (`evals.scenes.scene_xml`)."""


def _corners(centre: np.ndarray, half: tuple[float, float], yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    local = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=float) * np.asarray(half, dtype=float)
    return np.asarray(centre, dtype=float)[:2] + local @ np.array([[c, s], [-s, c]])


def _boxes_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Separating-axis test of two convex quadrilaterals (corners [4,2])."""
    for poly in (a, b):
        for i in range(4):
            edge = poly[(i + 1) % 4] - poly[i]
            axis = np.array([-edge[1], edge[0]])
            pa, pb = a @ axis, b @ axis
            if pa.max() <= pb.min() or pb.max() <= pa.min():
                return False
    return True


def _circle_box_overlap(centre: np.ndarray, radius: float, box_centre: np.ndarray, half: tuple[float, float]
                        ) -> bool:
    """Circle against an axis-aligned box."""
    rel = np.asarray(centre, dtype=float)[:2] - np.asarray(box_centre, dtype=float)[:2]
    nearest = np.clip(rel, -np.asarray(half), np.asarray(half))
    return float(np.linalg.norm(rel - nearest)) < radius


def fingers_overlap(shape: str, yaw: float, offset: np.ndarray, opening: float, gap: float = 0.0) -> bool:
    """True when a finger footprint (grown by ``gap``) overlaps the object's, the tool centre being ``offset``
    (xy) from the object's centre and the fingers ``opening`` from the tool centre along x."""
    half = (FINGER_HALF[0] + gap, FINGER_HALF[1] + gap)
    for side in (-1.0, 1.0):
        finger = np.asarray(offset, dtype=float)[:2] + np.array([side * opening, 0.0])
        if shape == "cylinder":
            hit = _circle_box_overlap(np.zeros(2), HALF, finger, half)
        else:
            hit = _boxes_overlap(_corners(np.zeros(2), (HALF, HALF), yaw), _corners(finger, half, 0.0))
        if hit:
            return True
    return False


def push_standoff(shape: str, yaw: float, direction: np.ndarray, opening: float, gap: float = CONTACT_GAP) -> float:
    """Least distance behind the object's centre (along ``direction``, xy) at which the fingers, ``opening``
    apart from the tool centre, clear the object by ``gap``: where a push touches it. Bisection (overlap along
    the line is one interval around the centre: each finger overlaps the object there)."""
    d = np.asarray(direction, dtype=float)[:2]
    d = d / (float(np.linalg.norm(d)) or 1.0)
    far = 2 * (HALF * math.sqrt(2) + math.hypot(opening + FINGER_HALF[0], FINGER_HALF[1]) + gap)
    return _first_clear(far, lambda mid: fingers_overlap(shape, yaw, -d * mid, opening, gap))


def grasp_closed(shape: str, yaw: float) -> float:
    """Finger offset from the tool centre when the fingers close on an object centred between them: they touch it
    (``HALF + FINGER_HALF[0]`` for a cylinder or a square-on cube; more for a turned cube, whose corners reach
    further along x within the fingers' width)."""
    return _first_clear(HALF * math.sqrt(2) + FINGER_HALF[0] + 0.001,
                        lambda mid: fingers_overlap(shape, yaw, np.zeros(2), mid))


def _first_clear(far: float, overlaps: Callable[[float], bool]) -> float:
    """The least distance in [0, `far`] at which `overlaps` is false, by 40 halvings (it overlaps below that distance,
    clears above it): the upper end of the last interval, which clears."""
    lo, hi = 0.0, far
    for _ in range(40):
        mid = (lo + hi) / 2
        if overlaps(mid):
            lo = mid
        else:
            hi = mid
    return hi


def gripper_clearance(grip: np.ndarray, obj: np.ndarray) -> float:
    """Least clearance (m) over a clip between the gripper (tool centres [T,3]) and a moving object (centres
    [T,3]): per frame the larger of the horizontal gap (both reaches apart: `GRIPPER_REACH`, the object's half
    diagonal) and the vertical one (the object's top below the fingers' bottom). Negative where they may meet."""
    across = np.linalg.norm((grip - obj)[:, :2], axis=1) - GRIPPER_REACH - HALF * math.sqrt(2)
    below = (grip[:, 2] - FINGER_HALF[2]) - (obj[:, 2] + HALF)
    return float(np.maximum(across, below).min())


def fingers_clear_path(layout: Layout, grip: np.ndarray, opening: np.ndarray, gap: float = 0.002) -> bool:
    """True when neither finger (grown by ``gap``) overlaps an object or the container (walls, floor) in any frame (``grip``
    [T,3] tool centres, ``opening`` [T] finger offsets; the objects where the layout puts them). Footprints are
    compared only where a finger's bottom is below the obstacle's top: a scripted motion that must touch nothing
    (a missed grasp or push) is checked with it before it is used."""
    bottom = grip[:, 2] - FINGER_HALF[2]
    for obj in layout.objects:
        for t in np.flatnonzero(bottom < obj.pos[2] + HALF + gap):
            if fingers_overlap(obj.shape, obj.yaw, grip[t, :2] - np.asarray(obj.pos[:2]), float(opening[t]), gap):
                return False
    if layout.container is not None:
        (bx, by), w, th = layout.container[1], BOX_HALF, BOX_WALL
        top = 2 * BOX_WALL_HALF_HEIGHT
        parts = ((bx + w, by, th, w + th, top), (bx - w, by, th, w + th, top), (bx, by + w, w + th, th, top),
                 (bx, by - w, w + th, th, top), (bx, by, w, w, 2 * th))  # four walls, then the floor
        for side in (-1.0, 1.0):
            fx = grip[:, 0] + side * opening
            for cx, cy, sx, sy, sz in parts:
                hit = ((np.abs(fx - cx) < FINGER_HALF[0] + sx + gap) & (np.abs(grip[:, 1] - cy) < FINGER_HALF[1] + sy + gap))
                if np.any(hit & (bottom < sz + gap)):
                    return False
    return True


def finger_penetration(layout: Layout, states: SceneStates, targets: tuple[str, ...] = ("box", "objects", "table"),
                       skip_object: int | None = None) -> float:
    """Deepest penetration (m, 0 when none) of either finger into the ``targets`` over a clip, from MuJoCo's signed
    geom distances on the scene as rendered (``mj_geomDistance``: the scene's ``contype=0`` turns off contacts, not
    the distance query). ``box``: the container's walls and floor; ``objects``: every object except ``skip_object``
    (the one the script grasps); ``table``: the table top."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(scene_xml(layout))
    data = mujoco.MjData(model)
    names = [model.geom(i).name for i in range(model.ngeom)]
    geoms = [i for i, n in enumerate(names) if ("box" in targets and n.startswith("box"))
             or ("table" in targets and n == "table")]
    if "objects" in targets:
        for k in range(len(layout.objects)):
            if k != skip_object:
                body = model.body(f"obj{k}")
                geoms += range(body.geomadr[0], body.geomadr[0] + body.geomnum[0])
    fingers = (model.geom("fl").id, model.geom("fr").id)
    pose = poser(model, data, layout)
    deepest = 0.0
    for t in range(len(states.gripper)):
        pose(states, t)
        mujoco.mj_kinematics(model, data)
        for f in fingers:
            for g in geoms:
                deepest = max(deepest, -mujoco.mj_geomDistance(model, data, f, g, 0.01, None))
    return deepest
