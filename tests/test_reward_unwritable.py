"""A rollout the reward adapters cannot write as mp4 (no frames, a frame without pixels) is ineligible on its
own, with the reason; the batch's other clips are still scored (training/http_reward.py)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from tests.http_stubs import POLL_S, send_json
from training.rewards import AgentReward, HttpAgentReward, call_reward

BAD = [np.zeros((0, 32, 32, 3), np.uint8), np.zeros((3, 0, 32, 3), np.uint8)]


class _Handler(BaseHTTPRequestHandler):
    items: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.items.append([item["instruction"] for item in body["items"]])
        send_json(self, {"results": [{"reward": 0.5, "reasons": [], "run_id": item["instruction"]}
                                     for item in body["items"]]})

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("bad", BAD, ids=["no-frames", "no-rows"])
def test_the_http_reward_sends_the_clips_it_could_write_and_names_the_other(bad):
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    try:
        _Handler.items = []
        fn = HttpAgentReward(url=f"http://127.0.0.1:{server.server_port}/score", startup_wait_s=0)
        good = np.full((3, 16, 16, 3), 100, np.uint8)
        out = call_reward(fn, "http", [good, bad, good], ["a", "b", "c"], fps=8.0)
    finally:
        server.shutdown()
    assert _Handler.items == [["a", "c"]]  # the unwritable clip never reached the service
    assert out.rewards == [0.5, None, 0.5] and out.counts["none"] == 1 and out.counts["error"] == 0
    assert out.run_ids == ["a", None, "c"]
    assert "could not be written" in fn.last_reasons[1][0]
    assert out.components["T"] == [None, None, None]


def test_the_agent_reward_scores_the_clips_it_could_write(tmp_path):
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import full_script

    settings = BackboneSettings(inspect_mode="plan", cache_path=None, traces_path=str(tmp_path / "traces.sqlite"))
    fn = AgentReward(preset="decomposed", video_dir=str(tmp_path / "clips"), model=ScriptedChatModel(full_script()),
                     settings=settings)
    good = np.random.default_rng(0).integers(0, 255, (9, 32, 32, 3), dtype=np.uint8)
    out = call_reward(fn, "agent", [BAD[0], good], ["pick the cup", "pick the cup"], fps=8.0)
    assert out.rewards[0] is None and out.rewards[1] is not None
    assert out.counts["none"] == 1 and out.counts["error"] == 0
    assert out.run_ids[0] is None and out.run_ids[1]
    assert "could not be written" in fn.last_reasons[0][0]
    assert out.components["T"][0] is None


def test_with_unwritten_keeps_a_batch_wide_usage_record():
    # usage may be one dict for the whole batch (training/reward_outcome.py); spreading it per clip indexed
    # the dict by clip number: a KeyError instead of the batch's rewards
    from training.http_reward import with_unwritten
    from training.reward_outcome import RewardBatch

    batch = RewardBatch([0.5, 0.25], [[], []], usage={"calls": 3})
    out = with_unwritten(batch, [None, "the rollout could not be written", None])
    assert out.rewards == [0.5, None, 0.25]
    assert out.usage == {"calls": 3}
    listed = with_unwritten(RewardBatch([0.5], [[]], usage=[{"calls": 1}]), ["unwritable", None])
    assert listed.usage == [{}, {"calls": 1}]
