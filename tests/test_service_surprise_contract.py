"""Tool service: surprise evidence that breaks the scorer contract (`tools.surprise.evidence_problem`) is a
surprise "run" fault of the service, as in-process, never a bare 500 nor a 200 carrying it (in-process test
client)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_helpers import NPY, npy

from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings
from tools.surprise import SurpriseEvidence, SurpriseWindow


class _OffContract:
    """A server-side scorer breaking one part of the `SurpriseScorer` contract on ``T`` frames."""

    def __init__(self, how: str) -> None:
        self.how = how

    def score(self, frames):
        t = len(frames)
        end = t + 4 if self.how == "past" else t - 1
        value = float("nan") if self.how == "nan" else 0.25
        window = SurpriseWindow(start=0, end=end, frames=list(range(end + 1)), surprise=value)
        evidence = SurpriseEvidence(status="ok", windows=[window], top=[window], mean=value,
                                    num_frames=t + 1 if self.how == "frames" else t)
        return evidence.model_dump() if self.how == "type" else evidence


@pytest.mark.parametrize(("how", "message"), [
    ("nan", "the scorer returned a NaN or infinite surprise"),
    ("frames", "the scorer returned evidence over 19 frames for 18 frames"),
    ("past", "the scorer returned windows past the 18 frames it was given"),
    ("type", "the scorer returned dict, not SurpriseEvidence"),
])
@pytest.mark.parametrize("body", ["path", "npy", "npy_indices"])
def test_surprise_breaking_the_scorer_contract_is_a_run_fault(service_root, how, message, body):
    """A NaN surprise (V-JEPA 2 in float16 can overflow) failed when the answer was rendered, after the
    request's fault handling: a bare 500 "Internal Server Error", which the client reported as a transport
    fault of the service where the in-process agent reports the scorer's run fault. Evidence over other
    frames, or windows past them, was answered 200 (or, with frame_indices, a fault of the renaming)."""
    app = create_app(ToolSettings(), service_root, tracker=LKTracker(), scorer=_OffContract(how))
    frames = np.zeros((18, 16, 16, 3), np.uint8)
    with TestClient(app, raise_server_exceptions=False) as c:
        if body == "path":
            r = c.post("/v1/surprise", json={"path": "clip.mp4"})  # 18 frames
        else:
            query = "?frame_indices=" + str(list(range(2, 20))) if body == "npy_indices" else ""
            r = c.post(f"/v1/surprise{query}", content=npy(np.zeros((20, 16, 16, 3), np.uint8)
                                                          if body == "npy_indices" else frames), headers=NPY)
    assert r.status_code == 500, r.text
    assert r.headers["content-type"] == "application/json", r.text
    assert r.json()["fault"] == {"tool": "surprise", "kind": "run", "message": message}
