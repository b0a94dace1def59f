"""Frame sizes: frames decoded at a bounded size for the tools (the reader's `size`, `tool_size`, the
FrameStore's `scaled_frames`, the agent's and the tool service's short-side settings), a frame cache whose
frames are separate arrays (evicting one frees it), and short clips prefetched only when they fit.
Tracking and overlays at bounded sizes are in test_track_sizes.py."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from fastapi.testclient import TestClient
from graph_scripts import FakeSurprise, full_script, moving_square

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
    kept = [f for i in range(24) if (f := store._frames.get((store.version(str(wide)), i))) is not None]
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
    with pytest.raises(ValueError, match="RAA_SURPRISE_SHORT_SIDE='10'"):
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


@pytest.mark.parametrize("field", ["extra_short_side", "surprise_short_side", "track_short_side"])
@pytest.mark.parametrize("value", [0, -8, 1.5, True])
def test_a_bad_tool_short_side_is_refused_when_the_tools_are_built(field, value):
    from graph.context import AgentTools, ToolProvider

    for cls in (AgentTools, ToolProvider):
        with pytest.raises(ValueError, match=field):
            cls(**{field: value})
    assert AgentTools(**{field: None}).__dict__[field] is None  # None = full size stays allowed


@pytest.mark.parametrize("kwargs, word", [({"long_side": 0}, "long_side"), ({"quality": 0}, "quality"),
                                          ({"quality": 101}, "quality"), ({"long_side": 2.5}, "long_side")])
def test_a_bad_frame_store_setting_is_refused_when_built(kwargs, word):
    from graph.frame_store import FrameStore

    with pytest.raises(ValueError, match=word):
        FrameStore(**kwargs)
