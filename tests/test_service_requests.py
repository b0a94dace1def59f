"""Tool service: malformed and oversized requests are refused with a 4xx before any work, never a 500 or
an allocation the limits were meant to prevent; a tool's bug is a fault with its reason, never a bare 500; a
request's JSON is parsed and its answer rendered off the event loop (in-process test client)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_helpers import NPY, TOKEN, npy

from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings


@pytest.fixture(scope="module")
def client(service_root, service_scorer):
    app = create_app(ToolSettings(max_frames=64, max_decode_mb=1.0), service_root, token=TOKEN,
                     tracker=LKTracker(), scorer=service_scorer)
    with TestClient(app) as c:
        yield c


def test_repeated_npy_frame_indices_meet_the_frame_and_decode_limits_before_any_copy(client, monkeypatch):
    """A one-frame .npy body with frame_indices [0]*N was copied N times (arr[frame_indices]) before the
    frame limit was checked, and max_decode_mb never applied to .npy: a small body became gigabytes."""
    import tools.service_frames as sf

    copies: list[tuple] = []
    real = getattr(sf, "_parse_npy", None)

    class Spy(np.ndarray):
        def __getitem__(self, key):
            copies.append(np.shape(key))
            return np.asarray(self).__getitem__(key)

    monkeypatch.setattr(sf, "_parse_npy", lambda data: real(data).view(Spy), raising=False)
    frame = npy(np.zeros((1, 256, 256, 3), np.uint8))  # 0.19 MiB a frame
    r = client.post("/v1/track?grid_size=2&frame_indices=" + json.dumps([0] * 65), content=frame, headers=NPY)
    assert r.status_code == 413 and r.json()["detail"] == "65 frames requested; the limit is 64"
    r = client.post("/v1/track?grid_size=2&frame_indices=" + json.dumps([0] * 8), content=frame, headers=NPY)
    assert r.status_code == 413 and "8 frame(s) of 256x256 would take 1.5 MiB as RGB frames, over the decode limit of 1 MiB" \
        in r.json()["detail"]
    assert copies == []
    five = npy(np.zeros((6, 256, 256, 3), np.uint8))  # without frame_indices: the whole body counts
    r = client.post("/v1/track?grid_size=2", content=five, headers=NPY)
    assert r.status_code == 413 and "6 frame(s) of 256x256" in r.json()["detail"]
    r = client.post("/v1/track?grid_size=2", content=npy(np.zeros((65, 8, 8, 3), np.uint8)), headers=NPY)
    assert r.status_code == 413 and r.json()["detail"] == "the clip has 65 frames, over the limit of 64; pass frame_indices"
    ok = client.post("/v1/track?grid_size=2&frame_indices=" + json.dumps([0] * 4), content=frame, headers=NPY)
    assert ok.status_code == 200, ok.text
    assert ok.json()["tracks"]["frame_indices"] == [0] * 4 and copies == [(4,)]


@pytest.mark.parametrize("shape", [(20, 0, 0, 3), (20, 0, 8, 3), (20, 8, 0, 3)])
def test_npy_frames_without_pixels_are_an_input_error_not_a_tool_fault(client, shape):
    """0x0 frames reached V-JEPA 2 and came back as a 500 tool fault (ZeroDivisionError)."""
    for url in ("/v1/surprise", "/v1/track?grid_size=2"):
        r = client.post(url, content=npy(np.zeros(shape, np.uint8)), headers=NPY)
        assert r.status_code == 422, r.text
        assert f"frames of {shape[1]}x{shape[2]} pixels" in r.json()["detail"]


def test_media_types_are_matched_without_regard_to_case(client):
    """`Application/X-NPY` (media types are case-insensitive) fell through to the JSON branch: a 400 saying the
    body is not valid JSON."""
    frames = npy(np.zeros((4, 8, 8, 3), np.uint8))
    r = client.post("/v1/track?grid_size=2", content=frames, headers={**NPY, "Content-Type": "Application/X-NPY"})
    assert r.status_code == 200, r.text
    assert len(r.json()["tracks"]["frame_indices"]) == 4


class _Counting(LKTracker):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def track(self, frames, **kw):
        self.calls += 1
        return super().track(frames, **kw)


@pytest.fixture
def counted(service_root):
    tracker = _Counting()
    with TestClient(create_app(ToolSettings(), service_root, tracker=tracker, enable_surprise=False)) as c:
        yield c, tracker


@pytest.mark.parametrize("options,problem", [
    ({"grid_size": 2, "tracks_encoding": "xml"}, "tracks_encoding must be 'list' or 'base64'"),
    ({"grid_size": 2, "summary": True, "regions": [[0, 0, 1, 1]]}, "regions must be an object"),
    ({"grid_size": 2, "summary": True, "regions": "gripper"}, "regions must be an object"),
    ({"grid_size": 2, "summary": True, "regions": {"g": "abcd"}}, "region 'g': a box is a list of four numbers"),
    ({"grid_size": 2, "summary": True, "regions": {"g": None}}, "region 'g': a box is a list of four numbers"),
    ({"grid_size": 2, "summary": True, "regions": {"g": [0, 0, 10**400, 1]}},  # an OverflowError after tracking: a 500
     "region 'g': a box is a list of four numbers"),
    ({"grid_size": 2, "summary": True, "regions": {f"r{i}": [0, 0, 1, 1] for i in range(17)}},
     "17 regions; the limit is 16"),
    ({"grid_size": 2, "summary": True, "regions": {"g": [0, 0, 32, 32]}},  # pixels: refused only after tracking
     "region 'g' [0.0, 0.0, 32.0, 32.0]: boxes are [x0, y0, x1, y1] fractions of the frame"),
    ({"grid_size": 2, "summary": True, "regions": {"g": [0.5, 0, 0.2, 1]}}, "region 'g' [0.5, 0.0, 0.2, 1.0]"),
    ({"grid_size": 100000}, "grid_size must be a whole number from 1 to 64"),
    ({"grid_size": "²"}, "grid_size must be a whole number from 1 to 64"),
    ({"grid_size": "9" * 5000}, "grid_size must be a whole number from 1 to 64"),  # was a 500: int()'s digit limit
    ({"queries": [[0, 1, 1]] * 4097}, "4097 queries; the limit is 4096 points"),
    ({"queries": "abc"}, "queries must be a list"),
    ({"queries": [[0, 10**400, 1]]}, "queries must be [t, x, y] rows of numbers: int too large"),  # was a 500
])
def test_bad_options_are_400_before_any_decoding_or_tracking(counted, options, problem, monkeypatch):
    """A bad tracks_encoding was refused only after tracking; regions as a list or string were a 500
    (AttributeError in summarize_tracks); grid_size had no bound (100000: a MemoryError 500)."""
    import tools.service_jobs as service

    c, tracker = counted
    decoded: list[int] = []
    monkeypatch.setattr(service, "decode_frames", lambda *a, **kw: decoded.append(1))
    r = c.post("/v1/track", json={"path": "clip.mp4", **options})
    assert r.status_code == 400 and problem in r.json()["detail"], r.text
    assert decoded == [] and tracker.calls == 0


def test_the_largest_grid_and_query_count_are_served(counted):
    from tools.service_params import MAX_GRID_SIZE, MAX_QUERIES

    c, _ = counted
    r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": MAX_GRID_SIZE, "frame_indices": [0, 1]})
    assert r.status_code == 200 and len(r.json()["tracks"]["tracks"][0]) == MAX_GRID_SIZE**2
    r = c.post("/v1/track", json={"path": "clip.mp4", "queries": [[0, 5, 5]] * MAX_QUERIES, "frame_indices": [0, 1]})
    assert r.status_code == 200
    r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "summary": True,
                                  "regions": {"left": [0, 0, 0.5, 1]}})
    assert r.status_code == 200 and r.json()["summary"]["regions"][0]["name"] == "left"


def test_deeply_nested_json_is_400_not_500(counted):
    """json.loads raised RecursionError (a 500) for a body, and for a JSON form or query field."""
    c, tracker = counted
    r = c.post("/v1/track", content=b"[" * 100000)
    assert r.status_code == 400 and "nested too deeply" in r.json()["detail"]
    frames = npy(np.zeros((2, 8, 8, 3), np.uint8))
    r = c.post("/v1/track", files={"video": ("f.npy", frames)}, data={"grid_size": "2", "queries": "[" * 100000})
    assert r.status_code == 400 and "field 'queries' is nested too deeply" in r.json()["detail"]
    assert tracker.calls == 0


def test_paths_the_filesystem_cannot_resolve_are_refused_with_the_reason(tmp_path):
    """A name over the filesystem's length limit (OSError ENAMETOOLONG) and a symlink loop (RuntimeError in
    Path.resolve) were 500s."""
    import errno
    import os

    os.symlink(tmp_path / "loop_b", tmp_path / "loop_a")
    os.symlink(tmp_path / "loop_a", tmp_path / "loop_b")
    with TestClient(create_app(ToolSettings(), tmp_path, tracker=LKTracker(), enable_surprise=False)) as c:
        r = c.post("/v1/track", json={"path": "a" * 300 + ".mp4", "grid_size": 2})
        assert r.status_code == 400 and "longer than the filesystem allows" in r.json()["detail"], r.text
        assert len(r.json()["detail"]) < 200
        r = c.post("/v1/track", json={"path": "loop_a", "grid_size": 2})
        assert r.status_code == 404 and r.json()["detail"] == "path 'loop_a' cannot be resolved: a symlink loop"
        # the clip's, raised again by the client as the in-process read's (tools.client)
        assert r.json()["video_error"] == {"type": "VideoNotFoundError",
                                           "message": f"loop_a: cannot be read (OSError: [Errno {errno.ELOOP}] a "
                                                      "symlink loop)"}


class _Broken:
    """A tracker with a bug: it raises on any request (ValueError / TypeError from its own code)."""

    def __init__(self, error: Exception) -> None:
        self.error, self.calls = error, 0

    def track(self, frames, *, grid_size=None, queries=None):
        self.calls += 1
        raise self.error


@pytest.mark.parametrize("error", [ValueError("operands could not be broadcast"), TypeError("'NoneType' is not iterable")])
@pytest.mark.parametrize("query", ["grid_size=2", "grid_size=2&grid_frames=window", "queries=[[0,1,1]]"])
def test_a_tracker_bug_is_a_motion_run_fault_not_a_bad_request(service_root, error, query):
    """Any ValueError or TypeError from the tracker came back as 400 "bad track request": the client was told
    its request was wrong (and RemoteMotionTracker reported a bad request) for a fault of the tracker."""
    tracker = _Broken(error)
    app = create_app(ToolSettings(), service_root, tracker=tracker, enable_surprise=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post(f"/v1/track?{query}", content=npy(np.zeros((4, 8, 8, 3), np.uint8)), headers=NPY)
    assert r.status_code == 500, r.text
    assert r.json()["fault"] == {"tool": "motion", "kind": "run", "message": f"{type(error).__name__}: {error}"}
    assert tracker.calls == 1


@pytest.mark.parametrize(("shape", "query", "problem"), [
    ((4, 1, 8, 3), "grid_size=1", "frames are too small to track: 1x8"),
    ((4, 8, 8, 3), "grid_size=9", "grid_size 9 is finer than the 8x8 frame"),
    ((4, 8, 8, 3), "queries=[[5,1,1]]", "queries rows [0] name frames outside the clip"),
    ((4, 8, 8, 3), "queries=[[0,8,1]]", "queries rows [0] lie outside the 8x8 image"),
])
def test_requests_the_frames_cannot_serve_are_400_before_the_tracker_runs(service_root, shape, query, problem):
    """What the request asks of its own frames is checked by the service (the tracker protocol's checks), so
    a 400 never depends on how a tracker words its errors, and a tracker's own error is its fault (above)."""
    tracker = _Broken(RuntimeError("the tracker must not run"))
    app = create_app(ToolSettings(), service_root, tracker=tracker, enable_surprise=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post(f"/v1/track?{query}", content=npy(np.zeros(shape, np.uint8)), headers=NPY)
    assert r.status_code == 400 and problem in r.json()["detail"], r.text
    assert tracker.calls == 0


@pytest.mark.parametrize("error", [TypeError("unsupported operand"), ValueError("operands could not be broadcast")])
def test_a_summary_bug_is_a_motion_run_fault_not_a_bad_request(service_root, monkeypatch, error):
    """Any ValueError or TypeError of summarize_tracks was a 400 "bad track request", though only a bad region
    box is the request's fault (checked with the options, before tracking); the rest is the tool's bug."""
    import tools.service_jobs as jobs

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(jobs, "summarize_tracks", broken)
    app = create_app(ToolSettings(), service_root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/track?grid_size=2&summary=true", content=npy(np.zeros((4, 8, 8, 3), np.uint8)), headers=NPY)
    assert r.status_code == 500, r.text
    assert r.json()["fault"] == {"tool": "motion", "kind": "run", "message": f"{type(error).__name__}: {error}"}


class _FarOff:
    """A tracker with a bug: finite positions so far outside the frame (1e30 px) that the summary's distances
    overflow to infinity."""

    def track(self, frames, *, grid_size=None, queries=None):
        from tools.motion.base import MotionTracks, resolve_queries

        q = resolve_queries(frames.shape, grid_size, queries)
        tracks = np.repeat(q[None, :, 1:3], len(frames), axis=0)
        tracks[1:] = 1e30
        return MotionTracks(tracks, np.ones(tracks.shape[:2], bool), q[:, 0].astype(np.int64))


def test_tracks_far_outside_the_frame_are_a_motion_run_fault(service_root):
    """Summary distances that overflowed to infinity failed when the answer was rendered, after the fault
    handling: a bare 500 "Internal Server Error", which the client reports as a transport fault; the tracks
    alone were answered 200, and in-process the "inf" distances reached the model. Such positions break the
    tracker contract (`require_tracks`' bound), with or without a summary."""
    app = create_app(ToolSettings(), service_root, tracker=_FarOff(), enable_surprise=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/track?grid_size=2&summary=true", content=npy(np.zeros((4, 8, 8, 3), np.uint8)), headers=NPY)
        plain = c.post("/v1/track?grid_size=2", content=npy(np.zeros((4, 8, 8, 3), np.uint8)), headers=NPY)
    for answer in (r, plain):
        assert answer.status_code == 500, answer.text
        fault = answer.json()["fault"]
        assert fault["tool"] == "motion" and fault["kind"] == "run", fault
        assert fault["message"].startswith("the tracker returned positions far outside the 8x8 frame"), fault


def test_a_whole_clip_is_decoded_from_the_file_its_limits_were_checked_on(tmp_path, monkeypatch):
    """A whole-clip request checked ``max_frames`` and ``max_decode_mb`` on one open of the file, then decoded the
    clip from a second open: a file replaced in between (the allowed root is a shared folder) was decoded whole,
    past both limits; and the clip's index was scanned twice."""
    from service_helpers import moving_clip

    from tools.video import VideoReader, write_video

    write_video(tmp_path / "clip.mp4", moving_clip(6, 32, 32))
    opened, close = [], VideoReader.__exit__

    def exit_then_replace(self, *exc):
        close(self, *exc)
        opened.append(self)
        if len(opened) == 1:  # the clip changes on disk once its first reader is done
            write_video(tmp_path / "clip.mp4", moving_clip(30, 32, 32))

    monkeypatch.setattr(VideoReader, "__exit__", exit_then_replace)
    app = create_app(ToolSettings(max_frames=8), tmp_path, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2})
    assert r.status_code in (200, 413), r.text
    if r.status_code == 200:
        assert len(r.json()["tracks"]["frame_indices"]) <= 8, "decoded past max_frames"
    assert len(opened) == 1, f"the clip was opened {len(opened)} times"


def test_a_json_body_is_parsed_off_the_event_loop(service_root, monkeypatch):
    """A JSON body was parsed on the event loop: one of the largest allowed size (256 MiB of frame_indices)
    took ~4 s there, during which no other request, /healthz included, was read or answered."""
    import asyncio

    import tools.service_request

    on_loop, parse = [], tools.service_request.parse_json

    def parse_json(text, what):
        try:
            asyncio.get_running_loop()
            on_loop.append(what)
        except RuntimeError:  # a worker thread has no running loop
            pass
        return parse(text, what)

    monkeypatch.setattr(tools.service_request, "parse_json", parse_json)
    app = create_app(ToolSettings(), service_root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": [0, 1]})
    assert r.status_code == 200, r.text
    assert on_loop == [], on_loop


def test_an_answer_is_rendered_off_the_event_loop(service_root, monkeypatch):
    """The answer's JSON was rendered on the event loop: tracks as lists of 1024 frames x 4096 points took ~7 s
    there (81 x 4096: 0.6 s), during which no other request was read or answered."""
    import asyncio
    import json

    on_loop, dumps = [], json.dumps

    def recording_dumps(obj, *args, **kwargs):
        if isinstance(obj, dict) and "tracks" in obj:
            try:
                asyncio.get_running_loop()
                on_loop.append(sorted(obj))
            except RuntimeError:  # a worker thread has no running loop
                pass
        return dumps(obj, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", recording_dumps)
    app = create_app(ToolSettings(), service_root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": [0, 1]})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
    assert len(r.json()["tracks"]["tracks"]) == 2
    assert on_loop == [], on_loop
