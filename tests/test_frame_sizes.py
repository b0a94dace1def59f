"""Frame sizes: frames decoded at a bounded size for the surprise scorer (the reader's `size`, the
FrameStore's `scaled_frames`, the agent's and the tool service's `surprise_short_side`, the setting),
track overlays drawn at the size they are shown at (`draw_tracks(scale=...)`), and a frame cache whose
frames are separate arrays (evicting one frees it)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from fastapi.testclient import TestClient
from graph_scripts import FakeSurprise, full_script, moving_square, tool_call
from pydantic import ValidationError

from tools.video import VideoReader, fit_short_side, read_all_frames, read_frames, write_video


class RecordingSurprise(FakeSurprise):
    """FakeSurprise that keeps the shape of every frame array it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def score(self, frames):
        self.shapes.append(tuple(np.asarray(frames).shape))
        return super().score(frames)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """24 frames of 96x160 with a smooth gradient and a moving square (little codec noise)."""
    h, w = 96, 160
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([xx * 255 // w, yy * 255 // h, np.full_like(xx, 90)], -1).astype(np.uint8)
    frames = np.repeat(base[None], 24, 0)
    for t in range(24):
        frames[t, 30:62, 4 + 4 * t:36 + 4 * t] = (230, 40, 40)
    return write_video(tmp_path_factory.mktemp("wide") / "wide.mp4", frames, fps=12.0)


@pytest.mark.parametrize(("size", "bound", "expected"), [
    ((1920, 1080), 448, (796, 448)),   # 1920 * 448 / 1080 = 796.4
    ((1080, 1920), 448, (448, 796)),
    ((640, 480), 448, (597, 448)),     # 640 * 448 / 480 = 597.3
    ((256, 256), 448, (256, 256)),     # never upscaled
    ((448, 900), 448, (448, 900)),     # already at the bound
    ((100, 50), None, (100, 50)),
])
def test_fit_short_side(size, bound, expected):
    assert fit_short_side(*size, bound) == expected


def test_fit_short_side_rejects_a_non_positive_bound():
    with pytest.raises(ValueError, match="short_side must be positive"):
        fit_short_side(64, 64, 0)


def test_read_at_a_size_matches_an_area_resize_of_the_full_frames(wide):
    idx = [20, 3, 3, 11]  # any order, repeats
    with VideoReader(wide) as reader:
        full = reader.read(idx)
        small = reader.read(idx, size=(80, 48))
    assert full.shape == (4, 96, 160, 3) and small.shape == (4, 48, 80, 3) and small.dtype == np.uint8
    for f, s in zip(full, small, strict=True):
        ref = cv2.resize(f, (80, 48), interpolation=cv2.INTER_AREA).astype(np.int16)
        assert np.abs(ref - s).mean() < 3.0  # same picture (the scaler differs slightly from cv2)
    assert np.array_equal(small[1], small[2])
    # the red square of frame 20 sits at x 84..116 of 160: 42..58 of 80
    assert small[0, 24, 50, 0] > 180 and small[0, 24, 30, 0] < 120
    assert np.array_equal(read_frames(wide, idx, size=(80, 48)), small)


def test_read_rejects_a_bad_size(wide):
    with VideoReader(wide) as reader, pytest.raises(ValueError, match=r"size must be \(width, height\)"):
        reader.read([0], size=(0, 10))


def test_read_all_frames_at_a_size(wide):
    frames = read_all_frames(wide, size=(80, 48))
    assert frames.shape == (24, 48, 80, 3)
    assert np.array_equal(frames[5:8], read_frames(wide, [5, 6, 7], size=(80, 48)))
    assert read_all_frames(wide).shape == (24, 96, 160, 3)


@pytest.mark.parametrize(("size", "bound", "expected"), [
    ((832, 480), 448, (832, 480)),    # 448 keeps 87% of the pixels: the cached frames serve
    ((1280, 704), 448, (815, 448)),   # 41%: decoded smaller
    ((1280, 704), 576, (1280, 704)),  # 67%
    ((1920, 1080), 576, (1024, 576)),
    ((128, 128), 90, (90, 90)),       # exactly half or less: 49%
    ((128, 128), 91, (128, 128)),     # 51%
    ((256, 256), None, (256, 256)),
])
def test_tool_size_scales_only_when_that_at_least_halves_the_pixels(size, bound, expected):
    from tools.video import tool_size

    assert tool_size(*size, bound) == expected


def test_frame_store_serves_small_frames_from_its_cache_and_never_caches_scaled_ones(wide):
    from graph.frame_store import FrameStore

    store = FrameStore()
    store.prefetch(str(wide), range(24))
    decoded = store.decoded
    same = store.scaled_frames(str(wide), range(24), 448)  # frames already within the bound
    assert store.decoded == decoded and np.array_equal(same, store.frames(str(wide), range(24)))

    fresh = FrameStore()
    small = fresh.scaled_frames(str(wide), range(24), 48)
    assert small.shape == (24, 48, 80, 3)
    assert fresh.decoded == 0 and fresh.get_extra(("anything",)) is None
    full = fresh.frames(str(wide), [0])  # the cache holds full-size frames only
    assert full.shape == (1, 96, 160, 3) and fresh.decoded == 1


def test_frame_store_caches_separate_arrays_so_its_byte_bound_holds(wide):
    from graph.frame_store import FrameStore

    frame_bytes = 96 * 160 * 3
    store = FrameStore(max_bytes=5 * frame_bytes)
    store.prefetch(str(wide), range(24))  # one decode of 24 frames; the cache keeps the last 5
    kept = [f for i in range(24) if (f := store._frames.get((str(wide), i))) is not None]
    assert len(kept) == 5
    # views of one decoded [24,H,W,3] array would keep all 24 frames alive behind those 5
    assert all(not isinstance(f.base, np.ndarray) or f.base.nbytes <= 2 * frame_bytes for f in kept)
    assert not any(np.shares_memory(a, b) for k, a in enumerate(kept) for b in kept[k + 1:])


def _agent(surprise, **tools_kw):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    backbone = Backbone(ScriptedChatModel(full_script()), max_retries=1, retry_wait=(0.0, 0.0))
    return build_reward_agent(AgentConfig(preset="full"), backbone=backbone,
                              tools=AgentTools(tracker=LKTracker(), surprise=surprise, **tools_kw),
                              checkpointer=InMemorySaver())


@pytest.mark.parametrize(("tools_kw", "shape"), [
    ({"surprise_short_side": 64}, (33, 64, 64, 3)),
    ({"surprise_short_side": 100}, (33, 128, 128, 3)),  # 100 keeps 61% of the pixels: the cached frames
    ({"surprise_short_side": None}, (33, 128, 128, 3)),
    ({}, (33, 128, 128, 3)),  # the default bound (448) is above this clip's size
])
def test_agent_hands_the_scorer_frames_at_the_configured_short_side(tmp_path, tools_kw, shape):
    clip = moving_square(tmp_path / "square.mp4")
    scorer = RecordingSurprise()
    agent = _agent(scorer, **tools_kw)
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                       {"configurable": {"thread_id": "r"}})
    assert out["result"].status == "scored" and scorer.shapes == [shape]


class ShapeTool:
    """EvidenceTool that reports the shape of the frames it is given."""

    name = "shape_probe"

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def evaluate(self, frames, instruction):
        from tools.extra import EvidenceReport

        self.shapes.append(tuple(frames.shape))
        return EvidenceReport(summary=f"saw {frames.shape}")


@pytest.mark.parametrize(("tools_kw", "shape"), [
    ({"extra_short_side": 64}, (33, 64, 64, 3)),
    ({"extra_short_side": None}, (33, 128, 128, 3)),
])
def test_agent_hands_extra_tools_frames_at_their_short_side(tmp_path, tools_kw, shape):
    clip = moving_square(tmp_path / "square.mp4")
    tool = ShapeTool()
    agent = _agent(FakeSurprise(), extra=[tool], surprise_short_side=32, **tools_kw)
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                       {"configurable": {"thread_id": "r"}})
    assert out["result"].status == "scored" and tool.shapes == [shape]


def test_toolbox_passes_its_setting_to_the_agent():
    from graph.context import tool_provider
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    assert tool_provider(Toolbox(ToolSettings(surprise_short_side=300))).surprise_short_side == 300
    assert tool_provider(Toolbox(ToolSettings(surprise_short_side=None))).surprise_short_side is None
    assert tool_provider(Toolbox(ToolSettings())).surprise_short_side == 448
    assert tool_provider(Toolbox(ToolSettings(track_short_side=200))).track_short_side == 200
    assert tool_provider(Toolbox(ToolSettings(extra_short_side=100))).extra_short_side == 100


def test_setting_from_the_environment():
    from tools.settings import ToolSettings

    assert ToolSettings.from_env({}).surprise_short_side == 448
    assert ToolSettings.from_env({"RAA_SURPRISE_SHORT_SIDE": "300"}).surprise_short_side == 300
    assert ToolSettings.from_env({"RAA_SURPRISE_SHORT_SIDE": " Full "}).surprise_short_side is None
    assert ToolSettings.from_env({}).track_short_side == 576
    assert ToolSettings.from_env({"RAA_TRACK_SHORT_SIDE": "full"}).track_short_side is None
    assert ToolSettings.from_env({"RAA_EXTRA_SHORT_SIDE": "256"}).extra_short_side == 256
    with pytest.raises(ValidationError, match="surprise_short_side"):
        ToolSettings.from_env({"RAA_SURPRISE_SHORT_SIDE": "10"})


def test_tool_service_decodes_videos_for_surprise_at_the_bound_and_tracks_at_full_size(wide):
    from tools.motion import LKTracker
    from tools.service import create_app
    from tools.settings import ToolSettings

    scorer = RecordingSurprise()
    app = create_app(ToolSettings(surprise_short_side=64), wide.parent, tracker=LKTracker(), scorer=scorer)
    with TestClient(app) as c:
        assert c.post("/v1/surprise", json={"path": wide.name}).status_code == 200
        assert c.post("/v1/surprise", json={"path": wide.name, "frame_indices": [0, 5, 9]}).status_code == 200
        track = c.post("/v1/track", json={"path": wide.name, "grid_size": 2})
    assert scorer.shapes == [(24, 64, 107, 3), (3, 64, 107, 3)]  # 160 * 64 / 96 = 106.7
    assert track.status_code == 200 and track.json()["frame_size"] == [96, 160]


# ------------------------------------------------------------------ overlays at the shown size
def test_draw_tracks_scales_track_coordinates_onto_resized_frames():
    from tools.motion import MotionTracks, draw_tracks

    tracks = MotionTracks(tracks=np.array([[[101.0, 41.0]]], np.float32), visible=np.ones((1, 1), bool),
                          query_frames=np.zeros(1, np.int64))
    small = np.zeros((1, 60, 80, 3), np.uint8)
    drawn = draw_tracks(small, tracks, scale=(0.5, 0.5))[0]
    # (101 + 0.5) * 0.5 - 0.5 = 50.25 -> x 50; (41 + 0.5) * 0.5 - 0.5 = 20.25 -> y 20
    ys, xs = np.nonzero(drawn.max(axis=2))
    assert (round(xs.mean()), round(ys.mean())) == (50, 20)
    moved = MotionTracks(tracks=np.array([[[50.0, 20.0]]], np.float32), visible=np.ones((1, 1), bool),
                         query_frames=np.zeros(1, np.int64))
    assert np.array_equal(drawn, draw_tracks(small, moved)[0])  # the same as tracks given at that size
    with pytest.raises(ValueError, match="scale must be two positive factors"):
        draw_tracks(small, tracks, scale=(0.0, 1.0))
    from tools.motion import draw_tracks_resized

    assert np.array_equal(draw_tracks_resized([small[0]], tracks, [0], (120, 160))[0], drawn)
    with pytest.raises(ValueError, match="1 shown frames for 2 positions"):
        draw_tracks_resized([small[0]], tracks, [0, 0], (120, 160))


def _images_sent(model, marker: str) -> list[np.ndarray]:
    """Decoded images whose text label (the block before the image) contains `marker`."""
    import base64

    out = []
    for call in model.calls:
        for message in call.messages:
            blocks = message.content if isinstance(message.content, list) else []
            for before, block in zip(blocks, blocks[1:], strict=False):
                if (isinstance(before, dict) and marker in before.get("text", "")
                        and isinstance(block, dict) and block.get("type") == "image_url"):
                    data = base64.b64decode(block["image_url"]["url"].split(",", 1)[1])
                    out.append(cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR),
                                            cv2.COLOR_BGR2RGB))
    return out


def test_agent_track_overlays_stay_visible_when_frames_are_sent_smaller(tmp_path):
    """A 512x512 clip sent at 128 pixels: the overlay must differ from the plain frame by the drawn
    dots and lines (drawn at 512 and shrunk 4x, they all but vanished)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    rng = np.random.default_rng(3)
    tex = cv2.GaussianBlur(rng.integers(0, 255, (512, 640), np.uint8), (0, 0), 6)
    frames = np.stack([np.repeat(tex[:, 2 * t:2 * t + 512, None], 3, -1) for t in range(33)])
    clip = write_video(tmp_path / "big.mp4", frames, fps=16.0)
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32}), "Tracks seen."])
    model = ScriptedChatModel(script)
    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(model, max_retries=1, retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                               checkpointer=InMemorySaver(), frame_store=FrameStore(long_side=128))
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                       {"configurable": {"thread_id": "r"}})
    assert out["result"].status == "scored"
    overlays = _images_sent(model, "(motion-track overlay)")
    assert overlays and all(o.shape == (128, 128, 3) for o in overlays)
    shown = next(x for x in out["exchanges"] if x.get("overlay"))["frames"]
    plain = [cv2.resize(frames[i], (128, 128), interpolation=cv2.INTER_AREA) for i in shown]
    changed = [float((np.abs(o.astype(np.int16) - f).max(axis=2) > 60).mean())
               for o, f in zip(overlays[:len(shown)], plain, strict=True)]
    assert min(changed) > 0.01, changed  # 2-5% here; drawn at 512 and shrunk to 128: 0.0


# ------------------------------------------------------------------ tracking at a bounded size
class StillTracker:
    """MotionTracker fake: every point stays where it was asked for; keeps the frame shapes it gets."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def track(self, frames, *, grid_size=None, queries=None):
        from tools.motion import MotionTracks
        from tools.motion.base import resolve_queries

        self.shapes.append(tuple(frames.shape))
        q = resolve_queries(frames.shape, grid_size, queries)
        t = len(frames)
        return MotionTracks(tracks=np.repeat(q[None, :, 1:3], t, 0), visible=np.ones((t, len(q)), bool),
                            query_frames=q[:, 0].astype(np.int64))


def test_motion_tracks_rescaled_keeps_pixel_centres():
    from tools.motion import MotionTracks

    tracks = MotionTracks(tracks=np.array([[[101.0, 41.0], [-0.5, 0.0]]], np.float32),
                          visible=np.array([[True, False]]), query_frames=np.zeros(2, np.int64))
    half = tracks.rescaled(0.5, 0.25)
    assert half.tracks.tolist() == [[[50.25, 9.875], [-0.5, -0.375]]]  # (x + .5) * s - .5
    assert half.visible.tolist() == [[True, False]] and half.frame_indices == [0]
    assert np.allclose(half.rescaled(2.0, 4.0).tracks, tracks.tracks)
    with pytest.raises(ValueError, match="scale factors must be positive"):
        tracks.rescaled(0.0, 1.0)


def test_tracks_computed_on_smaller_frames_come_back_in_the_clips_pixels(tmp_path):
    from graph import AgentConfig
    from graph.backbone import Backbone
    from graph.context import RunContext, ToolProvider
    from graph.frame_store import FrameStore
    from graph.nodes.evidence import _compute_tracks
    from graph.testing import ScriptedChatModel

    clip = str(moving_square(tmp_path / "square.mp4"))  # 128x128
    tracker = StillTracker()

    def ctx(short_side):
        return RunContext(backbone=Backbone(ScriptedChatModel({})), config=AgentConfig().resolved(),
                          frames=FrameStore(), tools=ToolProvider(lambda: tracker, track_short_side=short_side))

    small = _compute_tracks(ctx(64), clip, [0, 8, 16], [[0.5, 0.5], [0.0, 1.0]])
    full = _compute_tracks(ctx(None), clip, [0, 8, 16], [[0.5, 0.5], [0.0, 1.0]])
    assert tracker.shapes == [(3, 64, 64, 3), (3, 128, 128, 3)]
    # the centre (31.5 of 0..63) maps to 63.5 of 0..127; the bottom-left pixel (0, 63) covers 0..1 x 126..127
    assert small.tracks[0].tolist() == [[63.5, 63.5], [0.5, 126.5]]
    assert full.tracks[0].tolist() == [[63.5, 63.5], [0.0, 127.0]]
    grid = _compute_tracks(ctx(64), clip, [0, 8], [])
    assert grid.num_points == 64 and grid.tracks.max() <= 127.5 and tracker.shapes[-1] == (2, 64, 64, 3)


def test_agent_tracks_on_frames_at_the_configured_short_side(tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel

    clip = moving_square(tmp_path / "square.mp4")
    tracker = StillTracker()
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32}), "Tracks seen."])
    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(ScriptedChatModel(script), max_retries=1, retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=tracker, surprise=FakeSurprise(), track_short_side=64),
                               checkpointer=InMemorySaver())
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                       {"configurable": {"thread_id": "r"}})
    assert out["result"].status == "scored"
    assert tracker.shapes and all(s[1:] == (64, 64, 3) for s in tracker.shapes)


@pytest.mark.parametrize(("max_bytes", "decoded"), [(512 * 2**20, 33), (4 * 2**20, 32)])
def test_short_clips_are_decoded_whole_only_when_they_fit_a_quarter_of_the_frame_cache(tmp_path, max_bytes,
                                                                                         decoded):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, build_reward_agent
    from graph.backbone import Backbone
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel

    clip = moving_square(tmp_path / "square.mp4")  # 33 frames of 128x128: 1.6 MB decoded
    store = FrameStore(max_bytes=max_bytes)
    agent = build_reward_agent(AgentConfig(preset="task_blind"),
                               backbone=Backbone(ScriptedChatModel(full_script()), retry_wait=(0.0, 0.0)),
                               checkpointer=InMemorySaver(), frame_store=store)
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                       {"configurable": {"thread_id": "r"}})
    assert out["result"].status == "scored" and len(out["sample"]) == 32
    assert store.decoded == decoded  # all 33 in one pass, or only the 32 sampled


def test_motion_summary_is_in_pixels_of_the_frames_as_sent(tmp_path):
    """The same clip sent at 256 and at 128 pixels: the summary states the size the model sees and its
    positions scale with it; which points moved does not change (the speed threshold is a share of the
    diagonal, above its 0.5-pixel floor at both sizes)."""
    import re

    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    clip = moving_square(tmp_path / "square.mp4", size=256)  # a square moving right
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32}), "Seen."])

    def summary(long_side: int) -> str:
        agent = build_reward_agent(AgentConfig(preset="full", coordinates="pixels"),
                                   backbone=Backbone(ScriptedChatModel(script), retry_wait=(0.0, 0.0)),
                                   tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                                   checkpointer=InMemorySaver(), frame_store=FrameStore(long_side=long_side))
        out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                           {"configurable": {"thread_id": "r"}})
        return next(x for x in out["exchanges"] if x.get("overlay"))["text"]

    full, half = summary(512), summary(128)
    assert "over 32 frames (256x256)" in full and "over 32 frames (128x128)" in half
    moved = [re.search(r"(\d+) points moved", t).group(1) for t in (full, half)]
    assert moved[0] == moved[1] and int(moved[0]) > 0
    ends = [[float(v) for v in re.search(r"-> \(([-\d.]+),([-\d.]+)\)", t).groups()] for t in (full, half)]
    assert abs(ends[0][0] / 2 - ends[1][0]) <= 1 and abs(ends[0][1] / 2 - ends[1][1]) <= 1, (full, half)
