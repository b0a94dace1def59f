"""Tabletop scenes for the clip suite: seeded layouts, MJCF text and MuJoCo offscreen rendering.

Everything that moves is kinematic: the gripper and the objects are mocap bodies and the two fingers
are slide joints under the gripper, so a clip is rendered by writing poses for each frame, calling
``mj_forward`` and rendering (no physics stepping, so rendering is exactly repeatable). Nothing collides
(``contype=0``); contact is only what the scripted motion shows.

Decisions where the issue was silent:
- The table top is the plane z = 0; cubes and cylinders are 5 cm tall; the workspace is 40 x 30 cm.
- Colours are unique per scene, so "the red cube" names exactly one object.
- The camera is a MuJoCo free camera (lookat, distance, azimuth, elevation) so pans are one array per
  clip; the nominal view is jittered per seed.
- Background simplification renders a segmentation pass and paints every non-gripper pixel one flat
  colour (so the table and the objects vanish while the gripper keeps moving).
- Nothing collides, so the scripted fingers must stay out of the container by construction: a place
  layout keeps every object far enough from the box that the open fingers grasping it clear the box's
  walls (`fingers_clear_box`; with only the 10 cm centre spacing, about 1 in 100 place layouts put a
  finger through the near wall during the grasp), and place opens the fingers inside the walls on release
  (`evals.motions.PLACE_RELEASE`).
- The renderer is created lazily per clip; MUJOCO_GL is read by MuJoCo itself, never here. A failure to
  create the GL context becomes :class:`RenderError` naming the likely fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.85, 0.12, 0.10), "blue": (0.12, 0.28, 0.85), "green": (0.13, 0.65, 0.20),
    "yellow": (0.95, 0.82, 0.10), "purple": (0.55, 0.20, 0.70), "orange": (0.95, 0.50, 0.08),
}
CONTAINER_COLOURS: dict[str, tuple[float, float, float]] = {
    "white": (0.92, 0.92, 0.90), "brown": (0.50, 0.33, 0.18), "grey": (0.45, 0.45, 0.48),
}
ZONE_COLOURS: dict[str, tuple[float, float, float]] = {
    "black": (0.08, 0.08, 0.08), "pink": (0.95, 0.55, 0.70), "cyan": (0.15, 0.80, 0.85),
}
HALF = 0.025            # half extent of every object (cube half side, cylinder radius and half height)
OPEN_GAP = 0.055        # finger centre offset from the gripper axis when open
FINGER_HALF = (0.006, 0.012, 0.03)
WORKSPACE = (0.16, 0.13)  # |x| and |y| bounds for object centres
HIDDEN = np.array([0.0, 0.0, -5.0])  # where the occluder waits when not in use
ZONE_HALF = 0.055       # push target square: half side
BOX_HALF = 0.055        # container: wall centre offset from the box centre (and half length of a wall)
BOX_WALL = 0.004        # container: half thickness of a wall (and of the floor)
BOX_WALL_HALF_HEIGHT = 0.025
MAX_SIDE = 1024
"""Largest frame width or height: the offscreen framebuffer of `scene_xml` (MuJoCo refuses larger renders)."""


class RenderError(RuntimeError):
    """MuJoCo could not build or render a scene (most often: no headless GL context)."""


@dataclass(frozen=True)
class SceneObject:
    """One movable object on the table."""

    colour: str
    shape: str  # "cube" | "cylinder"
    pos: tuple[float, float, float]
    yaw: float

    @property
    def name(self) -> str:
        return f"{self.colour} {self.shape}"


@dataclass(frozen=True)
class Camera:
    """Free-camera parameters (MuJoCo convention: degrees, negative elevation looks down)."""

    lookat: tuple[float, float, float] = (0.0, 0.0, 0.05)
    distance: float = 0.95
    azimuth: float = 90.0
    elevation: float = -38.0

    def as_array(self) -> np.ndarray:
        return np.array([*self.lookat, self.distance, self.azimuth, self.elevation], dtype=float)


@dataclass(frozen=True)
class Layout:
    """A sampled scene: objects, optional target zone / container, camera and colours."""

    objects: tuple[SceneObject, ...]
    zone: tuple[str, tuple[float, float]] | None = None       # (colour name, (x, y))
    container: tuple[str, tuple[float, float]] | None = None  # (colour name, (x, y))
    camera: Camera = field(default_factory=Camera)
    table_rgb: tuple[float, float, float] = (0.62, 0.48, 0.34)
    background_rgb: tuple[int, int, int] = (40, 40, 48)


def _far_enough(p: np.ndarray, others: list[np.ndarray], min_dist: float) -> bool:
    return all(float(np.linalg.norm(p - q)) >= min_dist for q in others)


PUSH_BACK = 0.09
"""Farthest behind an object's centre that a push sets the gripper down (`evals.motions.task_script`)."""
PUSH_CLEARANCE = 2 * HALF * math.sqrt(2) + 0.01
"""Least distance from a push corridor to another object's centre: both objects' half diagonals and 1 cm."""


def _segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    ab = b - a
    t = float(np.clip(np.dot(p - a, ab) / max(float(np.dot(ab, ab)), 1e-12), 0.0, 1.0))
    return float(np.linalg.norm(p - (a + t * ab)))


def push_corridor_clear(zone: np.ndarray, points: list[np.ndarray]) -> bool:
    """True when objects 0 and 1 (``points``: object centres) can each be pushed in a straight line to ``zone``
    without passing through another object. The corridor starts behind the object, where the gripper sets down
    (the push scripts back off PUSH_BACK at most), since nothing collides in the scene (``contype=0``) and a
    layout with an object in the way would show the pushed object or the fingers passing through it (the
    clip suite's own interpenetration failure) in clips labelled ordinary success; object 1 is the wrong
    object of ``wrong_object`` clips."""
    for i in range(min(2, len(points))):
        d = zone - points[i]
        d = d / (float(np.linalg.norm(d)) or 1.0)
        back = points[i] - d * PUSH_BACK
        if any(_segment_distance(q, back, zone) < PUSH_CLEARANCE for j, q in enumerate(points) if j != i):
            return False
    return True


def fingers_clear_box(xy: np.ndarray, box: np.ndarray, margin: float = 0.005) -> bool:
    """True when the open fingers around an object at ``xy`` (at +-OPEN_GAP along x) stay ``margin`` outside
    the container footprint centred at ``box`` (see the module docstring)."""
    reach_x = OPEN_GAP + FINGER_HALF[0] + BOX_HALF + BOX_WALL + margin
    reach_y = FINGER_HALF[1] + BOX_HALF + BOX_WALL + margin
    return bool(abs(xy[0] - box[0]) >= reach_x or abs(xy[1] - box[1]) >= reach_y)


def sample_layout(task: str, rng: np.random.Generator, n_objects: int) -> Layout:
    """Sample object colours/shapes/positions, the task's zone or container, and a jittered camera."""
    colours = list(rng.choice(list(COLOURS), size=n_objects, replace=False))
    points: list[np.ndarray] = []
    fixtures: dict[str, tuple[str, tuple[float, float]]] = {}
    if task in ("push", "place"):
        kind, palette = ("zone", ZONE_COLOURS) if task == "push" else ("container", CONTAINER_COLOURS)
        xy = np.array([rng.uniform(-0.14, 0.14), rng.uniform(0.05, 0.10)])
        points.append(xy)
        fixtures[kind] = (str(rng.choice(list(palette))), (float(xy[0]), float(xy[1])))
    fixed = list(points)
    for _ in range(200):  # place all objects at once; restart when a draw boxes itself in
        points = list(fixed)
        for _ in colours:
            for _ in range(50):
                xy = np.array([rng.uniform(-WORKSPACE[0], WORKSPACE[0]), rng.uniform(-WORKSPACE[1], 0.0)])
                if _far_enough(xy, points, 0.1) and (task != "place" or fingers_clear_box(xy, fixed[0])):
                    points.append(xy)
                    break
        if len(points) == len(fixed) + n_objects and (task != "push" or push_corridor_clear(fixed[0], points[1:])):
            break
    else:  # pragma: no cover - four objects fit the workspace easily
        raise RuntimeError(f"could not place {n_objects} objects for {task!r}")
    objects = []
    for colour, xy in zip(colours, points[len(fixed):], strict=True):
        shape = "cylinder" if rng.random() < 0.35 else "cube"
        objects.append(SceneObject(str(colour), shape, (float(xy[0]), float(xy[1]), HALF),
                                   float(rng.uniform(-0.3, 0.3))))
    camera = Camera(lookat=(float(rng.uniform(-0.03, 0.03)), float(rng.uniform(-0.03, 0.03)), 0.05),
                    distance=float(rng.uniform(0.62, 0.74)), azimuth=float(90 + rng.uniform(-20, 20)),
                    elevation=float(rng.uniform(-52, -38)))
    table = tuple(float(v) for v in np.clip(np.array([0.62, 0.48, 0.34]) + rng.uniform(-0.08, 0.08, 3), 0, 1))
    background = tuple(int(v) for v in rng.integers(20, 235, size=3))
    return Layout(objects=tuple(objects), zone=fixtures.get("zone"), container=fixtures.get("container"),
                  camera=camera, table_rgb=table, background_rgb=background)  # type: ignore[arg-type]


def _rgba(rgb: tuple[float, float, float], a: float = 1.0) -> str:
    return " ".join(f"{v:.3f}" for v in (*rgb, a))


def scene_xml(layout: Layout) -> str:
    """MJCF for the layout. Gripper, objects and occluder are mocap bodies; fingers are slide joints."""
    fx, fy, fz = FINGER_HALF
    objs = []
    for i, obj in enumerate(layout.objects):
        rgba = _rgba(COLOURS[obj.colour])
        geom = (f'<geom type="box" size="{HALF} {HALF} {HALF}"' if obj.shape == "cube"
                else f'<geom type="cylinder" size="{HALF} {HALF}"')
        objs.append(f'<body name="obj{i}" mocap="true" pos="{obj.pos[0]} {obj.pos[1]} {obj.pos[2]}">'
                    f'{geom} rgba="{rgba}" material="plastic"/></body>')
    fixtures = []
    if layout.zone is not None:
        colour, (x, y) = layout.zone
        fixtures.append(f'<geom name="zone" type="box" pos="{x} {y} 0.0005" size="{ZONE_HALF} {ZONE_HALF} 0.0005" '
                        f'rgba="{_rgba(ZONE_COLOURS[colour])}"/>')
    if layout.container is not None:
        colour, (x, y) = layout.container
        rgba = _rgba(CONTAINER_COLOURS[colour])
        w, h, t = BOX_HALF, BOX_WALL_HALF_HEIGHT, BOX_WALL
        walls = [(0, 0, t, w, w, t), (w, 0, h, t, w, h), (-w, 0, h, t, w, h), (0, w, h, w, t, h), (0, -w, h, w, t, h)]
        for j, (px, py, pz, sx, sy, sz) in enumerate(walls):
            fixtures.append(f'<geom name="box{j}" type="box" pos="{x + px} {y + py} {pz}" '
                            f'size="{sx} {sy} {sz}" rgba="{rgba}"/>')
    return f"""<mujoco model="tabletop">
  <visual><global offwidth="{MAX_SIDE}" offheight="{MAX_SIDE}"/><quality shadowsize="512"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.45 0.45 0.45"/></visual>
  <default><geom contype="0" conaffinity="0"/></default>
  <asset>
    <texture name="sky" type="skybox" builtin="gradient" rgb1="0.75 0.82 0.90" rgb2="0.35 0.40 0.50"
             width="64" height="64"/>
    <texture name="floor" type="2d" builtin="checker" rgb1="0.32 0.33 0.36" rgb2="0.26 0.27 0.30"
             width="64" height="64"/>
    <material name="floor" texture="floor" texrepeat="6 6"/>
    <material name="plastic" specular="0.3" shininess="0.4"/>
  </asset>
  <worldbody>
    <light pos="0.3 -0.4 1.4" dir="-0.2 0.3 -1" diffuse="0.6 0.6 0.6" castshadow="true"/>
    <geom name="floor" type="plane" pos="0 0 -0.75" size="4 4 0.1" material="floor"/>
    <geom name="table" type="box" pos="0 0 -0.02" size="0.45 0.33 0.02" rgba="{_rgba(layout.table_rgb)}"/>
    <geom name="leg" type="box" pos="0 0 -0.4" size="0.05 0.05 0.36" rgba="0.2 0.2 0.2 1"/>
    {''.join(fixtures)}
    {''.join(objs)}
    <body name="gripper" mocap="true" pos="0 -0.1 0.3">
      <geom name="palm" type="box" pos="0 0 {fz + 0.012}" size="{OPEN_GAP + 0.015} 0.016 0.012"
            rgba="0.75 0.75 0.78 1" group="0"/>
      <geom name="wrist" type="cylinder" pos="0 0 {fz + 0.3}" size="0.018 0.28" rgba="0.30 0.30 0.33 1"/>
      <body name="finger_l"><joint name="jl" type="slide" axis="1 0 0"/>
        <geom name="fl" type="box" size="{fx} {fy} {fz}" rgba="0.55 0.55 0.60 1"/></body>
      <body name="finger_r"><joint name="jr" type="slide" axis="1 0 0"/>
        <geom name="fr" type="box" size="{fx} {fy} {fz}" rgba="0.55 0.55 0.60 1"/></body>
    </body>
    <body name="occluder" mocap="true" pos="{HIDDEN[0]} {HIDDEN[1]} {HIDDEN[2]}">
      <geom type="box" size="0.11 0.11 0.01" rgba="0.18 0.17 0.16 1"/></body>
  </worldbody>
</mujoco>"""


def camera_forward(azimuth: float, elevation: float) -> np.ndarray:
    """Unit viewing direction of a MuJoCo free camera (pos = lookat - distance * forward)."""
    a, e = math.radians(azimuth), math.radians(elevation)
    return np.array([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])


def facing_quat(forward: np.ndarray) -> np.ndarray:
    """Quaternion turning a body's z axis towards -forward (a flat panel that faces the camera)."""
    z = -forward / np.linalg.norm(forward)
    x = np.cross([0.0, 0.0, 1.0], z)
    x = x / (np.linalg.norm(x) or 1.0)
    y = np.cross(z, x)
    mat = np.stack([x, y, z], axis=1)  # columns are the body axes in world coordinates
    w = math.sqrt(max(1.0 + mat[0, 0] + mat[1, 1] + mat[2, 2], 1e-12)) / 2
    return np.array([w, (mat[2, 1] - mat[1, 2]) / (4 * w), (mat[0, 2] - mat[2, 0]) / (4 * w),
                     (mat[1, 0] - mat[0, 1]) / (4 * w)])


@dataclass
class SceneStates:
    """Per-frame kinematic state of a clip (T frames)."""

    gripper: np.ndarray   # [T,3] tool-centre point (between the fingertips)
    opening: np.ndarray   # [T] finger centre offset from the axis
    objects: np.ndarray   # [T,N,3] object centres
    camera: np.ndarray    # [T,6] lookat xyz, distance, azimuth, elevation
    occluder: np.ndarray  # [T,3] occluder centre (HIDDEN when unused)
    simplify: np.ndarray  # [T] bool: paint everything except the gripper one flat colour


def _same_state(s: SceneStates, a: int, b: int) -> bool:
    return bool(np.array_equal(s.gripper[a], s.gripper[b]) and s.opening[a] == s.opening[b]
                and np.array_equal(s.objects[a], s.objects[b]) and np.array_equal(s.camera[a], s.camera[b])
                and np.array_equal(s.occluder[a], s.occluder[b]) and s.simplify[a] == s.simplify[b])


def poser(model: Any, data: Any, layout: Layout) -> Callable[[SceneStates, int], None]:
    """A function that puts frame ``t`` of some states of `layout`'s scene into MuJoCo's `data` (of `model`, built
    from `scene_xml`): the gripper, its fingers' opening and each object (their yaws, which do not change, are set
    here once). The camera and the occluder are the renderer's (`render_states`); `evals.contact` poses the same."""
    obj_ids = [model.body(f"obj{i}").mocapid[0] for i in range(len(layout.objects))]
    for i, obj in enumerate(layout.objects):
        data.mocap_quat[obj_ids[i]] = [math.cos(obj.yaw / 2), 0, 0, math.sin(obj.yaw / 2)]
    grip_id = model.body("gripper").mocapid[0]
    jl, jr = model.joint("jl").qposadr[0], model.joint("jr").qposadr[0]

    def pose(states: SceneStates, t: int) -> None:
        data.mocap_pos[grip_id] = states.gripper[t]
        data.qpos[jl], data.qpos[jr] = -states.opening[t], states.opening[t]
        for i, mid in enumerate(obj_ids):
            data.mocap_pos[mid] = states.objects[t, i]

    return pose


def render_states(layout: Layout, states: SceneStates, width: int, height: int) -> np.ndarray:
    """Render every frame of ``states``; returns uint8 [T,H,W,3]."""
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - mujoco is in the `sim` extra
        raise RenderError("the clip suite needs MuJoCo: pip install 'reward-as-an-agent[sim]'") from exc
    model = mujoco.MjModel.from_xml_string(scene_xml(layout))
    data = mujoco.MjData(model)
    try:
        renderer = mujoco.Renderer(model, height=height, width=width)
    except Exception as exc:  # GL context creation errors come in several library-specific types
        raise RenderError(f"MuJoCo could not create an offscreen renderer ({exc}); on a headless machine "
                          "set MUJOCO_GL=egl (or osmesa) before starting Python") from exc
    pose = poser(model, data, layout)
    occ_id = model.body("occluder").mocapid[0]
    gripper_geoms = {model.geom(n).id for n in ("palm", "wrist", "fl", "fr")}
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    out = np.empty((len(states.gripper), height, width, 3), dtype=np.uint8)
    bg = np.array(layout.background_rgb, dtype=np.uint8)
    try:
        for t in range(len(states.gripper)):
            if t > 0 and _same_state(states, t - 1, t):  # static stretches: identical pixels, no re-render
                out[t] = out[t - 1]
                continue
            pose(states, t)
            data.mocap_pos[occ_id] = states.occluder[t]
            c = states.camera[t]
            cam.lookat[:] = c[:3]
            cam.distance, cam.azimuth, cam.elevation = float(c[3]), float(c[4]), float(c[5])
            data.mocap_quat[occ_id] = facing_quat(camera_forward(c[4], c[5]))
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera=cam)
            frame = renderer.render()
            if states.simplify[t]:
                renderer.enable_segmentation_rendering()
                renderer.update_scene(data, camera=cam)
                seg = renderer.render()
                renderer.disable_segmentation_rendering()
                is_geom = seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)
                keep = is_geom & np.isin(seg[..., 0], list(gripper_geoms))
                frame = np.where(keep[..., None], frame, bg)
            out[t] = frame
    finally:
        renderer.close()
    return out
