"""Quality pre-check: uniform and too-short clips are caught, textured clips are not flagged."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tools import quality
from tools.quality import QualityCheck, QualityThresholds, check_quality, check_video, clip_stats, frame_stats


def textured(t_total: int = 8, seed: int = 0, h: int = 96, w: int = 128) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur((rng.random((h, w)) * 255).astype(np.uint8), (0, 0), 2)
    return np.repeat(np.stack([np.roll(base, 2 * t, axis=1) for t in range(t_total)])[..., None], 3, -1)


def sparse_scene(t_total: int = 8) -> np.ndarray:
    """A plain grey table with one small coloured block: little texture, but not uniform."""
    f = np.full((t_total, 96, 128, 3), 110, np.uint8)
    for t in range(t_total):
        f[t, 40:56, 20 + 4 * t:36 + 4 * t] = (200, 40, 40)
    return f


@pytest.mark.parametrize("colour", [(0, 0, 0), (255, 255, 255), (40, 120, 200)])
def test_single_colour_clips_are_uniform(colour):
    frames = np.broadcast_to(np.array(colour, np.uint8), (12, 64, 80, 3)).copy()
    q = check_quality(frames)
    assert q.uniform and not q.usable and q.decodable_frames == 12
    assert "uniform" in q.reason and q.stats["flat_frame_fraction"] == 1.0


def test_noisy_flat_clip_is_uniform_but_a_gradient_is_not_flat_everywhere():
    rng = np.random.default_rng(0)
    noisy = np.clip(128 + rng.normal(0, 2, (10, 64, 64, 1)), 0, 255).astype(np.uint8).repeat(3, -1)
    assert check_quality(noisy).uniform


@pytest.mark.parametrize(("h", "w"), [(256, 256), (480, 832), (720, 1280), (1080, 1920)])
def test_pure_pixel_noise_is_uniform_at_every_size(h, w):
    """Averaged down to 64 px, static's std and edge energy fell below the flat thresholds only at 1080p."""
    frames = np.random.default_rng(0).integers(0, 256, (3, h, w, 3), dtype=np.uint8)
    q = check_quality(frames)
    assert q.uniform and not q.usable and "noise" in q.reason
    assert abs(q.stats["median_neighbour_correlation"]) < 0.1


def checker_scene(h: int, w: int, cell: int, t: int = 6) -> np.ndarray:
    """A checker mat (cells of `cell` px, grey 90/170) with a blue box being pushed and a red plate."""
    y, x = np.mgrid[0:h, 0:w]
    mat = np.where(((x // cell) + (y // cell)) % 2 == 0, 170, 90).astype(np.uint8)
    frames = np.repeat(np.repeat(mat[None, ..., None], 3, -1), t, 0)
    for i in range(t):
        cv2.rectangle(frames[i], (100 + 6 * i, 120), (260 + 6 * i, 300), (30, 90, 200), -1)
        cv2.circle(frames[i], (w // 2 + 100, h // 2), 70, (220, 40, 40), -1)
    return frames


@pytest.mark.parametrize(("h", "w", "cell"), [(480, 832, 13), (480, 832, 24), (720, 1280, 35), (1080, 1920, 50)])
def test_a_fine_checker_mat_is_a_scene_not_noise(h, w, cell):
    """Cells of 1-2 px at 64 px alias to a neighbour correlation near 0 or below, and the noise rule zeroed
    these clips; their power spectrum is far from white."""
    q = check_quality(checker_scene(h, w, cell))
    assert q.usable and not q.uniform and q.stats["flat_frame_fraction"] == 0.0, q.reason
    assert frame_stats(checker_scene(h, w, cell, 1)[0])[2] < 0.2  # the correlation alone calls it noise


def test_a_grey_clip_array_is_an_error_not_no_frames():
    with pytest.raises(ValueError, match=r"uint8 \[T,H,W,3\].*\(16, 120, 160\)"):
        check_quality(np.zeros((16, 120, 160), np.uint8))


@pytest.mark.parametrize("frames", [textured(), sparse_scene()])
def test_normal_clips_are_not_flagged(frames):
    q = check_quality(frames)
    assert q.usable and not q.uniform and q.reason is None
    assert q.stats["flat_frame_fraction"] == 0.0


def test_mostly_uniform_clip_is_uniform_and_a_short_blackout_is_not():
    frames = textured(10)
    mostly = frames.copy()
    mostly[:9] = 0
    assert check_quality(mostly).uniform
    blip = frames.copy()
    blip[:2] = 0
    assert not check_quality(blip).uniform


@pytest.mark.parametrize("t_total", [0, 1])
def test_fewer_than_two_frames_is_unusable(t_total):
    frames = textured(max(t_total, 1))[:t_total]
    q = check_quality(frames)
    assert not q.usable and q.decodable_frames == t_total
    assert q.reason


def test_thresholds_are_settings():
    frames = sparse_scene()
    std, edge, *_ = frame_stats(frames[0])
    strict = QualityThresholds(max_spatial_std=std + 1, max_edge_energy=edge + 1)
    assert check_quality(frames, thresholds=strict).uniform
    assert not check_quality(frames, thresholds=QualityThresholds(min_frames=2)).uniform
    with pytest.raises(ValueError):
        QualityThresholds(uniform_frame_fraction=0)


def test_check_video_decodes_and_reports_undecodable(tmp_path):
    from tools.video import write_video

    good = write_video(tmp_path / "ok.mp4", textured(6, h=64, w=64))
    assert check_video(good).usable
    black = write_video(tmp_path / "black.mp4", np.zeros((6, 64, 64, 3), np.uint8))
    assert check_video(black).uniform
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"this is not a video")
    q = check_video(junk)
    assert isinstance(q, QualityCheck) and not q.usable and q.decodable_frames == 0
    assert "undecodable" in q.reason
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    assert not check_video(empty).usable


@pytest.mark.slow
def test_clip_suite_uniform_detected_and_normal_clips_not_flagged():
    from evals.clipsuite import render_clip, suite_specs
    from evals.scenes import RenderError

    specs = {s.pattern: s for s in suite_specs("small", 0)}
    assert check_quality(render_clip(specs["uniform"], width=128, height=128)).uniform
    for pattern in ("success", "out_of_view", "background_simplified", "blur", "occlusion"):
        try:
            frames = render_clip(specs[pattern], width=128, height=128)
        except RenderError as exc:  # pragma: no cover - machine without an offscreen GL
            pytest.skip(f"MuJoCo cannot render here: {exc}")
        q = check_quality(frames)
        assert q.usable and not q.uniform, (pattern, q.stats)


def test_a_list_of_frames_gives_the_same_check_as_the_stacked_array():
    frames = np.concatenate([textured(6), sparse_scene(6)[:, :, :128]])
    assert check_quality(list(frames)) == check_quality(frames)
    flat = np.full((10, 64, 80, 3), 90, np.uint8)
    assert check_quality(list(flat)) == check_quality(flat) and check_quality(list(flat)).uniform
    assert check_quality([]).reason == "no decodable frames"


def test_a_bad_frame_in_a_list_is_named():
    frames = list(textured(4))
    frames[2] = frames[2].astype(np.float32)
    with pytest.raises(ValueError, match="float32"):
        check_quality(frames)


def test_pixel_noise_without_structure_is_uniform_and_the_reason_says_so():
    """A high-resolution clip of iid pixel noise (a diverged generator's static) has a large per-pixel std but
    no structure at the analysis size: zeroed, with a reason that names noise, not only one colour."""
    rng = np.random.default_rng(0)
    static = rng.integers(0, 256, (4, 1080, 1920, 3), dtype=np.uint8)
    assert float(static[0].std()) > 50
    q = check_quality(static)
    assert q.uniform and not q.usable
    assert "flat at 64 px" in q.reason and "only pixel-level noise" in q.reason


@pytest.mark.parametrize("chunk_values", [None, 1, 3 * 38 * 64 * 3])
@pytest.mark.parametrize("noise_correlation", [1.0, 0.2])
def test_clip_stats_match_frame_stats(noise_correlation, chunk_values, monkeypatch):
    """check_quality computes a clip's statistics a chunk of frames at a time (clip_stats); each frame's
    values (brightness included) equal frame_stats' (OpenCV per frame) to float rounding, NaN where it has NaN: textures, noise (its
    flatness computed), one-colour frames, frames 1-2 pixels wide, and frames of mixed sizes in one list; with
    the default chunk, a frame per chunk, and 3 of the four 38x64 frames in a chunk (a frame's statistics never
    depend on the frames beside it)."""
    if chunk_values is not None:
        monkeypatch.setattr(quality, "CHUNK_VALUES", chunk_values)
    rng = np.random.default_rng(0)
    textured = cv2.resize(rng.integers(0, 256, (12, 20, 3), dtype=np.uint8), (200, 120),
                          interpolation=cv2.INTER_CUBIC)
    frames = [textured, rng.integers(0, 256, (120, 200, 3), dtype=np.uint8), np.full((120, 200, 3), 9, np.uint8),
              rng.integers(0, 256, (300, 90, 3), dtype=np.uint8), rng.integers(0, 256, (1, 5, 3), dtype=np.uint8),
              rng.integers(0, 256, (2, 1, 3), dtype=np.uint8), np.roll(textured, 7, axis=1)]
    got = clip_stats(frames, 64, noise_correlation)
    want = np.array([frame_stats(f, 64, noise_correlation) for f in frames])
    assert got.shape == (len(frames), 5)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    assert want[1, 2] < 0.2 and np.isfinite(got[1, 3])  # the noise frame: its flatness was computed


def test_check_video_gives_no_verdict_on_a_clip_it_could_not_read(tmp_path, monkeypatch):
    """`check_video` turned every VideoError into an unusable clip ("undecodable video"), a read the machine failed
    (EIO) and a clip that is not there included: a verdict on the clip's content for a disk error. Only the clip's
    own bytes (not a video, cut, empty) make it unusable; a clip that could not be read raises, unjudged."""
    import errno

    import av

    from tools.video import VideoNotFoundError, write_video

    with pytest.raises(VideoNotFoundError, match="video file not found"):
        check_video(tmp_path / "missing.mp4")
    good = write_video(tmp_path / "ok.mp4", textured(6, h=64, w=64))

    def disk_failed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 (av.open's signature)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(av, "open", disk_failed)
    with pytest.raises(VideoNotFoundError, match=r"\[Errno 5\]"):
        check_video(good)
