"""Scripted (kinematic) gripper motions for the clip-suite tasks.

A task is a :class:`Script`: gripper keyframes on a normalised clock ``u`` in [0, 1] (eased with
smoothstep between keys), an optional interval during which the manipulated object rides with the
gripper, and the two moments the variants care about: ``contact_u`` (the gripper meets the object: the
decisive moment) and ``done_u`` (the object reaches its goal). Variants re-time the clock (partial,
frozen, pause), edit the script (miss, slip, sink through the table) or edit the object track afterwards
(teleport, floating).

Decisions where the issue was silent: pick-and-lift lifts to 16 cm and holds; place and stack lower
the object to its resting height before the fingers open (no drop); push uses closed fingers and
drives the object's centre straight onto the centre of the target square. Pushing and grasping fingers
stop where they touch the object, for its shape and yaw (`evals.contact`; the variants pass ``standoff`` and
``closed``). Place releases the object by
opening the fingers only to ``PLACE_RELEASE`` (1 cm), inside the box's walls: nothing collides in the scene,
and opening fully (``OPEN_GAP``, the walls' own offset from the box centre) put both fingers through the
walls in every place clip, the suite's own interpenetration failure shown in clips labelled ordinary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from evals.scenes import BOX_HALF, BOX_WALL, FINGER_HALF, HALF, OPEN_GAP, PUSH_BACK, Layout

TASKS = ("pick_lift", "push", "place", "stack")
LIFT_Z = 0.16
LIFT_SUCCESS = 0.05
"""pick_lift succeeds when the object is raised at least this far (m; its own height) above where it rested: the
success script raises it 13.5 cm, and a ``partial`` clip stops below half of it (`evals.variants`)."""
CARRY_Z = 0.14
HOVER_Z = 0.12
GRASP_DZ = 0.008             # TCP above the object centre when grasping
CLOSED = HALF + FINGER_HALF[0]  # finger offset when closed on an object
PUSH_CLOSED = 0.012
PUSH_Z = 0.035
SETTLE_FRAMES = 3
PLACE_RELEASE = BOX_HALF - BOX_WALL - FINGER_HALF[0] - 0.004
"""Finger offset when place opens inside the box: 4 mm short of the walls' inner faces (OPEN_GAP is the walls'
own offset, so fully open fingers sank into both walls in every place clip)."""


@dataclass(frozen=True)
class Key:
    """Gripper tool-centre position and finger offset at clock value ``u``."""

    u: float
    pos: tuple[float, float, float]
    opening: float


@dataclass(frozen=True)
class Script:
    """A scripted task execution (see module docstring)."""

    keys: tuple[Key, ...]
    attach: tuple[float, float] | None
    contact_u: float
    done_u: float
    rest_z: float


def goal_position(task: str, layout: Layout, moved: int) -> np.ndarray:
    """Where the moved object's centre ends in a successful execution."""
    start = np.array(layout.objects[moved].pos)
    if task == "pick_lift":
        return np.array([start[0], start[1], LIFT_Z])
    if task == "push":
        assert layout.zone is not None
        return np.array([*layout.zone[1], HALF])
    if task == "place":
        assert layout.container is not None
        return np.array([*layout.container[1], 0.008 + HALF])
    if task == "stack":
        base = layout.objects[1].pos
        return np.array([base[0], base[1], 3 * HALF])
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def _t(*v: float) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))


def task_script(task: str, start: np.ndarray, goal: np.ndarray, home: np.ndarray, *,
                grasp_dz: float = GRASP_DZ, closed: float = CLOSED, standoff: float | None = None,
                push_z: float = PUSH_Z) -> Script:
    """Successful execution of ``task`` moving an object from ``start`` to ``goal`` (object centres).

    ``standoff`` is where a push's tool centre meets the object, behind its centre (`evals.contact.push_standoff`
    for the object's shape, yaw and the push direction; the default suits only a cylinder or a cube pushed
    square-on). ``grasp_dz``/``closed``/``standoff``/``push_z`` also let variants sink the gripper into the
    object or the table (interpenetration) without rewriting the script.
    """
    ox, oy, oz = start
    gx, gy, gz = goal
    hm = _t(*home)
    if task == "pick_lift":
        g = oz + grasp_dz
        keys: tuple[Key, ...] = (Key(0.0, hm, OPEN_GAP), Key(0.22, _t(ox, oy, HOVER_Z), OPEN_GAP),
                                 Key(0.38, _t(ox, oy, g), OPEN_GAP), Key(0.46, _t(ox, oy, g), closed),
                                 Key(0.78, _t(ox, oy, gz + grasp_dz), closed),
                                 Key(1.0, _t(ox, oy, gz + grasp_dz), closed))
        return Script(keys, (0.46, 2.0), contact_u=0.42, done_u=0.78, rest_z=HALF)
    if task in ("place", "stack"):
        g = oz + grasp_dz
        release = PLACE_RELEASE if task == "place" else OPEN_GAP
        keys = (Key(0.0, hm, OPEN_GAP), Key(0.18, _t(ox, oy, HOVER_Z), OPEN_GAP),
                Key(0.32, _t(ox, oy, g), OPEN_GAP), Key(0.40, _t(ox, oy, g), closed),
                Key(0.55, _t(ox, oy, CARRY_Z), closed), Key(0.72, _t(gx, gy, CARRY_Z), closed),
                Key(0.84, _t(gx, gy, gz + grasp_dz), closed), Key(0.90, _t(gx, gy, gz + grasp_dz), release),
                Key(1.0, _t(gx, gy, gz + 0.10), release))
        return Script(keys, (0.40, 0.86), contact_u=0.36, done_u=0.86, rest_z=float(gz))
    if task == "push":
        d = np.array([gx - ox, gy - oy, 0.0])
        d = d / (np.linalg.norm(d) or 1.0)
        s = HALF + 0.014 if standoff is None else standoff
        back = start - d * min(s + 0.05, PUSH_BACK)
        contact, end = start - d * s, goal - d * s
        keys = (Key(0.0, hm, OPEN_GAP), Key(0.20, _t(back[0], back[1], HOVER_Z), PUSH_CLOSED),
                Key(0.34, _t(back[0], back[1], push_z), PUSH_CLOSED),
                Key(0.44, _t(contact[0], contact[1], push_z), PUSH_CLOSED),
                Key(0.88, _t(end[0], end[1], push_z), PUSH_CLOSED),
                Key(1.0, _t(end[0] - 0.03 * d[0], end[1] - 0.03 * d[1], push_z + 0.08), PUSH_CLOSED))
        return Script(keys, (0.44, 0.88), contact_u=0.44, done_u=0.88, rest_z=HALF)
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def smoothstep(x: np.ndarray) -> np.ndarray:
    """Ease-in/ease-out 3x^2 - 2x^3 on [0, 1]."""
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def sample_keys(keys: tuple[Key, ...], us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gripper positions [T,3] and finger offsets [T] at clock values ``us`` (smoothstep between keys)."""
    ku = np.array([k.u for k in keys])
    kp = np.array([k.pos for k in keys], dtype=float)
    ko = np.array([k.opening for k in keys], dtype=float)
    us = np.clip(np.asarray(us, dtype=float), ku[0], ku[-1])
    idx = np.clip(np.searchsorted(ku, us, side="right") - 1, 0, len(ku) - 2)
    span = ku[idx + 1] - ku[idx]
    s = smoothstep(np.where(span > 0, (us - ku[idx]) / np.where(span > 0, span, 1.0), 1.0))
    pos = kp[idx] + (kp[idx + 1] - kp[idx]) * s[:, None]
    opening = ko[idx] + (ko[idx + 1] - ko[idx]) * s
    return pos, opening


def object_track(script: Script, us: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Centre of the manipulated object per frame: at rest, riding with the gripper, then settling."""
    us = np.asarray(us, dtype=float)
    track = np.tile(np.asarray(start, dtype=float), (len(us), 1))
    if script.attach is None:
        return track
    a0, a1 = script.attach
    grip, _ = sample_keys(script.keys, us)
    at0, _ = sample_keys(script.keys, np.array([a0]))
    offset = np.asarray(start, dtype=float) - at0[0]
    released = None
    for t, u in enumerate(us):
        if u < a0:
            continue
        if u <= a1:
            track[t] = grip[t] + offset
            continue
        if released is None:
            at1, _ = sample_keys(script.keys, np.array([a1]))
            released = (t, at1[0] + offset)
        t0, p = released
        k = min(1.0, (t - t0 + 1) / SETTLE_FRAMES)
        track[t] = [p[0], p[1], p[2] + (script.rest_z - p[2]) * k]
    return track


def without_attach(script: Script) -> Script:
    """The same gripper motion, but the object never moves with it."""
    return replace(script, attach=None)
