"""Quality pre-check on dim clips: a structured scene filmed or generated dark is not zeroed as uniform, while
blank frames (one colour, a faint gradient, light sensor noise) stay flat at every brightness."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_quality import checker_scene, sparse_scene, textured
from tools.quality import QualityThresholds, check_quality


def dimmed(frames: np.ndarray, scale: float) -> np.ndarray:
    """`frames` at `scale` of their brightness, rounded back to uint8 (a dim exposure of the same scene)."""
    return np.round(frames.astype(np.float64) * scale).astype(np.uint8)


def blank(level: float, *, amp: float = 0.0, sigma: float = 0.0, radial: bool = False, h: int = 64, w: int = 80,
          t: int = 6, seed: int = 0) -> np.ndarray:
    """Blank frames at grey `level`, with a gradient of `amp` grey levels (left to right, or centre to corners)
    and Gaussian sensor noise of std `sigma`."""
    y, x = np.mgrid[0:h, 0:w]
    ramp = np.hypot(x - w / 2, y - h / 2) / np.hypot(w / 2, h / 2) if radial else x / (w - 1)
    f = level + amp * (ramp - 0.5) + np.random.default_rng(seed).normal(0, 1, (t, h, w)) * sigma
    return np.clip(np.round(f), 0, 255).astype(np.uint8)[..., None].repeat(3, -1)


@pytest.mark.parametrize("scale", [0.08, 0.12, 0.25])
def test_a_dim_checker_scene_is_usable(scale):
    """The checker mat scene at 8-25% brightness (mean grey 10-31): its std (3.4 at 8%) and edge energy (2.9)
    fell under the absolute flat thresholds (5, 4), and the clip was zeroed before any model call."""
    q = check_quality(dimmed(checker_scene(480, 832, 24), scale))
    assert q.usable and not q.uniform and q.stats["flat_frame_fraction"] == 0.0, q.reason


@pytest.mark.parametrize("frames", [textured(), sparse_scene()], ids=["textured", "sparse"])
def test_dim_low_contrast_fixtures_are_usable_at_a_quarter_brightness(frames):
    q = check_quality(dimmed(frames, 0.25))
    assert q.usable and not q.uniform, q.stats
    assert q.stats["median_brightness"] < 35


@pytest.mark.parametrize("level", [0, 3, 10, 25, 64, 128, 250])
@pytest.mark.parametrize("kind", ["colour", "gradient", "radial", "noise1", "noise2", "gradient_noise"])
def test_blank_frames_stay_uniform_at_every_brightness(level, kind):
    """One colour, a gradient of 6 grey levels, sensor noise of std 1-2 levels, or a gradient of 4 levels under
    noise of std 2: no scene at any brightness, so the dim-frame scaling must not let them through."""
    frames = {"colour": lambda: blank(level), "gradient": lambda: blank(level, amp=6),
              "radial": lambda: blank(level, amp=6, radial=True), "noise1": lambda: blank(level, sigma=1),
              "noise2": lambda: blank(level, sigma=2), "gradient_noise": lambda: blank(level, amp=4, sigma=2)}[kind]()
    q = check_quality(frames)
    assert q.uniform and not q.usable, q.stats
    assert "uniform" in q.reason


def test_dim_scaling_is_a_setting():
    """dim_brightness 0 restores the absolute thresholds: the dim checker scene is flat again."""
    frames = dimmed(checker_scene(480, 832, 24), 0.08)
    assert check_quality(frames, thresholds=QualityThresholds(dim_brightness=0)).uniform
    assert not check_quality(frames).uniform
    with pytest.raises(ValueError):
        QualityThresholds(dim_min_scale=0)


@pytest.mark.slow
def test_clip_suite_scenes_filmed_dark_are_usable():
    """Clip-suite scenes at 8% (the well-lit patterns) and 12-25% (all of them) brightness."""
    from evals.clipsuite import render_clip, suite_specs
    from evals.scenes import RenderError

    specs = {s.pattern: s for s in suite_specs("small", 0)}
    cases = [(p, 0.08) for p in ("success", "partial", "blur", "occlusion")]
    cases += [(p, s) for p in ("success", "out_of_view", "background_simplified", "blur", "occlusion")
              for s in (0.12, 0.25)]
    rendered: dict[str, np.ndarray] = {}
    for pattern, scale in cases:
        try:
            frames = rendered.setdefault(pattern, render_clip(specs[pattern], width=128, height=128))
        except RenderError as exc:  # pragma: no cover - machine without an offscreen GL
            pytest.skip(f"MuJoCo cannot render here: {exc}")
        q = check_quality(dimmed(frames, scale))
        assert q.usable and not q.uniform, (pattern, scale, q.stats)
    assert check_quality(dimmed(render_clip(specs["uniform"], width=128, height=128), 0.08)).uniform


def test_dim_settings_are_read_from_the_environment():
    from tools.settings import ToolSettings

    s = ToolSettings.from_env({"RAA_QUALITY_DIM_BRIGHTNESS": "0", "RAA_QUALITY_DIM_MIN_SCALE": "0.5"})
    assert s.quality.dim_brightness == 0 and s.quality.dim_min_scale == 0.5
    with pytest.raises(ValueError, match="RAA_QUALITY_DIM_MIN_SCALE"):
        ToolSettings.from_env({"RAA_QUALITY_DIM_MIN_SCALE": "0"})


def test_dim_clips_through_h264(tmp_path):
    """The same through an mp4 (H.264 smooths dark detail): the dim checker scene is usable, a dark blank
    frame with a gradient under sensor noise is still uniform."""
    from tools.quality import check_video
    from tools.video import write_video

    scene = write_video(tmp_path / "dim.mp4", dimmed(checker_scene(240, 416, 12), 0.08))
    assert check_video(scene).usable
    dark = write_video(tmp_path / "blank.mp4", blank(10, amp=4, sigma=2, h=128, w=128))
    q = check_video(dark)
    assert q.uniform and q.stats["median_brightness"] < 12
