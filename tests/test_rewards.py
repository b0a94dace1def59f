"""training/rewards.py: validation of reward callables and the built-in adapters."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from training.grpo import group_advantages
from training.rewards import (
    BrightnessReward,
    HttpAgentReward,
    MotionReward,
    RewardLengthError,
    build_reward,
    call_reward,
)


def _clips(n: int = 2, t: int = 3) -> list[np.ndarray]:
    return [np.zeros((t, 4, 4, 3), dtype=np.uint8) for _ in range(n)]


def test_nan_inf_none_are_ineligible_and_counted():
    def reward(videos, prompts, **meta):
        return [0.5, None, float("nan"), float("inf"), -float("inf"), 1]

    out = call_reward(reward, "fake", _clips(6), ["p"] * 6)
    assert out.rewards == [0.5, None, None, None, None, 1.0]
    assert out.counts == {"none": 1, "nan": 1, "inf": 2, "error": 0}
    assert out.ineligible_count == 4
    assert out.reasons[0] is None and "None" in out.reasons[1] and "nan" in out.reasons[2]


def test_wrong_length_names_the_reward():
    with pytest.raises(RewardLengthError, match="reward 'short'.*1 values for 3 videos"):
        call_reward(lambda v, p, **m: [1.0], "short", _clips(3), ["p"] * 3)
    with pytest.raises(RewardLengthError, match="reward 'scalar' returned float"):
        call_reward(lambda v, p, **m: 1.0, "scalar", _clips(1), ["p"])


def test_async_reward_is_awaited_and_meta_passed():
    seen = {}

    async def reward(videos, prompts, **meta):
        await asyncio.sleep(0)
        seen.update(meta)
        return [float(i) for i in range(len(videos))]

    out = call_reward(reward, "async", _clips(3), ["a", "b", "c"], iteration=4, fps=8.0)
    assert out.rewards == [0.0, 1.0, 2.0] and seen == {"iteration": 4, "fps": 8.0}


def test_raising_reward_makes_batch_ineligible_with_reason():
    def reward(videos, prompts, **meta):
        raise RuntimeError("backend down")

    out = call_reward(reward, "flaky", _clips(2), ["p", "q"])
    assert out.rewards == [None, None] and out.counts["error"] == 2
    assert "backend down" in out.reasons[0]


def test_all_ineligible_group_skipped_and_counted():
    out = call_reward(lambda v, p, **m: [None, float("nan"), 0.2, 0.8], "r", _clips(4), ["p"] * 4)
    adv, valid, stats = group_advantages(out.rewards, [0, 0, 1, 1], a_max=5.0, eps=0.0)
    assert stats.skipped_groups == 1 and stats.ineligible_count == 2
    assert valid.tolist() == [False, False, True, True] and adv.tolist() == pytest.approx([0, 0, -1, 1])


def test_brightness_reward_region_and_skip_first():
    clip = np.zeros((3, 4, 4, 3), dtype=np.uint8)
    clip[0] = 255  # conditioning frame: ignored
    clip[1:, :2, :2] = 255  # top-left quarter bright in generated frames
    top_left = BrightnessReward(region=(0.0, 0.0, 0.5, 0.5))
    whole = BrightnessReward()
    assert top_left([clip], ["p"]) == [pytest.approx(1.0)]
    assert whole([clip], ["p"]) == [pytest.approx(0.25)]
    assert BrightnessReward(target="dark")([clip], ["p"]) == [pytest.approx(0.75)]
    # a malformed clip is ineligible, the others still scored
    assert whole([np.zeros((3, 4, 4), np.float32), clip], ["p", "q"]) == [None, pytest.approx(0.25)]
    with pytest.raises(ValueError, match="region"):
        BrightnessReward(region=(0.5, 0.0, 0.2, 1.0))


def test_motion_reward_hand_computed():
    clip = np.zeros((3, 2, 2, 3), dtype=np.uint8)
    clip[1] = 51  # frame diffs: 51 then 51 -> mean 51/255 = 0.2
    assert MotionReward()([clip], ["p"]) == [pytest.approx(0.2)]
    assert MotionReward()([clip[:1]], ["p"]) == [None]


def test_build_reward_errors_before_model_load():
    assert isinstance(build_reward("brightness", {"region": [0, 0, 1, 0.5]}), BrightnessReward)
    with pytest.raises(ValueError, match="reward 'brightness': bad reward_options"):
        build_reward("brightness", {"colour": "red"})
    with pytest.raises(ValueError, match="unknown reward"):
        build_reward("vibes", {})


class _Handler(BaseHTTPRequestHandler):
    mode = "ok"

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if _Handler.mode == "fail":
            self.send_response(500)
            self.end_headers()
            return
        results = [{"reward": None if i == 1 else 0.1 * i, "reasons": [item["instruction"]]}
                   for i, item in enumerate(body["items"])]
        data = json.dumps({"results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_http_reward_roundtrip_and_failure():
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        clips = [np.full((3, 16, 16, 3), 100, dtype=np.uint8) for _ in range(3)]
        fn = HttpAgentReward(url=f"http://127.0.0.1:{server.server_port}/score", timeout_s=30)
        out = call_reward(fn, "http", clips, ["a", "b", "c"], fps=8.0)
        assert out.rewards == [0.0, None, pytest.approx(0.2)] and out.counts["none"] == 1
        assert fn.last_reasons == [["a"], ["b"], ["c"]]
        _Handler.mode = "fail"
        out = call_reward(fn, "http", clips, ["a", "b", "c"], fps=8.0)
        assert out.rewards == [None, None, None]
        assert "http reward failed" in fn.last_reasons[0][0]
    finally:
        _Handler.mode = "ok"
        server.shutdown()


def test_agent_reward_calls_ascore_videos(monkeypatch, tmp_path):
    import os

    import graph.api
    from training.rewards import AgentReward

    seen = {}

    class _Result:
        def __init__(self, reward, reasons):
            self.reward, self.reasons = reward, reasons

    async def fake_ascore_videos(items, config, *, model=None, max_concurrency=16):
        seen.update(items=list(items), preset=config.preset, conc=max_concurrency)
        assert all(os.path.getsize(i["video"]) > 0 for i in items)  # real mp4 files while scoring
        return [_Result(0.75, []), _Result(None, ["contract could not be verified"])]

    monkeypatch.setattr(graph.api, "ascore_videos", fake_ascore_videos)
    fn = AgentReward(preset="no_audit", max_concurrency=3, video_dir=str(tmp_path))
    clips = [np.full((5, 16, 16, 3), 90, dtype=np.uint8) for _ in range(2)]
    out = call_reward(fn, "agent", clips, ["pick the cup", "open the drawer"], fps=8.0, iteration=2)
    assert out.rewards == [0.75, None] and out.counts["none"] == 1
    assert [i["instruction"] for i in seen["items"]] == ["pick the cup", "open the drawer"]
    assert seen["preset"] == "no_audit" and seen["conc"] == 3
    assert fn.last_reasons[1] == ["contract could not be verified"]
    assert not any(tmp_path.iterdir())  # temporary clips removed after scoring


def test_async_reward_called_from_inside_a_running_event_loop():
    """call_reward from sync code that runs inside an event loop (a notebook) still awaits the reward."""
    async def reward(videos, prompts, **meta):
        await asyncio.sleep(0)
        return [0.5] * len(videos)

    async def cell():
        return call_reward(reward, "async", _clips(2), ["a", "b"])

    assert asyncio.run(cell()).rewards == [0.5, 0.5]
