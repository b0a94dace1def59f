"""``/v1/track`` over chosen frames: ``frame_indices`` must not go backwards, as for ``/v1/surprise``.

The tracker follows the frames in the order given, so frames listed out of time order (``[9, 3, 12]``)
were tracked across shuffled time: each step of a track jumped back and forth in the clip, and the answer
was a 200 whose tracks were no motion track (the summary sorts its frames, but the tracks it sorts were
already computed across the jumps). The service now refuses such a list with the surprise endpoint's own
400 (`tools.sampling.order_problem`), before any frame is decoded, rather than sorting it: sorted, the
answer would no longer line up with the request and ``queries``' ``t`` (a position among the listed
frames) would name other frames. A repeat in order is kept: the tracker sees the same frame twice (a step
of zero pixels, counted as one clip frame by the summary), and the answer keeps one entry per listed frame.
The agent's own callers (track_motion's stretch, the observed sample) always list frames in increasing
order; the local tracking path refuses any other order the same way, as the tool's fault.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from service_helpers import AUTH, TOKEN

from graph.nodes.tracking import _as_fault, _compute_tracks, track_frames
from tools.errors import ToolFault
from tools.motion import LKTracker
from tools.sampling import order_problem, uniform_indices
from tools.service import create_app
from tools.settings import ToolSettings


@pytest.fixture(scope="module")
def client(service_root):
    app = create_app(ToolSettings(), service_root, token=TOKEN, workers=1, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize(("request_fields", "step"), [
    ({"grid_size": 2, "frame_indices": list(range(17, -1, -1))}, "frame_indices[1] = 16 comes after 17"),
    ({"grid_size": 2, "frame_indices": [0, 4, 8, 3, 12]}, "frame_indices[3] = 3 comes after 8"),
    ({"queries": [[0, 20, 20]], "frame_indices": [0, 5, 5, 2], "summary": True}, "frame_indices[3] = 2 comes after 5"),
])
def test_track_indices_that_go_backwards_are_refused_before_decoding(client, monkeypatch, request_fields, step):
    import tools.service_jobs as jobs

    decoded = []
    real = jobs.decode_frames
    monkeypatch.setattr(jobs, "decode_frames", lambda *a, **kw: decoded.append(1) or real(*a, **kw))
    r = client.post("/v1/track", json={"path": "clip.mp4", **request_fields}, headers=AUTH)
    assert r.status_code == 400, r.text
    detail = r.json()["detail"]
    assert detail.startswith("bad track request: ") and step in detail and "in increasing order" in detail, detail
    assert decoded == []


def test_track_indices_backwards_in_an_upload_form_are_refused_too(client, service_root):
    clip = (service_root / "clip.mp4").read_bytes()
    r = client.post("/v1/track", files={"video": ("c.mp4", clip)}, data={"grid_size": "2", "frame_indices": "[3, 1]"},
                    headers=AUTH)
    assert r.status_code == 400 and "frame_indices[1] = 1 comes after 3" in r.json()["detail"], r.text


def test_track_indices_in_order_with_repeats_are_tracked_as_listed(client):
    indices = [0, 0, 2, 4, 4, 6, 8, 10, 12, 14, 16]
    r = client.post("/v1/track", json={"path": "clip.mp4", "queries": [[1, 32, 32]], "frame_indices": indices,
                                       "summary": True}, headers=AUTH)
    assert r.status_code == 200, r.text
    tracks = r.json()["tracks"]
    assert tracks["frame_indices"] == indices and len(tracks["tracks"]) == len(indices)
    xs = [row[0][0] for row in tracks["tracks"]]
    assert xs[1] == pytest.approx(xs[0], abs=0.5) and xs[4] == pytest.approx(xs[3], abs=0.5)  # a repeat: no step
    # the clip's texture slides 2 px left per frame: the point moves left, about 32 px over frames 0..16
    assert xs[-1] - xs[0] == pytest.approx(-32, abs=4)
    assert r.json()["summary"]["regions"], r.json()["summary"]


@pytest.mark.parametrize(("n", "start", "end"), [(18, 0, 17), (18, 17, 0), (300, 250, 10), (2, 1, 1), (1, 0, 0),
                                                 (100, 99, 99), (1000, 0, 999)])
def test_the_agents_own_frames_to_track_are_in_increasing_order(n, start, end):
    """track_motion's stretch (a reversed one included) and the observed sample reflect and the prefetch track."""
    assert order_problem(track_frames(n, start, end)) is None
    assert order_problem(uniform_indices(n, 32)) is None


def test_local_tracking_refuses_frames_that_go_backwards_before_tracking():
    def tracker():
        raise AssertionError("the tracker was asked for")

    ctx = SimpleNamespace(tools=SimpleNamespace(tracker=tracker, track_short_side=576), frames=None)
    with pytest.raises(ValueError, match=r"frame_indices\[2\] = 4 comes after 9") as info:
        _compute_tracks(ctx, "clip.mp4", [0, 9, 4], [])
    fault = _as_fault(info.value)
    assert isinstance(fault, ToolFault) and fault.tool == "motion" and "comes after 9" in str(fault)


def test_order_problem_is_the_surprise_check():
    from tools import surprise

    assert surprise.order_problem is order_problem
    assert order_problem([0, 0, 1]) is None and order_problem([]) is None and order_problem([2, 1]) is not None
