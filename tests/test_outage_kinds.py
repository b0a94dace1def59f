"""An outage (the backbone or a tool unreachable, a setting, a bug) against the clip's own problem (an undecodable
video, a bad instruction): the result says which by its faults, and the trainer counts an outage as
``ineligible_error``, not as the agent's ⊥ (``ineligible_none``), in process and over the reward service."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from graph_scripts import full_script, garbage_file, make_agent, moving_square, run, textured_frames

from graph.schemas import Fault, RewardResult

DOWN = ConnectionError("connection refused: the LLM endpoint is down")


def _down_script() -> dict:
    """Every model call fails in transport (the endpoint is down for the whole run)."""
    return {stage: [DOWN] for stage in full_script()}


@pytest.mark.parametrize(("kind", "message", "outage"), [
    ("transport", "ConnectionError after 2 attempts", True),
    ("timeout", "no reply within 60s", True),
    ("settings", "the model cannot give json_schema structured output", True),
    ("tool", "service transport: connection refused", True),
    ("internal", "KeyError: 'x'", True),
    ("video", "VideoError: invalid data found when processing input", False),
    ("input", "instruction is empty or whitespace only", False),
    ("refused", "the model refused: unsafe content", False),
    ("invalid_reply", "3 replies failed Assessment validation", False),
])
def test_a_fault_says_whether_it_is_an_outage(kind, message, outage):
    assert Fault(stage="observe", kind=kind, message=message).outage is outage


def test_a_video_fault_of_the_machine_not_the_clip_is_an_outage():
    """A read the machine failed (EIO, too many open files) or a clip not found where it was just written is the
    environment's, as `raa score-batch --retry-ineligible` reads them (`tools.video_errors`)."""
    from tools.video_errors import environmental

    message = "VideoNotFoundError: clip.mp4: cannot be read (OSError: [Errno 24] Too many open files)"
    assert environmental(message)
    assert Fault(stage="quality", kind="video", message=message).outage


def test_a_backbone_outage_is_recorded_in_the_result_as_faults(tmp_path):
    agent, _ = make_agent("full", _down_script())
    result = run(agent, moving_square(tmp_path / "a.mp4"))["result"]
    assert result.reward is None and result.faults, result.reasons
    assert {f.kind for f in result.faults} == {"transport"} and result.outage


def test_an_undecodable_clip_is_the_clips_own_problem_not_an_outage(tmp_path):
    agent, _ = make_agent("full", full_script())
    result = run(agent, garbage_file(tmp_path / "g.mp4"))["result"]
    assert result.reward is None and [f.kind for f in result.faults] == ["video"] and not result.outage


def test_a_verdict_has_no_faults():
    assert not RewardResult(status="scored", reward=0.5).outage
    assert RewardResult(status="scored", reward=0.5).faults == []


def test_the_service_reply_says_an_outage_is_an_error_and_carries_its_faults(tmp_path):
    from graph.reward_service import create_reward_app

    down, _ = make_agent("full", _down_script())
    good = base64.b64encode(moving_square(tmp_path / "a.mp4").read_bytes()).decode("ascii")
    bad = base64.b64encode(garbage_file(tmp_path / "g.mp4").read_bytes()).decode("ascii")
    with TestClient(create_reward_app(down, "full")) as c:
        res = c.post("/v1/score", json={"items": [{"video_b64": good, "instruction": "push it"},
                                                  {"video_b64": bad, "instruction": "push it"}]})
    assert res.status_code == 200, res.text
    outage, undecodable = res.json()["results"]
    assert outage["reward"] is None and outage["kind"] == "error", outage
    assert {f["kind"] for f in outage["faults"]} == {"transport"}
    assert undecodable["kind"] is None and [f["kind"] for f in undecodable["faults"]] == ["video"]


def test_the_trainer_counts_a_backbone_outage_over_the_service_as_ineligible_error(tmp_path):
    from graph.reward_service import create_reward_app
    from training.rewards import HttpAgentReward, call_reward

    down, _ = make_agent("full", _down_script())
    fn = HttpAgentReward(url="http://svc/v1/score", startup_wait_s=0)
    rng = np.random.default_rng(0)
    clips = [textured_frames(rng) for _ in range(2)]
    with TestClient(create_reward_app(down, "full")) as c:
        fn._post = lambda url, body: c.post("/v1/score", content=body).json()  # noqa: SLF001 (the transport)
        out = call_reward(fn, "http", clips, ["push it"] * 2)
    assert out.rewards == [None, None]
    assert out.counts == {"none": 0, "nan": 0, "inf": 0, "error": 2}, out.reasons
    assert "transport" in (out.reasons[0] or "")


def test_the_trainer_counts_a_backbone_outage_in_process_as_ineligible_error(tmp_path):
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel
    from training.rewards import AgentReward, call_reward

    settings = BackboneSettings(max_retries=0, cache_path=None, traces_path=str(tmp_path / "t.sqlite"),
                                inspect_mode="plan")
    fn = AgentReward(preset="decomposed", model=ScriptedChatModel(_down_script()), settings=settings,
                     video_dir=str(tmp_path / "clips"))
    rng = np.random.default_rng(0)
    clips = [textured_frames(rng) for _ in range(2)]
    out = call_reward(fn, "agent", clips, ["push it"] * 2, iteration=1, fps=8.0)
    assert out.rewards == [None, None]
    assert out.counts == {"none": 0, "nan": 0, "inf": 0, "error": 2}, out.reasons
    assert out.kinds == ["error", "error"]


def test_the_faults_in_a_reply_never_name_the_service_s_temporary_clip_folder(tmp_path):
    """The reasons were told the client as `item N's clip` (`client_text`), but an undecodable clip's fault
    message named `/tmp/raa-reward-XXXX/00000.mp4`."""
    from graph.reward_service import create_reward_app

    agent, _ = make_agent("full", full_script())
    bad = base64.b64encode(garbage_file(tmp_path / "g.mp4").read_bytes()).decode("ascii")
    with TestClient(create_reward_app(agent, "full")) as c:
        res = c.post("/v1/score", json={"items": [{"video_b64": bad, "instruction": "push it"}]})
    (result,) = res.json()["results"]
    assert result["faults"] and "item 0's clip" in result["faults"][0]["message"], result["faults"]
    assert "raa-reward-" not in json.dumps(result)


def test_a_trace_database_that_cannot_be_written_is_an_outage(tmp_path, monkeypatch):
    """A run whose id could not be claimed in the trace database (a full disk, a locked file) never ran: its
    result had no fault, so the trainer counted a broken trace store as the agent's verdict on every clip."""
    import asyncio

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from graph import run_claims
    from graph.api import arun_agent

    async def broken(file, run_id, max_age_s):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_claims, "claim", broken)
    agent, _ = make_agent("full", full_script())

    async def go():
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "t.sqlite")) as saver:
            agent.checkpointer = saver
            return await arun_agent(agent, str(moving_square(tmp_path / "a.mp4")), "push it", "run-1", "full")

    result = asyncio.run(go())
    assert result.reward is None and "could not be claimed" in result.reasons[0]
    assert result.outage and [f.kind for f in result.faults] == ["internal"]
