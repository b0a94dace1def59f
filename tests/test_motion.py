"""LK tracker on synthetic clips with known motion; MotionTracks validation; summaries and overlays."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from tools.motion import (
    LKTracker,
    MotionTracker,
    MotionTracks,
    build_tracker,
    draw_tracks,
    summarize_tracks,
)
from tools.motion.base import grid_points

H = W = 128
BG = 60


def textured_patch(size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return cv2.GaussianBlur((rng.random((size, size)) * 255).astype(np.uint8), (0, 0), 1.0)


def to_rgb(gray_frames: list[np.ndarray]) -> np.ndarray:
    return np.repeat(np.stack(gray_frames)[..., None], 3, axis=-1)


def moving_square(t_total: int = 20, vx: int = 2, vy: int = 1, x0: int = 20, y0: int = 40,
                  size: int = 24) -> np.ndarray:
    """A textured square translating by (vx, vy) px per frame over a flat background."""
    sq = textured_patch(size)
    frames = []
    for t in range(t_total):
        canvas = np.full((H, W + 400), BG, np.uint8)
        x, y = x0 + vx * t, y0 + vy * t
        canvas[y:y + size, x:x + size] = sq
        frames.append(canvas[:, :W])
    return to_rgb(frames)


def test_lk_follows_known_translation_within_a_pixel():
    frames = moving_square()
    queries = np.array([[0, 28, 48], [0, 36, 56], [0, 40, 50]], float)
    tr = LKTracker().track(frames, queries=queries)
    t = np.arange(20)[:, None]
    expected_x = queries[:, 1][None] + 2 * t
    expected_y = queries[:, 2][None] + 1 * t
    assert tr.visible.all()
    assert np.abs(tr.tracks[..., 0] - expected_x).max() < 1.0
    assert np.abs(tr.tracks[..., 1] - expected_y).max() < 1.0
    assert tr.tracks.dtype == np.float32 and tr.visible.dtype == bool
    assert tr.query_frames.tolist() == [0, 0, 0] and tr.frame_indices == list(range(20))


def test_lk_subpixel_translation_of_a_full_texture():
    rng = np.random.default_rng(5)
    tex = cv2.GaussianBlur((rng.random((H, W)) * 255).astype(np.float32), (0, 0), 2.0)
    frames = []
    for t in range(15):
        m = np.float32([[1, 0, 1.5 * t], [0, 1, -0.75 * t]])
        frames.append(np.clip(cv2.warpAffine(tex, m, (W, H), borderMode=cv2.BORDER_REFLECT), 0, 255).astype(np.uint8))
    tr = LKTracker().track(to_rgb(frames), queries=np.array([[0, 40, 80], [0, 60, 64], [14, 70.5, 50.25]], float))
    t = np.arange(15)[:, None]
    expected = np.stack([tr.tracks[tr.query_frames, [0, 1, 2], 0][None] + 1.5 * (t - tr.query_frames[None]),
                         tr.tracks[tr.query_frames, [0, 1, 2], 1][None] - 0.75 * (t - tr.query_frames[None])], -1)
    assert tr.visible.all()
    assert np.abs(tr.tracks - expected).max() < 1.0


def test_lk_mid_clip_query_is_tracked_both_ways():
    frames = moving_square()
    # at frame 5 the square's top-left is (30, 45): this point is (+12, +10) inside it
    tr = LKTracker().track(frames, queries=np.array([[5, 42, 55]], float))
    assert tr.query_frames.tolist() == [5]
    assert tr.visible[:, 0].all()
    np.testing.assert_allclose(tr.tracks[0, 0], [32, 50], atol=1.0)
    np.testing.assert_allclose(tr.tracks[19, 0], [70, 69], atol=1.0)
    np.testing.assert_allclose(tr.tracks[5, 0], [42, 55], atol=1e-4)


def test_lk_occluded_point_becomes_invisible():
    sq = textured_patch(24, seed=3)
    frames = []
    for t in range(30):
        f = np.full((H, W), BG, np.uint8)
        f[50:74, 50:74] = sq
        x = -40 + 4 * t  # a flat bar slides over the square from the left
        if x + 40 > 0:
            f[40:90, max(0, x):x + 40] = 200
        frames.append(f)
    tr = LKTracker().track(to_rgb(frames), queries=np.array([[0, 60, 60], [0, 70, 62]], float))
    assert tr.visible[:8].all()  # far from the occluder: tracked
    # the bar's right edge passes x=60 at t=15 and x=70 at t=17.5: both points are covered afterwards
    assert not tr.visible[18:, 0].any() and not tr.visible[20:, 1].any()
    assert np.abs(tr.tracks[:8, 0] - [60, 60]).max() < 0.5  # static while visible


def test_lk_point_leaving_the_frame_becomes_invisible_and_stays_in_bounds():
    frames = moving_square(t_total=30, vx=4, vy=0, x0=60, y0=50)
    tr = LKTracker().track(frames, queries=np.array([[0, 64, 60]], float))
    vis = tr.visible[:, 0]
    assert vis[:10].all() and not vis[-5:].any()
    lost = int(np.argmin(vis))
    assert (vis[lost:] == 0).all()  # never re-appears
    assert tr.tracks[vis, 0, 0].max() <= W - 1


def test_lk_grid_counts_and_static_background():
    frames = moving_square()
    tr = LKTracker().track(frames, grid_size=4)
    assert tr.tracks.shape == (20, 16, 2) and tr.visible.shape == (20, 16)
    np.testing.assert_allclose(tr.tracks[0], grid_points(4, H, W))
    assert tr.visible[0].all()


def test_all_black_clip_gives_untracked_points_not_a_crash():
    tr = LKTracker().track(np.zeros((6, 64, 64, 3), np.uint8), grid_size=3)
    assert tr.visible[0].all() and not tr.visible[1:].any()  # nothing to lock on: not reliably tracked
    np.testing.assert_allclose(tr.tracks[-1], tr.tracks[0])


def test_one_frame_clip_returns_query_points():
    frames = moving_square(t_total=1)
    tr = LKTracker().track(frames, queries=np.array([[0, 10, 20]], float))
    assert tr.tracks.shape == (1, 1, 2) and tr.visible.all()
    np.testing.assert_allclose(tr.tracks[0, 0], [10, 20])


def test_motion_tracks_validation_and_round_trip():
    tr = MotionTracks(tracks=np.random.rand(3, 2, 2).astype(np.float32) * 100, visible=np.ones((3, 2), bool),
                      query_frames=np.array([0, 1]))
    assert tr.frame_indices == [0, 1, 2]
    for encoding in ("list", "base64"):
        back = MotionTracks.from_dict(json.loads(json.dumps(tr.to_dict(encoding))))
        np.testing.assert_array_equal(back.tracks, tr.tracks)
        np.testing.assert_array_equal(back.visible, tr.visible)
        assert back.frame_indices == tr.frame_indices
    with pytest.raises(ValueError):
        MotionTracks(tracks=np.zeros((3, 2, 2)), visible=np.ones((2, 2), bool), query_frames=np.array([0, 0]))


def test_build_tracker_and_protocol():
    assert isinstance(build_tracker("lk"), LKTracker)
    assert isinstance(build_tracker("lk"), MotionTracker)
    with pytest.raises(ValueError, match="unknown motion backend"):
        build_tracker("raft")  # type: ignore[arg-type]


def _two_region_tracks() -> MotionTracks:
    """Region 'a' (left) moves right in frames 5-9 together with region 'b'; region 'c' is static."""
    t_total = 12
    starts = np.array([[10, 10], [12, 12], [70, 10], [72, 12], [10, 90]], np.float32)
    tracks = np.repeat(starts[None], t_total, axis=0).copy()
    for t in range(5, t_total):
        step = min(t, 9) - 4
        tracks[t, :4, 0] += 3 * step
    return MotionTracks(tracks=tracks, visible=np.ones((t_total, 5), bool), query_frames=np.zeros(5, int),
                        frame_indices=list(range(100, 100 + t_total)))


def test_summary_regions_motion_and_comotion():
    tr = _two_region_tracks()
    regions = {"a": (0, 0, 0.25, 0.25), "b": (0.5, 0, 0.75, 0.25), "c": (0, 0.5, 0.5, 1)}
    s = summarize_tracks(tr, (128, 128), regions, speed_threshold=1.0)
    with pytest.raises(ValueError, match="fractions of the frame"):  # pixels covered the whole frame silently
        summarize_tracks(tr, (128, 128), {"gripper": [0, 0, 64, 64]})
    by = {r.name: r for r in s.regions}
    assert by["a"].points == 2 and by["a"].moving_points == 2
    assert by["a"].median_displacement_px == pytest.approx(15.0)
    assert by["a"].mean_shift_px == pytest.approx((15.0, 0.0))
    assert by["a"].motion_frames == [105, 109]
    assert by["c"].moving_points == 0 and by["c"].motion_frames == []
    assert s.moving_points == 4 and s.active_segments == [(105, 109)]
    ab = next(c for c in s.comotion if (c.region_a, c.region_b) == ("a", "b"))
    assert ab.together_frames == 5 and ab.share_of_a_motion == 1.0 and ab.segments == [(105, 109)]
    ac = next(c for c in s.comotion if (c.region_a, c.region_b) == ("a", "c"))
    assert ac.together_frames == 0
    text = s.text()
    assert "co-motion a & b" in text and "not proof" in text and "105-109" in text
    assert s.top_tracks[0].displacement_px == pytest.approx(15.0)


def test_a_point_on_an_edge_two_regions_share_belongs_to_one_of_them():
    """Region boxes were closed on both sides: a 2x2 grid on 128 pixels (points at 31.5 and 95.5) split at 0.25
    (pixel 31.5) put the left column's points in both regions, 6 points for 4. Boxes are [x0, x1) now, closed
    where they end at 1 (the far grid points, and a point on the frame's last pixel, still count)."""
    tr = LKTracker().track(np.zeros((3, 128, 128, 3), np.uint8), grid_size=2)
    s = summarize_tracks(tr, (128, 128), {"left": (0, 0, 0.25, 1), "right": (0.25, 0, 1, 1)})
    assert [(r.name, r.points) for r in s.regions] == [("left", 0), ("right", 4)]
    edge = MotionTracks(tracks=np.float32([[[0, 0], [127, 127]]] * 2), visible=np.ones((2, 2), bool),
                        query_frames=np.zeros(2, int))
    assert [r.points for r in summarize_tracks(edge, (128, 128), {"all": (0, 0, 1, 1)}).regions] == [2]
    assert sum(r.points for r in summarize_tracks(edge, (128, 128)).regions) == 2


def test_summary_refuses_more_than_max_regions_instead_of_cutting_them():
    """Co-motion is computed for every pair; 1000 regions took 40 s and the summary then kept 64 silently."""
    from tools.motion.summary import MAX_REGIONS

    tr = _two_region_tracks()
    boxes = {f"r{i}": (0, 0, 1, 1) for i in range(MAX_REGIONS + 1)}
    with pytest.raises(ValueError, match=f"{MAX_REGIONS + 1} regions; the limit is {MAX_REGIONS}"):
        summarize_tracks(tr, (128, 128), boxes)
    boxes.pop(f"r{MAX_REGIONS}")
    s = summarize_tracks(tr, (128, 128), boxes, speed_threshold=1.0)
    assert len(s.regions) == MAX_REGIONS and len(s.comotion) == MAX_REGIONS * (MAX_REGIONS - 1) // 2


def test_summary_takes_frames_in_clip_order_whatever_order_they_were_tracked_in():
    """Frames tracked backwards (frame_indices 109..100) read as motion the other way, with motion frames
    and spans running backwards."""
    tr = _two_region_tracks()
    regions = {"a": (0, 0, 0.25, 0.25), "b": (0.5, 0, 0.75, 0.25)}
    want = summarize_tracks(tr, (128, 128), regions, speed_threshold=1.0).model_dump()
    t_total = tr.num_frames
    for order in (np.arange(t_total)[::-1], np.random.default_rng(0).permutation(t_total)):
        position = np.argsort(order)
        shuffled = MotionTracks(tracks=tr.tracks[order], visible=tr.visible[order],
                                query_frames=position[tr.query_frames],
                                frame_indices=[tr.frame_indices[i] for i in order])
        assert summarize_tracks(shuffled, (128, 128), regions, speed_threshold=1.0).model_dump() == want
    assert want["regions"][0]["mean_shift_px"] == pytest.approx((15.0, 0.0))


def test_summary_default_grid_and_invisible_tracks():
    tr = _two_region_tracks()
    tr.visible[6:, 0] = False
    s = summarize_tracks(tr, (128, 128))
    assert len(s.regions) == 9 and s.comotion == []
    top_left = next(r for r in s.regions if r.name == "top-left")
    assert top_left.points == 2
    assert s.tracked_fraction == pytest.approx(1 - 6 / 60)



def test_summary_lists_a_track_that_moved_and_came_back():
    """Top tracks are the moved ones: sorted on -net * moved, a track that moved and came back (net 0) tied
    with the still track before it, and the list stopped there (1 point moved, no track named)."""
    t = np.zeros((3, 2, 2), np.float32)
    t[:, :, 1] = 16
    t[:, 0, 0] = 10  # still
    t[:, 1, 0] = [30, 40, 30]  # 10 px out and back
    s = summarize_tracks(MotionTracks(tracks=t, visible=np.ones((3, 2), bool), query_frames=np.zeros(2)), (32, 48))
    assert s.moving_points == 1
    assert [(k.index, k.displacement_px, k.motion_frames) for k in s.top_tracks] == [(1, 0.0, [1, 2])]


def test_draw_tracks_marks_pixels_without_touching_input():
    frames = moving_square(t_total=5)
    tr = LKTracker().track(frames, queries=np.array([[0, 30, 50]], float))
    before = frames.copy()
    out = draw_tracks(frames, tr, radius=3)
    np.testing.assert_array_equal(frames, before)
    assert out.shape == frames.shape and out.dtype == np.uint8
    x, y = np.round(tr.tracks[4, 0]).astype(int)
    assert not np.array_equal(out[4, y, x], frames[4, y, x])
    with pytest.raises(ValueError):
        draw_tracks(frames[:3], tr)



def test_draw_zero_tracks_returns_the_frames_unchanged():
    frames = moving_square(t_total=3)
    none = MotionTracks(tracks=np.zeros((3, 0, 2)), visible=np.zeros((3, 0), bool), query_frames=np.zeros(0))
    np.testing.assert_array_equal(draw_tracks(frames, none), frames)  # cv2.error from the empty colour wheel


def test_draw_tracks_on_a_frame_list_reads_only_the_drawn_frames():
    frames = moving_square(t_total=6)
    tr = LKTracker().track(frames, grid_size=3)
    as_list = [f for f in frames]
    as_list[0] = None  # never read: only positions 2 and 5 are drawn
    np.testing.assert_array_equal(draw_tracks(as_list, tr, at=[5, 2]), draw_tracks(frames, tr, at=[5, 2]))
    unread = [frames[0]] + [None] * (len(frames) - 1)  # nothing drawn: no frame is stacked
    empty = draw_tracks(unread, tr, at=[])
    assert empty.shape == (0, *frames.shape[1:]) and empty.dtype == np.uint8
    np.testing.assert_array_equal(empty, draw_tracks(frames, tr, at=[]))
    with pytest.raises(ValueError, match="uint8"):
        draw_tracks([f.astype(np.float32) for f in frames], tr, at=[1])
    with pytest.raises(ValueError, match="frames but tracks cover"):
        draw_tracks(as_list[:4], tr, at=[1])


def _reference_lk(tracker: LKTracker, frames: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The plain step-by-step algorithm (forward call, then its check, then the match against the query
    frame, before the next step)."""
    from tools.motion.base import inside_image

    c, args = tracker.config, tracker._lk_args
    grays = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]
    t_total, h, w = frames.shape[:3]
    qf, start = queries[:, 0].astype(int), queries[:, 1:3].astype(np.float32)
    tracks = np.zeros((t_total, len(queries), 2), np.float32)
    visible = np.zeros((t_total, len(queries)), bool)
    tracks[qf, np.arange(len(qf))], visible[qf, np.arange(len(qf))] = start, True
    for d in (1, -1):
        cur, alive = start.copy(), np.ones(len(qf), bool)
        for t in (range(qf.min(), t_total - 1) if d > 0 else range(qf.max(), 0, -1)):
            started = qf <= t if d > 0 else qf >= t
            for k in np.flatnonzero(started & alive):  # one point at a time: no batching at all
                p1, st, err = cv2.calcOpticalFlowPyrLK(grays[t], grays[t + d], cur[k].reshape(1, 1, 2), None, **args)
                p1, inside = inside_image(p1.reshape(1, 2), h, w)  # on an edge pixel: clamped onto its centre
                p1 = p1[0]
                ok = st[0, 0] == 1 and np.isfinite(p1).all() and err[0, 0] < c.max_patch_error and inside[0]
                if ok:
                    pb, stb, _ = cv2.calcOpticalFlowPyrLK(grays[t + d], grays[t], p1.reshape(1, 1, 2), None, **args)
                    ok = stb[0, 0] == 1 and np.linalg.norm(pb.reshape(2) - cur[k]) < c.fb_threshold
                # every anchor_every steps from the query frame it is matched against it too (drift), kept when good
                if ok and qf[k] != t and abs(t + d - qf[k]) % c.anchor_every == 0:
                    pa, sta, erra = cv2.calcOpticalFlowPyrLK(grays[qf[k]], grays[t + d], start[k].reshape(1, 1, 2),
                                                             p1.reshape(1, 1, 2).copy(),
                                                             flags=cv2.OPTFLOW_USE_INITIAL_FLOW, **args)
                    pa, inside = inside_image(pa.reshape(1, 2), h, w)
                    pa = pa[0]
                    if sta[0, 0] == 1 and np.isfinite(pa).all() and erra[0, 0] < c.max_patch_error \
                            and inside[0] and np.linalg.norm(pa - p1) < c.anchor_tolerance:
                        p1 = pa
                if ok:
                    cur[k] = p1
                else:
                    alive[k] = False
            tracks[t + d, started], visible[t + d, started] = cur[started], alive[started]
    return tracks, visible


def test_lk_pipelined_checks_match_the_step_by_step_algorithm():
    """Checks run on a helper thread and rejections are applied afterwards: the tracks must equal the
    plain algorithm's, bit for bit, on a clip where points are occluded, leave the frame and fail the
    forward-backward check, with queries on several frames (both directions)."""
    rng = np.random.default_rng(7)
    frames = moving_square(t_total=24, vx=5, vy=1, x0=40, y0=30).copy()
    frames[12:, 60:100, 20:60] = 200  # a flat block appears: points under it lose texture
    frames[::5] = np.clip(frames[::5].astype(int) + rng.integers(-40, 40, frames[::5].shape), 0, 255)
    queries = np.concatenate([np.array([[0, 45 + 3 * k, 35 + 2 * k] for k in range(8)], float),
                              [[t, float(rng.uniform(0, W - 1)), float(rng.uniform(0, H - 1))]
                               for t in (3, 9, 15, 23) for _ in range(6)]])
    tracker = LKTracker()
    got = tracker.track(frames, queries=queries)
    want_tracks, want_visible = _reference_lk(tracker, frames, queries)
    assert 0 < got.visible.mean() < 1  # some rejections happened, so the deferred checks matter
    np.testing.assert_array_equal(got.visible, want_visible)
    np.testing.assert_array_equal(got.tracks, want_tracks)


def test_lk_check_failure_is_raised_not_swallowed(monkeypatch):
    tracker = LKTracker()
    monkeypatch.setattr(tracker, "_check", lambda *a: (_ for _ in ()).throw(RuntimeError("check broke")))
    with pytest.raises(RuntimeError, match="check broke"):
        tracker.track(moving_square(), grid_size=4)

