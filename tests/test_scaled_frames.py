"""Frames decoded at a bounded size for the surprise scorer: the reader's `size`, the FrameStore's
`scaled_frames`, the agent's and the tool service's use of `surprise_short_side`, and the setting."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from fastapi.testclient import TestClient
from graph_scripts import FakeSurprise, full_script, moving_square
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


def test_read_all_frames_bounds_the_short_side(wide):
    frames = read_all_frames(wide, short_side=48)
    assert frames.shape == (24, 48, 80, 3)
    assert np.array_equal(frames[5:8], read_frames(wide, [5, 6, 7], size=(80, 48)))
    assert read_all_frames(wide, short_side=500).shape == (24, 96, 160, 3)


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


def test_toolbox_passes_its_setting_to_the_agent():
    from graph.context import tool_provider
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    assert tool_provider(Toolbox(ToolSettings(surprise_short_side=300))).surprise_short_side == 300
    assert tool_provider(Toolbox(ToolSettings(surprise_short_side=None))).surprise_short_side is None
    assert tool_provider(Toolbox(ToolSettings())).surprise_short_side == 448


def test_setting_from_the_environment():
    from tools.settings import ToolSettings

    assert ToolSettings.from_env({}).surprise_short_side == 448
    assert ToolSettings.from_env({"RAA_SURPRISE_SHORT_SIDE": "300"}).surprise_short_side == 300
    assert ToolSettings.from_env({"RAA_SURPRISE_SHORT_SIDE": " Full "}).surprise_short_side is None
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
