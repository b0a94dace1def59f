"""Tool service over a real socket with the HTTP client: remote results equal in-process ones (tracks,
surprise by frames and by file upload, the agent with a remote scorer), concurrency, the pending limit,
and the client's error mapping."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from service_helpers import TOKEN, HeldTracker, moving_clip, serve

from tests.http_stubs import POLL_S
from tools.client import RemoteMotionTracker, RemoteSurpriseScorer, ToolServiceClient
from tools.errors import ToolFault
from tools.motion import LKTracker, TrackQueryError
from tools.service import create_app
from tools.settings import ToolSettings
from tools.toolbox import Toolbox
from tools.video import VideoDecodeError


@pytest.fixture(scope="module")
def server(service_root, service_scorer):
    app = create_app(ToolSettings(), service_root, token=TOKEN, workers=2, tracker=LKTracker(), scorer=service_scorer)
    with serve(app) as url:
        yield url


def test_requests_over_the_pending_limit_get_503(service_root):
    import httpx

    blocking = HeldTracker()
    app = create_app(ToolSettings(), service_root, workers=1, tracker=blocking, enable_surprise=False, max_pending=1)
    first: dict = {}
    with serve(app) as url:
        def post_first() -> None:
            first["r"] = httpx.post(f"{url}/v1/track", json={"path": "clip.mp4", "grid_size": 2}, timeout=20)

        t = threading.Thread(target=post_first)
        t.start()
        assert blocking.entered.wait(10)
        busy = httpx.post(f"{url}/v1/track", json={"path": "clip.mp4", "grid_size": 2}, timeout=20)
        blocking.release.set()
        t.join(20)
        assert busy.status_code == 503 and "busy" in busy.json()["detail"]
        # it said when to try again (the client waits that long): an immediate 503 without it was retried
        # within ~1.5 s (0.5 s backoff doubling) and a burst past the limit became tool faults
        assert float(busy.headers["retry-after"]) > 0
        assert first["r"].status_code == 200


def test_remote_tracker_equals_in_process(server):
    frames = moving_clip(10)
    q = np.array([[0, 20, 30], [4, 40.5, 12.25], [9, 30, 30]])
    with ToolServiceClient(server, token=TOKEN) as c:
        remote = RemoteMotionTracker(c)
        for kwargs in ({"grid_size": 4}, {"queries": q}):
            a, b = remote.track(frames, **kwargs), LKTracker().track(frames, **kwargs)
            np.testing.assert_array_equal(a.tracks, b.tracks)
            np.testing.assert_array_equal(a.visible, b.visible)
            np.testing.assert_array_equal(a.query_frames, b.query_frames)
        with pytest.raises(TrackQueryError, match="outside the clip"):
            remote.track(frames, queries=np.array([[10, 5, 5]]))



@pytest.mark.parametrize("grid_size", [4.0, 4.7, np.float32(3.0), "4"])
def test_a_grid_size_that_is_not_an_integer_is_refused_remotely_as_in_process(server, grid_size):
    """The in-process tracker refuses a grid_size that is not an integer; the remote one truncated it (4.7 ->
    "4") and answered tracks of another grid, so the same call gave tracks or an error by where it ran."""
    frames = moving_clip(10)
    with pytest.raises(TrackQueryError, match="grid_size must be a positive integer"):
        LKTracker().track(frames, grid_size=grid_size)
    with ToolServiceClient(server, token=TOKEN) as c:
        for call in (lambda: RemoteMotionTracker(c).track(frames, grid_size=grid_size),
                     lambda: RemoteMotionTracker(c).track_path("clip.mp4", grid_size=grid_size)):
            with pytest.raises(TrackQueryError, match="grid_size must be a positive integer"):
                call()
    with ToolServiceClient(server, token=TOKEN) as c:  # a NumPy integer is an integer in both
        a, b = RemoteMotionTracker(c).track(frames, grid_size=np.int64(3)), LKTracker().track(frames, grid_size=3)
        np.testing.assert_array_equal(a.tracks, b.tracks)

def test_remote_surprise_equals_in_process(server, service_scorer):
    frames = moving_clip(20)
    with ToolServiceClient(server, token=TOKEN) as c:
        assert RemoteSurpriseScorer(c).score(frames) == service_scorer.score(frames)
        assert RemoteSurpriseScorer(c).score(frames[:5]).status == "not_enough_frames"


def test_remote_surprise_by_file_upload_equals_in_process_on_the_same_frames(server, service_scorer, service_root):
    from tools.video import read_frames, tool_size

    clip = service_root / "clip.mp4"  # 18 frames of 64x64
    with ToolServiceClient(server, token=TOKEN) as c:
        remote = RemoteSurpriseScorer(c)
        for frames, short_side in ((18, 40), (18, 48), (17, None), (18, 200)):
            size = tool_size(64, 64, short_side)  # 40: 40x40; 48 keeps 56% of the pixels: 64x64
            want = service_scorer.score(read_frames(clip, range(frames), size=size))
            assert remote.score_file(clip, frames=frames, short_side=short_side) == want
        assert remote.score_file(clip).num_frames == 18
        with pytest.raises(VideoDecodeError, match="junk.mp4"):  # the clip's (test_service_clip_faults)
            remote.score_file(service_root / "junk.mp4")


def test_agent_with_a_remote_scorer_uploads_the_clip_and_gets_the_in_process_result(server, service_scorer, tmp_path):
    from graph_scripts import full_script, moving_square
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel

    clip = moving_square(tmp_path / "square.mp4")  # 33 frames of 128x128

    def surprise_of(surprise) -> dict:
        agent = build_reward_agent(AgentConfig(preset="full"),
                                   backbone=Backbone(ScriptedChatModel(full_script()), retry_wait=(0.0, 0.0)),
                                   tools=AgentTools(tracker=LKTracker(), surprise=surprise, surprise_short_side=64),
                                   checkpointer=InMemorySaver())
        out = agent.invoke({"video": str(clip), "instruction": "push the red block", "run_id": "r"},
                           {"configurable": {"thread_id": "r"}})
        assert out["result"].status == "scored"
        return out["surprise"]

    with ToolServiceClient(server, token=TOKEN) as c:
        sent: list[str] = []
        c._http.event_hooks["request"].append(lambda req: sent.append(req.headers["content-type"]))
        remote = surprise_of(RemoteSurpriseScorer(c))
    assert remote == surprise_of(service_scorer) and remote["num_frames"] == 33
    assert len(sent) == 1 and sent[0].startswith("multipart/form-data")  # the file, not .npy frames


def test_toolbox_remote_and_in_process_agree(server, service_scorer):
    frames = moving_clip(8)
    remote = Toolbox(ToolSettings(tools_url=server, tools_token=TOKEN))
    local = Toolbox(ToolSettings())
    try:
        a, b = remote.tracker().track(frames, grid_size=3), local.tracker().track(frames, grid_size=3)
        np.testing.assert_array_equal(a.tracks, b.tracks)
        assert remote.quality(frames) == local.quality(frames)
    finally:
        remote.close()


def test_a_closed_toolbox_builds_its_remote_tools_again(server, service_scorer):
    """close() closed the HTTP client but kept the remote tracker and scorer on it: the next call raised
    RuntimeError("Cannot send a request, as the client has been closed")."""
    frames = moving_clip(8)
    box = Toolbox(ToolSettings(tools_url=server, tools_token=TOKEN))
    try:
        first = box.tracker().track(frames, grid_size=3)
        box.surprise()
        box.close()
        np.testing.assert_array_equal(box.tracker().track(frames, grid_size=3).tracks, first.tracks)
        assert box.surprise().score(moving_clip(16)).status == "ok"
    finally:
        box.close()


def test_32_concurrent_requests_all_correct(server):
    clips = [moving_clip(6 + i % 5) for i in range(32)]
    expected = [LKTracker().track(c, grid_size=3) for c in clips]
    with ToolServiceClient(server, token=TOKEN) as c:
        remote = RemoteMotionTracker(c)
        with ThreadPoolExecutor(32) as pool:
            results = list(pool.map(lambda f: remote.track(f, grid_size=3), clips))
    for got, want in zip(results, expected, strict=True):
        np.testing.assert_array_equal(got.tracks, want.tracks)
        np.testing.assert_array_equal(got.visible, want.visible)


def test_client_error_mapping(server, service_root):
    with ToolServiceClient(server, token="wrong") as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
        assert info.value.kind == "auth"
    with ToolServiceClient(server, token=TOKEN) as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track_path("../../etc/passwd", grid_size=2)
        assert info.value.kind == "auth" and "403" in info.value.message
        with pytest.raises(VideoDecodeError, match="^junk.mp4: "):  # the clip's, named relative to the root
            RemoteSurpriseScorer(c).score_path("junk.mp4")


def test_unreachable_service_is_a_transport_fault():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY in asyncio
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with ToolServiceClient(f"http://127.0.0.1:{port}", retries=2, backoff_s=0.01, connect_timeout_s=1) as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
    assert info.value.tool == "service" and info.value.kind == "transport"


def test_many_queries_fall_back_to_multipart_and_still_match(server):
    frames = moving_clip(6)
    rng = np.random.default_rng(0)
    q = np.column_stack([rng.integers(0, 6, 400), rng.random(400) * 63, rng.random(400) * 63])
    with ToolServiceClient(server, token=TOKEN) as c:
        a = RemoteMotionTracker(c).track(frames, queries=q)
    b = LKTracker().track(frames, queries=q)
    np.testing.assert_array_equal(a.tracks, b.tracks)
    np.testing.assert_array_equal(a.visible, b.visible)


def test_preload_checks_that_a_tool_service_answers_and_serves_the_presets_tools(server, service_root):
    """With RAA_TOOLS_URL the models load on the service's side; what a batch / reward service / training
    run checks at start is that the service answers and serves each tool the preset uses. Before, a service
    started with --no-surprise made every clip of a WMReward preset ineligible (503 on each run)."""
    from graph.config import AgentConfig
    from graph.context import preload_tools

    full, motion_only = AgentConfig(preset="full"), AgentConfig(preset="no_wmreward")
    app = create_app(ToolSettings(), service_root, token=TOKEN, workers=1, tracker=LKTracker(), enable_surprise=False)
    with serve(app) as no_surprise:
        tools = Toolbox(ToolSettings(tools_url=no_surprise, tools_token=TOKEN))
        with pytest.raises(ToolFault) as info:
            preload_tools(full, tools)
        assert (info.value.tool, info.value.kind) == ("surprise", "load")
        assert f"the tool service at {no_surprise}" in info.value.message and "does not serve surprise" in info.value.message
        preload_tools(motion_only, tools)  # motion is served
        tools.close()
    preload_tools(full, Toolbox(ToolSettings(tools_url=server, tools_token=TOKEN)))  # serves both
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    down = Toolbox(ToolSettings(tools_url=f"http://127.0.0.1:{port}", retries=1))
    with pytest.raises(ToolFault) as info:
        preload_tools(motion_only, down)
    assert info.value.tool == "motion" and f"127.0.0.1:{port}" in info.value.message


def test_a_service_without_surprise_is_a_config_fault_asked_once(service_root, service_scorer):
    """"surprise is not enabled" was a 503, which the client retried three times as "busy" and reported as
    a transport fault; it is a 501 now: one request, kind "config"."""
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, backoff_s=0.01) as c:
        sent: list[str] = []
        c._http.event_hooks["request"].append(lambda req: sent.append(req.url.path))
        with pytest.raises(ToolFault) as info:
            RemoteSurpriseScorer(c).score_file(service_root / "clip.mp4", frames=16, short_side=64)
        assert (info.value.tool, info.value.kind) == ("service", "config") and "HTTP 501" in info.value.message
        assert sent == ["/v1/surprise"]
        RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)  # motion is still served


def test_a_read_timeout_is_not_retried(service_root):
    """The client retried a read timeout while the service went on computing each abandoned attempt
    (3 attempts: 3 tracker runs behind the same slots); it reports kind "timeout" after one request."""
    slow = HeldTracker()
    app = create_app(ToolSettings(), service_root, token=TOKEN, workers=4, tracker=slow, enable_surprise=False)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, timeout_s=0.5, retries=3, backoff_s=0.01) as c:
        sent: list[str] = []
        c._http.event_hooks["request"].append(lambda req: sent.append(req.url.path))
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
        slow.release.set()
    assert (info.value.kind, sent, slow.calls) == ("timeout", ["/v1/track"], 1)
    assert "not retried" in info.value.message


def test_a_queued_request_whose_client_left_is_skipped(service_root):
    """A request waiting for a worker slot whose client disconnected (its timeout) was computed anyway,
    for nobody, holding the slot from the requests behind it."""
    import time

    import httpx

    tracker = HeldTracker()
    app = create_app(ToolSettings(), service_root, workers=1, tracker=tracker, enable_surprise=False)
    body = {"path": "clip.mp4", "grid_size": 2}
    with serve(app) as url:
        first = ThreadPoolExecutor(1).submit(httpx.post, f"{url}/v1/track", json=body, timeout=20)
        assert tracker.entered.wait(10)
        with pytest.raises(httpx.ReadTimeout):  # queued behind the first, then gone
            httpx.post(f"{url}/v1/track", json=body, timeout=0.5)
        tracker.release.set()
        assert first.result(20).status_code == 200
        state = app.state.tools
        for _ in range(100):
            if state.pending == 0:
                break
            time.sleep(0.05)
        assert state.pending == 0 and tracker.calls == 1


@pytest.mark.parametrize("url", ["localhost:8765", "ftp://127.0.0.1:8765"])
def test_a_url_httpx_cannot_request_is_a_config_fault_not_retried(url):
    """UnsupportedProtocol was retried like a dropped connection and reported as a transport fault."""
    with ToolServiceClient(url, retries=3, backoff_s=0.5) as c:
        sent: list[str] = []
        c._http.event_hooks["request"].append(lambda req: sent.append(req.url.path))
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
    assert info.value.kind == "config" and len(sent) == 1
    assert "RAA_TOOLS_URL" in info.value.message and "needs http:// or https://" in info.value.message


@pytest.mark.parametrize("status,body", [(200, b"<html>another server</html>"), (200, b"[1, 2]"), (404, b"[1, 2]")])
def test_an_answer_that_is_not_a_json_object_is_a_typed_fault(status, body):
    """RAA_TOOLS_URL pointing at another HTTP server: its HTML 200 raised an untyped JSONDecodeError, JSON that is
    not an object an AttributeError."""
    import http.server

    class Other(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=srv.serve_forever, args=(POLL_S,), daemon=True).start()
    try:
        with ToolServiceClient(f"http://127.0.0.1:{srv.server_port}", retries=1) as c:
            with pytest.raises(ToolFault) as info:
                RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
            assert info.value.tool == "service"
            with pytest.raises(ToolFault) as checked:
                c.check_serves("motion")
            assert (checked.value.tool, checked.value.kind) == ("motion", "load")
    finally:
        srv.shutdown()
        srv.server_close()
    if status == 200:
        assert info.value.kind == "config" and "not a tool service answer" in info.value.message
        assert "RAA_TOOLS_URL" in checked.value.message
    else:
        assert info.value.kind == "config" and "HTTP 404" in info.value.message  # the URL's, not the clip's
        assert "RAA_TOOLS_URL" in info.value.message
