"""Clip variants: turn (task, pattern, variant) into per-frame scene states and image effects.

Each pattern is a small edit of the successful script from :mod:`evals.motions`:

- ``success``: the script as is. ``partial``: the clip ends part-way through transport (the object has
  moved towards the goal but is not there); for pick_lift, grasped and raised only 1.2-2 cm, under half of
  ``evals.motions.LIFT_SUCCESS`` (stopping part-way up left it 4-9 cm above the table: lifted, a success); for
  push, at most half way to the square's edge (`_u_at_travel`: about 1 in 10 ended on the square).
  ``control_success``: a success with a benign disturbance: variant ``pause`` (the gripper holds the object
  still for a while, then finishes) or ``brief_occlusion`` (an occluder passes during transport; contact and
  the outcome stay visible).
- ``approach_no_contact``: variant ``miss`` (the fingers close 7-9 cm beside the object) or ``hover``
  (the gripper stops above the object and leaves). ``ineffective_contact``: the fingers close on the
  object but it stays (``stay``) or rises briefly and drops back (``slip``); for push the gripper stalls
  against an object that does not move (``stay``) or pushes it 2-3 cm and slips off, the object stopping
  well short of the square (``slip``). ``wrong_object``: the script runs on a distractor.
- ``static``: every frame is the first frame. ``frozen``: motion for half the clip, stopping before
  contact, then identical frames.
- ``occlusion`` / ``blur``: a failed attempt (``miss`` or ``stay``) whose decisive moment is hidden by a
  dark panel between the camera and the object, or by a strong Gaussian blur; the failed outcome is
  visible again afterwards. ``text_overlay``: a failed attempt with "TASK COMPLETE" drawn from the
  decisive moment on.
- ``background_simplified``: after the first frames, table and objects become one flat colour while the
  gripper keeps moving.
- ``teleport``: the object jumps to its goal right after the gripper reaches it. ``interpenetration``:
  the fingers sink into the table and through the object, which then moves with them.
  ``motion_without_contact``: the object follows the success path with the gripper 14 cm away.
  ``floating``: the object rises and travels on its own while the gripper idles clear of it (`_idling`).
- ``uniform``: every frame one flat colour (nothing is rendered).
- ``out_of_view``: a successful attempt whose decisive part is never seen: the camera pans away before
  contact (``pan``) or an occluder arrives before contact and stays to the end (``occluded_end``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from evals.contact import CONTACT_GAP, fingers_clear_path, grasp_closed, gripper_clearance, push_standoff
from evals.motions import (
    CARRY_Z,
    HOVER_Z,
    PUSH_CLOSED,
    Key,
    Script,
    goal_position,
    object_track,
    sample_keys,
    smoothstep,
    task_script,
    without_attach,
)
from evals.scenes import FINGER_HALF, HALF, HIDDEN, OPEN_GAP, ZONE_HALF, Layout, SceneStates, camera_forward

FINGER_CLEARANCE = HALF * np.sqrt(2) + float(np.hypot(FINGER_HALF[0], FINGER_HALF[1])) + 0.005
"""Least distance from a missed grasp's open finger to the target's centre (both half diagonals and 5 mm)."""

VARIANTS: dict[str, tuple[str, ...]] = {
    "control_success": ("pause", "brief_occlusion"),
    "approach_no_contact": ("miss", "hover"),
    "ineffective_contact": ("stay", "slip"),
    "occlusion": ("miss", "stay"),
    "blur": ("miss", "stay"),
    "text_overlay": ("miss", "stay"),
    "out_of_view": ("pan", "occluded_end"),
}


@dataclass
class Effects:
    """Image-space effects applied after rendering."""

    blur: np.ndarray                              # [T] bool: Gaussian-blur these frames
    text: np.ndarray                              # [T] bool: draw "TASK COMPLETE" on these frames
    uniform_rgb: tuple[int, int, int] | None = None  # every frame this flat colour (nothing rendered)


@dataclass
class ClipPlan:
    """Everything needed to render one clip."""

    states: SceneStates
    effects: Effects


def _window(us: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (us >= lo) & (us <= hi)


def _camera_pos(cam: np.ndarray) -> np.ndarray:
    return cam[:3] - cam[3] * camera_forward(cam[4], cam[5])


def _occluder_track(cams: np.ndarray, focus: np.ndarray, active: np.ndarray, toward_camera: float = 0.4
                    ) -> np.ndarray:
    """Occluder centre per frame: on the focus-to-camera line (``toward_camera`` of the way) while active,
    sliding in over 3 frames; the closer to the camera, the more of the view it hides."""
    out = np.tile(HIDDEN, (len(cams), 1)).astype(float)
    run = 0
    for t in range(len(cams)):
        if not active[t]:
            run = 0
            continue
        run += 1
        cam_pos = _camera_pos(cams[t])
        a = np.radians(cams[t][4])
        right = np.array([np.sin(a), -np.cos(a), 0.0])
        slide = 1.0 - min(1.0, run / 3.0)
        out[t] = focus + (cam_pos - focus) * toward_camera + right * 0.4 * slide
    return out


def _miss_offsets(layout: Layout, start: np.ndarray, rng: np.random.Generator,
                  push_dir: np.ndarray | None = None) -> list[np.ndarray]:
    """Lateral offsets for a missed attempt, best first (farthest from every other object); for a push,
    perpendicular to the push direction so the gripper slides past the object. For a grasp, the open
    fingers (at +-OPEN_GAP along x) must also clear the target itself: a 7-9 cm offset along x alone put
    one finger through it, showing interpenetration in a clip meant to show no contact. The drawn 7-9 cm
    come first, then 11, 6 and 13 cm (a push's also turned 30 degrees from square): the caller keeps the first
    whose whole path touches nothing."""
    others = [np.array(o.pos) for o in layout.objects if not np.allclose(o.pos, start)]
    dist = rng.uniform(0.07, 0.09)
    if push_dir is None:
        tiers = [rng.permutation(8) * (np.pi / 4)]
        fingers = [np.array([OPEN_GAP, 0.0, 0.0]), np.array([-OPEN_GAP, 0.0, 0.0])]
    else:  # square to the push first, then turned 30 degrees (the corridor shifted along the push)
        a = float(np.arctan2(push_dir[1], push_dir[0]))
        tiers = [a + np.array([np.pi / 2, -np.pi / 2]), a + np.array([np.pi / 3, -np.pi / 3, 2 * np.pi / 3, -2 * np.pi / 3])]
        fingers = []
    out = []
    for r, angles in ((r, angles) for r in (dist, 0.11, 0.06, 0.13) for angles in tiers):
        ranked: list[tuple[float, int, np.ndarray]] = []
        for ang in angles:
            off = np.array([np.cos(ang), np.sin(ang), 0.0]) * r
            if any(float(np.linalg.norm((off + f)[:2])) < FINGER_CLEARANCE for f in fingers):
                continue
            d = min((float(np.linalg.norm(start + off + f - q)) for q in others for f in [np.zeros(3), *fingers]),
                    default=1.0)
            ranked.append((-d, len(ranked), off))
        out += [off for *_, off in sorted(ranked, key=lambda x: (x[0], x[1]))]
    return out


def _missed(task: str, layout: Layout, start: np.ndarray, goal: np.ndarray, home: np.ndarray,
            rng: np.random.Generator) -> Script:
    """A missed grasp or push whose fingers touch nothing on the way: an offset that only kept the grasp point
    away from the other objects could put a finger through the container's walls (place) or a push's
    side-shifted corridor through a distractor, interpenetration in clips labelled a plain miss."""
    push_dir = (goal - start) if task == "push" else None
    offsets = _miss_offsets(layout, start, rng, push_dir)
    strokes = (1.0, 0.5, 0.2) if task == "push" else (1.0,)  # a push may also stop part way past the object
    for stroke, off in ((k, off) for k in strokes for off in offsets):
        g = (start + (goal - start) * stroke) + off if task in ("pick_lift", "push") else goal
        script = without_attach(task_script(task, start + off, g, home))
        grip, opening = sample_keys(script.keys, np.linspace(0.0, 1.0, 241))
        if fingers_clear_path(layout, grip, opening):
            return script
    raise RuntimeError(f"no missed {task} path clears every object and wall (offsets tried: {len(offsets)})")


def _script(task: str, layout: Layout, moved: int, goal: np.ndarray, home: np.ndarray) -> Script:
    """The successful script for object ``moved``: a push touches it (its shape, yaw and the push direction), a
    grasp closes the fingers onto it (a turned cube keeps them further apart)."""
    obj = layout.objects[moved]
    start = np.array(obj.pos, dtype=float)
    if task != "push":
        return task_script(task, start, goal, home, closed=grasp_closed(obj.shape, obj.yaw))
    return task_script(task, start, goal, home,
                       standoff=push_standoff(obj.shape, obj.yaw, goal - start, PUSH_CLOSED))


def _failed_attempt(task: str, variant: str, layout: Layout, moved: int, goal: np.ndarray,
                    home: np.ndarray, rng: np.random.Generator) -> Script:
    """Scripts for approach_no_contact / ineffective_contact (and the failures behind occlusion etc.)."""
    start = np.array(layout.objects[moved].pos, dtype=float)
    if variant == "miss":
        return _missed(task, layout, start, goal, home, rng)
    if variant == "hover":
        hx, hy = start[0], start[1]
        keys = (Key(0.0, tuple(home), OPEN_GAP), Key(0.3, (hx, hy, HOVER_Z), OPEN_GAP),
                Key(0.5, (hx, hy, start[2] + 0.075), OPEN_GAP), Key(0.72, (hx, hy, start[2] + 0.075), OPEN_GAP),
                Key(1.0, tuple(home), OPEN_GAP))
        return Script(keys, None, contact_u=0.5, done_u=1.0, rest_z=HALF)
    base = _script(task, layout, moved, goal, home)
    if task == "push":
        return _failed_push(base, variant, start, goal, rng)
    if variant == "slip":
        a0 = base.attach[0] if base.attach else 0.4
        return replace(base, attach=(a0, a0 + 0.1), rest_z=HALF)
    return without_attach(base)  # "stay"


def _failed_push(base: Script, variant: str, start: np.ndarray, goal: np.ndarray, rng: np.random.Generator) -> Script:
    """``stay``: the gripper stalls against (touching) an object that does not move, then backs off. ``slip``: it
    pushes the object 2-3 cm (at most half way to the square's edge, so it stops clearly short of it), then
    slips up off its back face and away; the object stays where it was left. Both variants used to be the stall,
    one clip under two names."""
    c = base.keys[3]
    d = np.array(base.keys[4].pos) - np.array(c.pos)
    d = d / (np.linalg.norm(d) or 1.0)
    if variant != "slip":
        stall = tuple(np.array(c.pos) + d * CONTACT_GAP)
        off = tuple(np.array(c.pos) - d * 0.03 + np.array([0, 0, 0.08]))
        return replace(base, keys=(*base.keys[:4], Key(0.8, stall, c.opening), Key(1.0, off, c.opening)), attach=None)
    slide = min(rng.uniform(0.02, 0.03), 0.5 * _to_square_edge(start, goal, d))
    slid = np.array(c.pos) + d * slide
    up = slid - d * 0.004 + np.array([0.0, 0.0, 2 * HALF + 0.02])  # fingers rise clear of the top: it slipped off
    off = slid - d * 0.04 + np.array([0.0, 0.0, 0.08])
    keys = (*base.keys[:4], Key(0.62, tuple(slid), c.opening), Key(0.74, tuple(up), c.opening),
            Key(1.0, tuple(off), c.opening))
    return replace(base, keys=keys, attach=(c.u, 0.62), done_u=1.0)


def _to_square_edge(start: np.ndarray, goal: np.ndarray, d: np.ndarray) -> float:
    """Distance along ``d`` from ``start`` to where the object's centre would enter the target square (``goal`` its
    centre, ZONE_HALF its half side)."""
    rel = np.abs(start[:2] - goal[:2])
    steps = [(rel[i] - ZONE_HALF) / abs(d[i]) for i in range(2) if abs(d[i]) > 1e-9 and rel[i] > ZONE_HALF]
    return float(max(steps, default=0.0))


def _u_at_rise(script: Script, rise: float) -> float:
    """Clock value at which a grasped object has risen ``rise`` (m) above where it was picked up. Partial pick_lift
    clips used to stop 35-60% of the way up, 4-9 cm above the table: lifted, a success by LIFT_SUCCESS."""
    a0 = script.attach[0] if script.attach else script.contact_u
    grid = np.linspace(a0, script.done_u, 801)
    z = sample_keys(script.keys, grid)[0][:, 2]
    return float(np.interp(rise, z - z[0], grid))


def _u_at_travel(script: Script, travel: float) -> float:
    """Clock value at which a pushed object has moved ``travel`` (m, in the table's plane) from where the push
    met it. Partial push clips used to stop 35-60% of the way through the push wherever the square was: about 1
    in 10 ended with the object's centre on the square (pushed onto it, a success by the instruction)."""
    a0 = script.attach[0] if script.attach else script.contact_u
    grid = np.linspace(a0, script.done_u, 801)
    xy = sample_keys(script.keys, grid)[0][:, :2]
    return float(np.interp(travel, np.linalg.norm(xy - xy[0], axis=1), grid))


IDLE_HOMES = tuple(np.array([x, y, z]) for z in (0.19, 0.25) for x in (-0.16, -0.08, 0.0, 0.08, 0.16)
                   for y in (-0.1, -0.02))
"""Where a floating clip's gripper may idle instead of its drawn home, when the object's flight passes it."""


def _idling(home: np.ndarray, drift: np.ndarray, flight: np.ndarray) -> Script:
    """The gripper of a floating clip: from ``home`` by ``drift`` and back, while the object flies along
    ``flight`` (centres on a dense clock). The drawn home often sat on the flight (the object passed through the
    fingers in about half of the clips, up to 3 cm deep, as if handed to the gripper): a home whose path keeps 1 cm
    clear is kept, else the `IDLE_HOMES` one that keeps the most."""
    def script(at: np.ndarray) -> Script:
        return Script((Key(0.0, tuple(at), OPEN_GAP), Key(0.5, tuple(at + drift), OPEN_GAP),
                       Key(1.0, tuple(at), OPEN_GAP)), None, 0.3, 0.75, HALF)

    def gap(at: np.ndarray) -> float:
        return gripper_clearance(sample_keys(script(at).keys, np.linspace(0.0, 1.0, len(flight)))[0], flight)

    return script(home if gap(home) >= 0.01 else max(IDLE_HOMES, key=gap))


def plan_clip(task: str, pattern: str, variant: str, layout: Layout, frames: int,
              rng: np.random.Generator) -> ClipPlan:
    """Per-frame states and effects for one clip; all randomness comes from ``rng``."""
    T = frames
    us = np.linspace(0.0, 1.0, T)
    starts = np.array([o.pos for o in layout.objects], dtype=float)
    moved = 0
    if pattern == "wrong_object":
        moved = 2 if task == "stack" else 1
    goal = goal_position(task, layout, moved)
    home = np.array([rng.uniform(-0.1, 0.1), rng.uniform(-0.1, -0.02), rng.uniform(0.17, 0.21)])
    cams = np.tile(layout.camera.as_array(), (T, 1))
    occ_active = np.zeros(T, dtype=bool)
    occ_near = 0.4
    occ_focus = starts[moved] + np.array([0.0, 0.0, 0.03])
    simplify = np.zeros(T, dtype=bool)
    blur = np.zeros(T, dtype=bool)
    text = np.zeros(T, dtype=bool)
    uniform_rgb = None
    script = _script(task, layout, moved, goal, home)
    obj_path: np.ndarray | None = None     # explicit object track overriding the script's
    grip_offset = np.zeros(3)

    if pattern == "partial":
        a0 = script.attach[0] if script.attach else script.contact_u
        if task == "pick_lift":  # grasped, the lift just begun: clearly under LIFT_SUCCESS (a success otherwise)
            us = np.linspace(0.0, _u_at_rise(script, rng.uniform(0.012, 0.02)), T)
        else:
            end = a0 + rng.uniform(0.35, 0.6) * (script.done_u - a0)
            if task == "push":  # at most half way to the square's edge, as push slip (on the square otherwise)
                d = (goal - starts[moved])[:2] / np.linalg.norm((goal - starts[moved])[:2])
                end = min(end, _u_at_travel(script, 0.5 * _to_square_edge(starts[moved], goal, d)))
            us = np.linspace(0.0, end, T)
    elif pattern == "control_success":
        mid = (script.contact_u + script.done_u) / 2 + 0.04
        if variant == "pause":
            us = np.interp(us, [0.0, 0.45, 0.7, 1.0], [0.0, mid, mid, 1.0])
        else:
            occ_active = _window(us, mid - 0.08, mid + 0.06)
            occ_focus = (starts[moved] + goal) / 2
    elif pattern == "approach_no_contact" or pattern == "ineffective_contact":
        script = _failed_attempt(task, variant, layout, moved, goal, home, rng)
    elif pattern in ("occlusion", "blur", "text_overlay"):
        script = _failed_attempt(task, variant, layout, moved, goal, home, rng)
        window = _window(us, script.contact_u - 0.1, script.contact_u + 0.2)
        if pattern == "occlusion":
            occ_active = window
        elif pattern == "blur":
            blur = window
        else:
            text = us >= script.contact_u
    elif pattern == "static":
        us = np.zeros(T)
    elif pattern == "frozen":
        uf = rng.uniform(0.15, script.contact_u - 0.08)
        us = np.minimum(np.linspace(0.0, uf / 0.5, T), uf)
    elif pattern == "background_simplified":
        script = without_attach(script)
        simplify = np.arange(T) >= max(1, round(0.12 * T))
    elif pattern == "teleport":
        final = goal
        jump = (script.attach[0] if script.attach else script.contact_u) + 0.04
        obj_path = np.where((us >= jump)[:, None], final, starts[moved])
        script = without_attach(script)
    elif pattern == "interpenetration":
        if task == "push":
            script = task_script(task, starts[moved], goal, home, standoff=0.0, push_z=-0.005)
        else:
            script = task_script(task, starts[moved], goal, home, grasp_dz=-0.03, closed=0.01)
    elif pattern == "motion_without_contact":
        ang = rng.uniform(0, np.pi)  # away from the camera side, so the gripper stays small and in view
        grip_offset = np.array([0.14 * np.cos(ang), 0.14 * np.sin(ang), 0.05])
    elif pattern == "floating":
        s, g = starts[moved], goal
        lift: tuple[Key, ...] = (Key(0.0, tuple(s), 0), Key(0.3, tuple(s), 0))
        if task == "pick_lift":
            lift += (Key(0.75, tuple(g), 0), Key(1.0, tuple(g), 0))
        else:
            lift += (Key(0.5, (s[0], s[1], CARRY_Z), 0), Key(0.75, (g[0], g[1], CARRY_Z), 0),
                     Key(0.9, tuple(g), 0), Key(1.0, tuple(g), 0))
        obj_path, _ = sample_keys(lift, us)
        drift = np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.03, 0.03), -0.04])
        script = _idling(home, drift, sample_keys(lift, np.linspace(0.0, 1.0, 241))[0])
    elif pattern == "uniform":
        uniform_rgb = tuple(int(v) for v in rng.integers(0, 256, size=3))
        us = np.zeros(T)
    elif pattern == "out_of_view":
        if variant == "pan":
            a = np.radians(cams[0][4])
            right = np.array([np.sin(a), -np.cos(a), 0.0])
            k = smoothstep((us - (script.contact_u - 0.22)) / 0.16)
            cams[:, :3] += right[None, :] * 1.2 * k[:, None]
        else:
            occ_active = us >= script.contact_u - 0.1
            occ_focus, occ_near = (starts[moved] + goal) / 2, 0.6
    elif pattern not in ("success", "wrong_object"):
        raise ValueError(f"unknown pattern {pattern!r}")

    grip, opening = sample_keys(script.keys, us)
    objects = np.tile(starts, (T, 1, 1))
    objects[:, moved] = obj_path if obj_path is not None else object_track(script, us, starts[moved])
    states = SceneStates(gripper=grip + grip_offset, opening=opening, objects=objects, camera=cams,
                         occluder=_occluder_track(cams, occ_focus, occ_active, occ_near), simplify=simplify)
    return ClipPlan(states, Effects(blur=blur, text=text, uniform_rgb=uniform_rgb))  # type: ignore[arg-type]


def apply_effects(frames: np.ndarray, effects: Effects) -> np.ndarray:
    """Blur / text overlay in place on rendered frames (uint8 [T,H,W,3]); returns the frames."""
    import cv2

    _, h, w, _ = frames.shape
    sigma = max(2.0, w / 24)
    for t in np.flatnonzero(effects.blur):
        frames[t] = cv2.GaussianBlur(frames[t], (0, 0), sigmaX=sigma, sigmaY=sigma)
    if effects.text.any():
        label, font = "TASK COMPLETE", cv2.FONT_HERSHEY_SIMPLEX
        (tw, th), _ = cv2.getTextSize(label, font, 1.0, 2)
        scale = 0.85 * w / tw
        thick = max(1, round(2 * scale))
        (tw, th), _ = cv2.getTextSize(label, font, scale, thick)
        org = ((w - tw) // 2, int(h * 0.18) + th)
        for t in np.flatnonzero(effects.text):
            img = np.ascontiguousarray(frames[t])
            for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1)):  # outline (same thickness: same glyph advance)
                cv2.putText(img, label, (org[0] + dx, org[1] + dy), font, scale, (0, 0, 0), thick, cv2.LINE_AA)
            cv2.putText(img, label, org, font, scale, (40, 230, 60), thick, cv2.LINE_AA)
            frames[t] = img
    return frames
