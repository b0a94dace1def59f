"""Every ineligible result the reward service answers carries the fault behind it, and its "kind" is read from
those faults (graph/reward_service.py): the results the service made itself (a bad item, a clip it could not
write, a run that raised) said "kind": "error" with no fault, so a client reading faults (`RewardResult.outage`,
`raa score-batch`'s resume) saw a result the agent had judged ineligible for the clip, not an outage."""

from __future__ import annotations

import base64
import pathlib

from fastapi.testclient import TestClient

from graph.reward_service import create_reward_app
from graph.run_results import ineligible_result
from graph.schemas import Fault, RewardResult


def _post(app, items):
    with TestClient(app, raise_server_exceptions=False) as c:
        res = c.post("/v1/score", json={"items": items})
    assert res.status_code == 200, res.text
    return res.json()["results"]


def _check_faulted(answer: dict) -> RewardResult:
    """The answer read back as a RewardResult, after checking it has a fault and a "kind" that agrees with them."""
    result = RewardResult.model_validate({k: v for k, v in answer.items() if k != "kind"})
    assert result.status == "ineligible" and result.faults, answer
    assert result.reasons[0] == result.faults[0].reason(), answer
    assert answer["kind"] == ("error" if result.outage else None), answer
    return result


def test_results_the_service_made_carry_an_outage_fault(monkeypatch):
    import graph.reward_service

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        raise RuntimeError("escaped from the graph")

    real_write = pathlib.Path.write_bytes

    def write_bytes(self, data):
        if self.name == "00001.mp4":
            raise OSError(28, "No space left on device", str(self))
        return real_write(self, data)

    monkeypatch.setattr(graph.reward_service, "arun_agent", fake_run)
    monkeypatch.setattr(pathlib.Path, "write_bytes", write_bytes)
    clip = base64.b64encode(b"not really an mp4").decode("ascii")
    items = [{"video_b64": "not base64!!", "instruction": "x"},
             {"video_b64": clip, "instruction": "x"},
             {"video_b64": clip, "instruction": "x"},
             {"video_b64": clip, "instruction": 7},
             "not an object"]
    results = [_check_faulted(a) for a in _post(create_reward_app(object(), "full"), items)]
    assert [r.outage for r in results] == [True] * 5
    assert [(f.stage, f.kind) for r in results for f in r.faults] == [
        ("service", "internal"), ("service", "internal"), ("agent", "internal"), ("service", "internal"),
        ("service", "internal")]
    assert "item 0: video_b64 is not valid base64" in results[0].faults[0].message
    written = results[1].faults[0].message
    assert "item 1: the clip cannot be written on the service host" in written and "/tmp" not in written
    assert "item 1's clip" in written  # its path told as the client is told it (`client_text`)
    assert "the run failed on the service host (RuntimeError: escaped from the graph)" in results[2].reasons[0]
    assert "instruction must be a string" in results[3].reasons[0]


def test_an_agents_result_keeps_its_own_faults_and_kind(monkeypatch):
    """The agent's own results are answered as they are: an outage fault says "error", the clip's own says None."""
    import graph.reward_service

    faults = {"00000.mp4": Fault(stage="observe", kind="timeout", message="no reply"),
              "00001.mp4": Fault(stage="quality", kind="input", message="instruction is empty or whitespace only")}

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        fault = faults[pathlib.Path(video).name]
        return ineligible_result(preset, fault.reason(), run_id, [fault])

    monkeypatch.setattr(graph.reward_service, "arun_agent", fake_run)
    clip = base64.b64encode(b"clip").decode("ascii")
    answers = _post(create_reward_app(object(), "full"), [{"video_b64": clip, "instruction": "x"}] * 2)
    results = [_check_faulted(a) for a in answers]
    assert [a["kind"] for a in answers] == ["error", None]
    assert [r.faults[0].kind for r in results] == ["timeout", "input"]
