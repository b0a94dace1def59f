"""The tool service's grid: ``grid_size`` alone is the tracker protocol's grid on frame 0 (what
`RemoteMotionTracker.track` forwards, so remote and in-process tracks stay identical), and
``grid_frames: "window"`` gives a service user the agent's grid (`tools.motion.grid.track_window_grid`: also
queried on the middle and last frames where earlier points left cells uncovered), so an object that enters
the view later is tracked: asked for a grid, the service read "0 points moved" where the agent saw motion."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_helpers import AUTH, NPY, npy
from test_grid_query_frames import entering_square

from tools.motion import LKTracker
from tools.motion.grid import track_window_grid
from tools.service import create_app
from tools.settings import ToolSettings


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from service_helpers import TOKEN

    app = create_app(ToolSettings(), tmp_path_factory.mktemp("grid"), token=TOKEN, tracker=LKTracker(),
                     enable_surprise=False)
    with TestClient(app) as c:
        yield c


def _track(client, frames: np.ndarray, query: str) -> dict:
    r = client.post(f"/v1/track?summary=true&{query}", content=npy(frames), headers=NPY)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_window_grid_request_tracks_an_object_entering_later_as_the_agent_does(client):
    from tools.motion import MotionTracks

    frames = entering_square()
    window = _track(client, frames, "grid_size=8&grid_frames=window")
    tracks = MotionTracks.from_dict(window["tracks"])
    same = track_window_grid(LKTracker(), frames, 8)  # the agent's grid tracks, in-process
    np.testing.assert_array_equal(tracks.query_frames, same.query_frames)
    np.testing.assert_allclose(tracks.tracks, same.tracks, atol=1e-4)
    assert (tracks.query_frames > 0).any() and window["summary"]["moving_points"] >= 3, window["summary"]
    first = _track(client, frames, "grid_size=8")  # the protocol's grid on frame 0: the square is missed
    assert first["summary"]["points"] == 64 and first["summary"]["moving_points"] < window["summary"]["moving_points"]
    assert MotionTracks.from_dict(first["tracks"]).query_frames.tolist() == [0] * 64
    explicit = _track(client, frames, "grid_size=8&grid_frames=first")
    assert explicit["tracks"] == first["tracks"]


@pytest.mark.parametrize(("query", "message"), [
    ("grid_frames=window&queries=[[0,5,5]]", "grid_frames 'window' needs grid_size"),
    ("grid_frames=window", "grid_frames 'window' needs grid_size"),
    ("grid_size=2&grid_frames=all", "grid_frames must be 'first' or 'window'"),
])
def test_bad_grid_frames_requests_are_400(client, query, message):
    r = client.post(f"/v1/track?{query}", content=npy(np.zeros((4, 8, 8, 3), np.uint8)), headers=NPY)
    assert r.status_code == 400 and message in r.json()["detail"], r.text



@pytest.mark.parametrize("grid_frames", ["first", "window"])
@pytest.mark.parametrize(("shape", "query"), [((0, 8, 8, 3), ""), ((4, 8, 8, 3), "&frame_indices=[]")])
def test_no_frames_to_track_is_a_400_for_either_grid(client, grid_frames, shape, query):
    """Zero frames (an empty .npy, or ``frame_indices: []``) were a 400 for the frame-0 grid but a 500 "motion run"
    fault for ``grid_frames: "window"``: the window grid's query frames were computed before the frames were checked."""
    r = client.post(f"/v1/track?grid_size=2&grid_frames={grid_frames}{query}", content=npy(np.zeros(shape, np.uint8)),
                    headers=NPY)
    assert r.status_code == 400 and "empty" in r.json()["detail"], r.text


class _ReturnsNone:
    def track(self, frames, *, grid_size=None, queries=None):
        return None


def test_a_window_grid_from_a_tracker_breaking_the_contract_is_a_run_fault(tmp_path):
    from service_helpers import TOKEN

    app = create_app(ToolSettings(), tmp_path, token=TOKEN, tracker=_ReturnsNone(), enable_surprise=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/track?grid_size=2&grid_frames=window", content=npy(np.zeros((5, 8, 8, 3), np.uint8)),
                   headers=NPY)
    assert r.status_code == 500, r.text
    assert r.json()["fault"] == {"tool": "motion", "kind": "run", "message": "the tracker returned NoneType for 5 frames"}


def test_the_client_asks_for_the_window_grid_by_path(tmp_path):
    from service_helpers import TOKEN, serve

    from tools.client import RemoteMotionTracker, ToolServiceClient
    from tools.motion import MotionTracks
    from tools.video import write_video

    write_video(tmp_path / "enter.mp4", entering_square(), fps=16.0)
    app = create_app(ToolSettings(), tmp_path, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN) as c:
        remote = RemoteMotionTracker(c)
        window = remote.track_path("enter.mp4", grid_size=8, grid_frames="window", summary=True)
        first = remote.track_path("enter.mp4", grid_size=8, summary=True)
    assert (MotionTracks.from_dict(window["tracks"]).query_frames > 0).any()
    assert window["summary"]["moving_points"] >= 3, window["summary"]
    assert MotionTracks.from_dict(first["tracks"]).num_points == 64


class _CountedLK(LKTracker):
    """An LKTracker that counts its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def track(self, frames, *, grid_size=None, queries=None):
        self.calls += 1
        return super().track(frames, grid_size=grid_size, queries=queries)


@pytest.mark.parametrize("source", ["npy", "npy_indices", "path", "upload", "npy_fortran", "npy_fortran_indices"])
def test_a_window_grid_request_converts_its_frames_to_grey_once(tmp_path, monkeypatch, source):
    """The window grid calls the tracker twice on the same frames; LK reuses the first call's grey frames only for
    frames that cannot have changed (`tools.motion.lk._frozen`). The service's frames were writeable (a decoded
    video, a selection of a .npy body) or viewed the request's bytes: every frame was converted to grey twice.
    A Fortran-order body (or a selection of one) is not C-contiguous: each tracker call made its own C-order copy
    (`validate_frames`), writeable, so the second converted again."""
    from service_helpers import TOKEN

    import tools.motion.lk as lk
    from tools.video import write_video

    frames = entering_square()
    write_video(tmp_path / "clip.mp4", frames)
    tracker = _CountedLK()
    app = create_app(ToolSettings(), tmp_path, token=TOKEN, tracker=tracker, enable_surprise=False)
    conversions = []
    real = lk._grays
    monkeypatch.setattr(lk, "_grays", lambda f: conversions.append(len(f)) or real(f))
    grid = {"grid_size": 8, "grid_frames": "window"}
    with TestClient(app) as c:
        if source == "npy":
            r = c.post("/v1/track?grid_size=8&grid_frames=window", content=npy(frames), headers=NPY)
        elif source == "npy_indices":
            r = c.post(f"/v1/track?grid_size=8&grid_frames=window&frame_indices={list(range(len(frames)))}",
                       content=npy(frames), headers=NPY)
        elif source == "npy_fortran":
            r = c.post("/v1/track?grid_size=8&grid_frames=window", content=npy(np.asfortranarray(frames)), headers=NPY)
        elif source == "npy_fortran_indices":
            r = c.post(f"/v1/track?grid_size=8&grid_frames=window&frame_indices={list(range(len(frames)))}",
                       content=npy(np.asfortranarray(frames)), headers=NPY)
        elif source == "path":
            r = c.post("/v1/track", json={"path": "clip.mp4", **grid}, headers=AUTH)
        else:
            r = c.post("/v1/track", files={"video": ("c.mp4", (tmp_path / "clip.mp4").read_bytes())},
                       data={k: str(v) for k, v in grid.items()}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert tracker.calls == 2  # the later query frames' grid was asked for
    assert conversions == [len(frames)]
