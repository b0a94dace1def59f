"""Tool service and client: auth, path safety, limits, bad videos, concurrency, remote == in-process."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from tools.client import RemoteMotionTracker, RemoteSurpriseScorer, ToolServiceClient
from tools.errors import ToolFault
from tools.motion import LKTracker, TrackQueryError
from tools.service import create_app
from tools.settings import ToolSettings
from tools.surprise import VJEPA2SurpriseScorer
from tools.toolbox import Toolbox
from tools.video import write_video

TOKEN = "s3cret"


def tiny_scorer() -> VJEPA2SurpriseScorer:
    from transformers import VJEPA2Config, VJEPA2Model

    torch.manual_seed(0)
    cfg = VJEPA2Config(crop_size=32, patch_size=16, frames_per_clip=16, tubelet_size=2, hidden_size=48,
                       num_attention_heads=2, num_hidden_layers=1, pred_hidden_size=48,
                       pred_num_attention_heads=2, pred_num_hidden_layers=1, num_pooler_layers=1)
    return VJEPA2SurpriseScorer(model=VJEPA2Model(cfg).eval(), batch_size=4)


def moving_clip(t_total: int = 12, h: int = 64, w: int = 64) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(1)
    tex = cv2.GaussianBlur((rng.random((h, w + 64)) * 255).astype(np.uint8), (0, 0), 1.5)
    return np.repeat(np.stack([tex[:, 2 * t:2 * t + w] for t in range(t_total)])[..., None], 3, -1)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    d = tmp_path_factory.mktemp("videos")
    write_video(d / "clip.mp4", moving_clip(18))
    (d / "junk.mp4").write_bytes(b"definitely not a video")
    (d / "empty.mp4").write_bytes(b"")
    (tmp_path_factory.getbasetemp() / "secret.mp4").write_bytes(b"outside")
    return d


@pytest.fixture(scope="module")
def scorer():
    return tiny_scorer()


@pytest.fixture(scope="module")
def client(root, scorer):
    app = create_app(ToolSettings(), root, token=TOKEN, workers=2, max_upload_mb=1.0,
                     tracker=LKTracker(), scorer=scorer)
    with TestClient(app) as c:
        yield c


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_health_is_open_and_info_needs_token(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/v1/info").status_code == 401
    assert client.get("/v1/info", headers={"Authorization": "Bearer wrong"}).status_code == 401
    info = client.get("/v1/info", headers=AUTH).json()
    assert info["motion_backend"] == "lk" and info["workers"] == 2 and "torch" in info["versions"]


def test_wrong_token_is_401_on_work_endpoints(client):
    r = client.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers={"Authorization": "Bearer x"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert client.post("/v1/surprise", json={"path": "clip.mp4"}).status_code == 401


@pytest.mark.parametrize("path,status", [("../../etc/passwd", 403), ("/etc/passwd", 403), ("../secret.mp4", 403),
                                         ("missing.mp4", 404), ("", 400)])
def test_paths_outside_root_are_refused(client, path, status):
    r = client.post("/v1/track", json={"path": path, "grid_size": 2}, headers=AUTH)
    assert r.status_code == status, r.text
    if status == 403:
        assert "outside the allowed root" in r.json()["detail"]


def test_track_by_path_with_summary(client, root):
    r = client.post("/v1/track", json={"path": "clip.mp4", "grid_size": 3, "summary": True}, headers=AUTH)
    assert r.status_code == 200, r.text
    body = r.json()
    assert np.asarray(body["tracks"]["tracks"]).shape == (18, 9, 2)
    assert body["frame_size"] == [64, 64] and body["summary"]["points"] == 9
    sel = client.post("/v1/track", json={"path": str(root / "clip.mp4"), "grid_size": 2,
                                         "frame_indices": [0, 5, 10]}, headers=AUTH).json()
    assert sel["tracks"]["frame_indices"] == [0, 5, 10]


def test_bad_track_parameters_are_400(client):
    r = client.post("/v1/track", json={"path": "clip.mp4", "queries": [[0, 5, 5], [40, 5, 5]]}, headers=AUTH)
    assert r.status_code == 400 and "outside the clip" in r.json()["detail"]
    r = client.post("/v1/track", json={"path": "clip.mp4", "queries": [[0, -3, 5]]}, headers=AUTH)
    assert r.status_code == 400 and "outside the 64x64 image" in r.json()["detail"]
    r = client.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": [0, 99]}, headers=AUTH)
    assert r.status_code == 400
    assert client.post("/v1/track", content=b"{not json", headers=AUTH).status_code == 400


@pytest.mark.parametrize("name", ["junk.mp4", "empty.mp4"])
def test_undecodable_video_is_422_with_reason(client, name):
    r = client.post("/v1/track", json={"path": name, "grid_size": 2}, headers=AUTH)
    assert r.status_code == 422 and "undecodable" in r.json()["detail"]


def test_uploads_decode_and_limits(client, root):
    data = (root / "clip.mp4").read_bytes()
    r = client.post("/v1/track", files={"video": ("c.mp4", data)}, data={"grid_size": "2"}, headers=AUTH)
    assert r.status_code == 200, r.text
    r = client.post("/v1/surprise", files={"video": ("c.mp4", b"garbage")}, headers=AUTH)
    assert r.status_code == 422 and "undecodable" in r.json()["detail"]
    r = client.post("/v1/surprise", files={"video": ("c.mp4", b"")}, headers=AUTH)
    assert r.status_code == 422
    big = b"\0" * (1024 * 1024 + 10)
    r = client.post("/v1/track", files={"video": ("big.mp4", big)}, data={"grid_size": "2"}, headers=AUTH)
    assert r.status_code == 413


def test_clip_over_the_frame_limit_is_413(root):
    app = create_app(ToolSettings(max_frames=10), root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2})
        assert r.status_code == 413 and "pass frame_indices" in r.json()["detail"]
        ok = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": list(range(10))})
        assert ok.status_code == 200


def test_a_request_that_would_decode_too_much_is_413_before_decoding(root, monkeypatch):
    import tools.video as video

    # clip.mp4: 18 frames of 64x64 = 0.21 MiB of RGB
    app = create_app(ToolSettings(max_decode_mb=0.1), root, tracker=LKTracker(), enable_surprise=False)
    decoded: list[int] = []
    real = video.VideoReader.read
    monkeypatch.setattr(video.VideoReader, "read", lambda self, idx, **kw: decoded.append(1) or real(self, idx, **kw))
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2})
        assert r.status_code == 413 and "decode to 0.2 MiB, over the limit of 0.1 MiB" in r.json()["detail"]
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": list(range(10))})
        assert r.status_code == 413 and "10 frames of 64x64" in r.json()["detail"] and decoded == []
        ok = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": list(range(8))})
        assert ok.status_code == 200 and decoded == [1]  # 8 frames: 0.09 MiB
    assert ToolSettings.from_env({"RAA_TOOLS_MAX_DECODE_MB": "512"}).max_decode_mb == 512


def test_surprise_by_path_and_short_clip(client, root):
    ev = client.post("/v1/surprise", json={"path": "clip.mp4"}, headers=AUTH).json()
    assert ev["status"] == "ok" and [w["start"] for w in ev["windows"]] == [0, 2]
    short = client.post("/v1/surprise", json={"path": "clip.mp4", "frame_indices": list(range(10))},
                        headers=AUTH).json()
    assert short["status"] == "not_enough_frames" and short["num_frames"] == 10


# ------------------------------------------------------------------ real server + HTTP client
@contextlib.contextmanager
def serve(app):
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY in asyncio
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def server(root, scorer):
    app = create_app(ToolSettings(), root, token=TOKEN, workers=2, tracker=LKTracker(), scorer=scorer)
    with serve(app) as url:
        yield url


class _Blocking:
    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def track(self, frames, *, grid_size=None, queries=None):
        self.entered.set()
        self.release.wait(10)
        return LKTracker().track(frames, grid_size=grid_size, queries=queries)


def test_requests_over_the_pending_limit_get_503(root):
    import httpx

    blocking = _Blocking()
    app = create_app(ToolSettings(), root, workers=1, tracker=blocking, enable_surprise=False, max_pending=1)
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


def test_remote_surprise_equals_in_process(server, scorer):
    frames = moving_clip(20)
    with ToolServiceClient(server, token=TOKEN) as c:
        assert RemoteSurpriseScorer(c).score(frames) == scorer.score(frames)
        assert RemoteSurpriseScorer(c).score(frames[:5]).status == "not_enough_frames"


def test_remote_surprise_by_file_upload_equals_in_process_on_the_same_frames(server, scorer, root):
    from tools.video import read_frames, tool_size

    clip = root / "clip.mp4"  # 18 frames of 64x64
    with ToolServiceClient(server, token=TOKEN) as c:
        remote = RemoteSurpriseScorer(c)
        for frames, short_side in ((18, 40), (18, 48), (17, None), (18, 200)):
            size = tool_size(64, 64, short_side)  # 40: 40x40; 48 keeps 56% of the pixels: 64x64
            want = scorer.score(read_frames(clip, range(frames), size=size))
            assert remote.score_file(clip, frames=frames, short_side=short_side) == want
        assert remote.score_file(clip).num_frames == 18
        with pytest.raises(ToolFault, match="HTTP 422"):
            remote.score_file(root / "junk.mp4")


@pytest.mark.parametrize("value", ["8", "-3", "abc", "1.5"])
def test_bad_short_side_is_400(client, value):
    r = client.post("/v1/surprise", json={"path": "clip.mp4", "short_side": value}, headers=AUTH)
    assert r.status_code == 400 and "short_side" in r.json()["detail"]


def test_agent_with_a_remote_scorer_uploads_the_clip_and_gets_the_in_process_result(server, scorer, tmp_path):
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
    assert remote == surprise_of(scorer) and remote["num_frames"] == 33
    assert len(sent) == 1 and sent[0].startswith("multipart/form-data")  # the file, not .npy frames


def test_toolbox_remote_and_in_process_agree(server, scorer):
    frames = moving_clip(8)
    remote = Toolbox(ToolSettings(tools_url=server, tools_token=TOKEN))
    local = Toolbox(ToolSettings())
    try:
        a, b = remote.tracker().track(frames, grid_size=3), local.tracker().track(frames, grid_size=3)
        np.testing.assert_array_equal(a.tracks, b.tracks)
        assert remote.quality(frames) == local.quality(frames)
    finally:
        remote.close()


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


def test_client_error_mapping(server, root):
    with ToolServiceClient(server, token="wrong") as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
        assert info.value.kind == "auth"
    with ToolServiceClient(server, token=TOKEN) as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track_path("../../etc/passwd", grid_size=2)
        assert info.value.kind == "auth" and "403" in info.value.message
        with pytest.raises(ToolFault) as info:
            RemoteSurpriseScorer(c).score_path("junk.mp4")
        assert info.value.kind == "input" and "422" in info.value.message


def test_unreachable_service_is_a_transport_fault():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY in asyncio
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with ToolServiceClient(f"http://127.0.0.1:{port}", retries=2, backoff_s=0.01, connect_timeout_s=1) as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
    assert info.value.tool == "service" and info.value.kind == "transport"


class _Broken:
    def track(self, frames, *, grid_size=None, queries=None):
        raise ToolFault("motion", "run", "cotracker3 failed: CUDA out of memory")


def test_tool_fault_travels_to_the_client(root, scorer):
    app = create_app(ToolSettings(), root, tracker=_Broken(), scorer=scorer)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2})
        assert r.status_code == 500 and r.json()["fault"]["kind"] == "run"


def test_surprise_can_be_disabled(root):
    app = create_app(ToolSettings(), root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        assert c.post("/v1/surprise", json={"path": "clip.mp4"}).status_code == 503


def test_cli_defaults_and_token_from_env(monkeypatch, root):
    import typer
    import uvicorn
    from typer.testing import CliRunner

    from tools.cli import serve_tools_command

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, log_level: seen.update(app=app, host=host, port=port))
    app = typer.Typer()
    app.command()(serve_tools_command)
    result = CliRunner().invoke(app, ["--allowed-root", str(root), "--no-surprise"], env={"RAA_TOOLS_TOKEN": "tok"})
    assert result.exit_code == 0, result.output
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8765
    assert seen["app"].state.tools.token == "tok"
    bad = CliRunner().invoke(app, ["--device", "tpu"])
    assert bad.exit_code != 0


def test_many_queries_fall_back_to_multipart_and_still_match(server):
    frames = moving_clip(6)
    rng = np.random.default_rng(0)
    q = np.column_stack([rng.integers(0, 6, 400), rng.random(400) * 63, rng.random(400) * 63])
    with ToolServiceClient(server, token=TOKEN) as c:
        a = RemoteMotionTracker(c).track(frames, queries=q)
    b = LKTracker().track(frames, queries=q)
    np.testing.assert_array_equal(a.tracks, b.tracks)
    np.testing.assert_array_equal(a.visible, b.visible)


def test_raw_npy_body_validation(client):
    r = client.post("/v1/track?grid_size=2", content=b"", headers={**AUTH, "Content-Type": "application/x-npy"})
    assert r.status_code == 422
    r = client.post("/v1/track?grid_size=2", content=b"abc", headers={**AUTH, "Content-Type": "application/x-npy"})
    assert r.status_code == 422
    import io

    buf = io.BytesIO()
    np.save(buf, np.zeros((3, 8, 8), np.uint8))
    r = client.post("/v1/track?grid_size=2", content=buf.getvalue(),
                    headers={**AUTH, "Content-Type": "application/x-npy"})
    assert r.status_code == 422 and "uint8 [T,H,W,3]" in r.json()["detail"]


# ------------------------------------------------------------------ settings and toolbox
def test_settings_from_env_reads_only_the_given_mapping():
    env = {"RAA_MOTION_BACKEND": "cotracker3", "RAA_COTRACKER_CHECKPOINT": "/ck/scaled_offline.pth",
           "RAA_TOOLS_DEVICE": "cuda", "RAA_TOOLS_URL": "http://127.0.0.1:8765", "RAA_TOOLS_TOKEN": "tok-xyz",
           "RAA_SURPRISE_BATCH": "16", "RAA_QUALITY_MAX_STD": "3.5", "RAA_TOOLS_RETRIES": "5"}
    s = ToolSettings.from_env(env)
    assert s.motion_backend == "cotracker3" and str(s.cotracker_checkpoint) == "/ck/scaled_offline.pth"
    assert s.device == "cuda" and s.tools_url == "http://127.0.0.1:8765" and s.token() == "tok-xyz"
    assert s.surprise_batch_size == 16 and s.quality.max_spatial_std == 3.5 and s.retries == 5
    assert "tok-xyz" not in repr(s)
    assert ToolSettings.from_env({}) == ToolSettings()
    with pytest.raises(ValueError):
        ToolSettings.from_env({"RAA_MOTION_BACKEND": "raft"})


def test_toolbox_configured_cotracker_that_cannot_load_is_a_fault_not_lk(tmp_path):
    box = Toolbox(ToolSettings(motion_backend="cotracker3", cotracker_checkpoint=tmp_path / "missing.pth"))
    with pytest.raises(ToolFault) as info:
        box.tracker()
    assert info.value.tool == "motion" and info.value.kind == "load"
    with pytest.raises(ToolFault, match="not retried for another"):  # remembered: fails at once, same reason
        box.tracker()


def test_toolbox_in_process_defaults_are_lazy():
    box = Toolbox(ToolSettings())
    assert isinstance(box.tracker(), LKTracker) and box.tracker() is box.tracker()
    scorer = box.surprise()
    assert isinstance(scorer, VJEPA2SurpriseScorer) and scorer._model is None  # nothing loaded yet
    assert box.quality(np.zeros((4, 8, 8, 3), np.uint8)).uniform


def test_open_bind_warning_only_for_an_unguarded_non_loopback_bind():
    from tools.service import open_bind_warning

    assert open_bind_warning("127.0.0.1", None, "RAA_TOOLS_TOKEN") is None
    assert open_bind_warning("::1", None, "RAA_TOOLS_TOKEN") is None
    assert open_bind_warning("0.0.0.0", "tok", "RAA_TOOLS_TOKEN") is None
    assert open_bind_warning("0.0.0.0", None, "RAA_REWARD_TOKEN") == (
        "warning: serving on 0.0.0.0 without a token (set --token or RAA_REWARD_TOKEN)")
