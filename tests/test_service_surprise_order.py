"""``/v1/surprise`` over chosen frames: ``frame_indices`` must not go backwards.

The windows are named by clip frame (`SurpriseEvidence.on_frames`), so indices listed out of order
(``[17, 16, ..., 1]``) gave windows whose start came after their end (start 17, end 2) and a text
"frames 17-2". The service now refuses a list that goes backwards with a 400 naming the first step back,
before any frame is decoded (like an index past the clip: a bad parameter, the caller's bug). A repeat in
order (``[0, 0, 1, ...]``, padding a short clip to a window) is kept, as documented: no window can end
before it starts.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from service_helpers import AUTH, TOKEN

from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings
from tools.surprise import SurpriseEvidence, SurpriseWindow


@pytest.fixture(scope="module")
def client(service_root, service_scorer):
    app = create_app(ToolSettings(), service_root, token=TOKEN, workers=1, tracker=LKTracker(), scorer=service_scorer)
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize(("indices", "step"), [
    (list(range(17, 0, -1)), "frame_indices[1] = 16 comes after 17"),
    ([*range(0, 8), 3, *range(8, 16)], "frame_indices[8] = 3 comes after 7"),
])
def test_indices_that_go_backwards_are_refused_before_decoding(client, monkeypatch, indices, step):
    import tools.service_jobs as jobs

    decoded = []
    real = jobs.decode_frames
    monkeypatch.setattr(jobs, "decode_frames", lambda *a, **kw: decoded.append(1) or real(*a, **kw))
    r = client.post("/v1/surprise", json={"path": "clip.mp4", "frame_indices": indices}, headers=AUTH)
    assert r.status_code == 400, r.text
    assert step in r.json()["detail"] and "in increasing order" in r.json()["detail"], r.json()
    assert decoded == []


def test_indices_in_order_with_repeats_name_windows_forward(client):
    indices = [0, 0, *range(1, 16)]  # 17 frames: a repeat in order pads the clip
    r = client.post("/v1/surprise", json={"path": "clip.mp4", "frame_indices": indices}, headers=AUTH)
    assert r.status_code == 200, r.text
    windows = r.json()["windows"] + r.json()["top"]
    assert windows and all(w["start"] <= w["end"] and w["frames"] == sorted(w["frames"]) for w in windows)
    assert [(w["start"], w["end"]) for w in r.json()["windows"]] == [(0, 14), (0, 15)]


def test_on_frames_refuses_indices_that_go_backwards():
    window = SurpriseWindow(start=0, end=1, frames=[0, 1], surprise=0.1)
    ev = SurpriseEvidence(status="ok", windows=[window], top=[window], mean=0.1, num_frames=2, window_size=2,
                          context_frames=1)
    assert ev.on_frames([4, 4]).windows[0].start == 4
    with pytest.raises(ValueError, match=r"frame_indices\[1\] = 3 comes after 5"):
        ev.on_frames([5, 3])
