"""Tool service endpoints (in-process test client): auth, path safety, limits, bad videos and uploads,
the CLI, and the tool settings / toolbox."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_helpers import AUTH, TOKEN

from tools.errors import ToolFault
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings
from tools.surprise import VJEPA2SurpriseScorer
from tools.toolbox import Toolbox


@pytest.fixture(scope="module")
def client(service_root, service_scorer):
    app = create_app(ToolSettings(), service_root, token=TOKEN, workers=2, max_upload_mb=1.0,
                     tracker=LKTracker(), scorer=service_scorer)
    with TestClient(app) as c:
        yield c


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


def test_track_by_path_with_summary(client, service_root):
    r = client.post("/v1/track", json={"path": "clip.mp4", "grid_size": 3, "summary": True}, headers=AUTH)
    assert r.status_code == 200, r.text
    body = r.json()
    assert np.asarray(body["tracks"]["tracks"]).shape == (18, 9, 2)
    assert body["frame_size"] == [64, 64] and body["summary"]["points"] == 9
    sel = client.post("/v1/track", json={"path": str(service_root / "clip.mp4"), "grid_size": 2,
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


def test_uploads_decode_and_limits(client, service_root):
    data = (service_root / "clip.mp4").read_bytes()
    r = client.post("/v1/track", files={"video": ("c.mp4", data)}, data={"grid_size": "2"}, headers=AUTH)
    assert r.status_code == 200, r.text
    r = client.post("/v1/surprise", files={"video": ("c.mp4", b"garbage")}, headers=AUTH)
    assert r.status_code == 422 and "undecodable" in r.json()["detail"]
    r = client.post("/v1/surprise", files={"video": ("c.mp4", b"")}, headers=AUTH)
    assert r.status_code == 422
    big = b"\0" * (1024 * 1024 + 10)
    r = client.post("/v1/track", files={"video": ("big.mp4", big)}, data={"grid_size": "2"}, headers=AUTH)
    assert r.status_code == 413


def test_clip_over_the_frame_limit_is_413(service_root):
    app = create_app(ToolSettings(max_frames=10), service_root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2})
        assert r.status_code == 413 and "pass frame_indices" in r.json()["detail"]
        ok = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": list(range(10))})
        assert ok.status_code == 200


def test_a_request_that_would_decode_too_much_is_413_before_decoding(service_root, monkeypatch):
    import tools.video as video

    # clip.mp4: 18 frames of 64x64 = 0.21 MiB of RGB
    app = create_app(ToolSettings(max_decode_mb=0.1), service_root, tracker=LKTracker(), enable_surprise=False)
    decoded: list[int] = []
    real = video.VideoReader._convert  # decodes: the reader's decode limit is checked before it
    monkeypatch.setattr(video.VideoReader, "_convert", lambda self, *a: decoded.append(1) or real(self, *a))
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2})
        assert r.status_code == 413 and "would take 0.211 MiB as RGB frames, over the decode limit of 0.1 MiB (the tool " \
            "service's max_decode_mb, RAA_TOOLS_MAX_DECODE_MB)" in r.json()["detail"]
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": list(range(10))})
        assert r.status_code == 413 and "10 frame(s) of 64x64" in r.json()["detail"] and decoded == []
        ok = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "frame_indices": list(range(8))})
        assert ok.status_code == 200 and decoded == [1]  # 8 frames: 0.09 MiB
    assert ToolSettings.from_env({"RAA_TOOLS_MAX_DECODE_MB": "512"}).max_decode_mb == 512


def test_surprise_by_path_and_short_clip(client, service_root):
    ev = client.post("/v1/surprise", json={"path": "clip.mp4"}, headers=AUTH).json()
    assert ev["status"] == "ok" and [w["start"] for w in ev["windows"]] == [0, 2]
    short = client.post("/v1/surprise", json={"path": "clip.mp4", "frame_indices": list(range(10))},
                        headers=AUTH).json()
    assert short["status"] == "not_enough_frames" and short["num_frames"] == 10
    # windows over chosen frames are named by clip frame (as /v1/track names its tracks), not by position
    part = client.post("/v1/surprise", json={"path": "clip.mp4", "frame_indices": list(range(1, 18))},
                       headers=AUTH).json()
    assert [(w["start"], w["end"]) for w in part["windows"]] == [(1, 16), (2, 17)]  # the last ends on frame 17
    assert part["windows"][0]["frames"] == list(range(1, 17)) and part["top"][0]["start"] in (1, 2)
    from tools.surprise import SurpriseEvidence

    top = part["top"][0]
    assert f"frames {top['start']}-{top['end']} (predicted {top['start'] + 8}-{top['end']})" in \
        SurpriseEvidence.model_validate(part).text()


@pytest.mark.parametrize("value", ["8", "-3", "abc", "1.5", "9" * 5000])  # 5000 digits: int() refused it, a 500
def test_bad_short_side_is_400(client, value):
    r = client.post("/v1/surprise", json={"path": "clip.mp4", "short_side": value}, headers=AUTH)
    assert r.status_code == 400 and "short_side" in r.json()["detail"]


class _Broken:
    def track(self, frames, *, grid_size=None, queries=None):
        raise ToolFault("motion", "run", "cotracker3 failed: CUDA out of memory")


def test_tool_fault_travels_to_the_client(service_root, service_scorer):
    app = create_app(ToolSettings(), service_root, tracker=_Broken(), scorer=service_scorer)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2})
        assert r.status_code == 500 and r.json()["fault"]["kind"] == "run"


class _Crashing:
    def track(self, frames, *, grid_size=None, queries=None):
        raise RuntimeError("tracker crashed on purpose")

    def score(self, frames):
        raise RuntimeError("scorer crashed on purpose")


def test_an_unexpected_exception_of_a_tool_is_a_run_fault_with_its_reason(service_root):
    """A tool that raised something other than a ToolFault gave a bare 500 "Internal Server Error": the reason
    stayed in the server's log and the client reported a transport fault of the service."""
    app = create_app(ToolSettings(), service_root, tracker=_Crashing(), scorer=_Crashing())
    with TestClient(app, raise_server_exceptions=False) as c:
        for endpoint, tool in (("/v1/track", "motion"), ("/v1/surprise", "surprise")):
            r = c.post(endpoint, json={"path": "clip.mp4", **({"grid_size": 2} if tool == "motion" else {})})
            assert r.status_code == 500, r.text
            fault = r.json()["fault"]
            assert fault["tool"] == tool and fault["kind"] == "run" and "crashed on purpose" in fault["message"]
        assert c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 0}).status_code == 400  # still a 400


class _NonFinite:
    def track(self, frames, *, grid_size=None, queries=None):
        tracks = LKTracker().track(frames, grid_size=grid_size, queries=queries)
        tracks.tracks[-1, 0] = np.nan
        return tracks


@pytest.mark.parametrize("encoding", ["list", "base64"])
def test_non_finite_positions_from_a_tracker_are_a_run_fault(service_root, service_scorer, encoding):
    app = create_app(ToolSettings(), service_root, tracker=_NonFinite(), scorer=service_scorer)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "summary": True,
                                      "tracks_encoding": encoding})
        fault = r.json()["fault"] if r.status_code == 500 else r.text
        assert (fault["tool"], fault["kind"]) == ("motion", "run")
        assert fault["message"].startswith("the tracker returned non-finite positions at 1 point-frames"), fault


class _OffContract:
    """A server-side tracker breaking one part of the tracker contract (`tools.motion.base.tracks_problem`)."""

    def __init__(self, how: str) -> None:
        self.how = how

    def track(self, frames, *, grid_size=None, queries=None):
        import dataclasses

        tracks = LKTracker().track(frames, grid_size=grid_size, queries=queries)
        if self.how == "frames":  # one frame short
            return type(tracks)(tracks.tracks[:-1], tracks.visible[:-1], tracks.query_frames)
        if self.how == "points":
            return type(tracks)(tracks.tracks[:, :-1], tracks.visible[:, :-1], tracks.query_frames[:-1])
        if self.how == "query_frames":
            return dataclasses.replace(tracks, query_frames=np.full(tracks.num_points, 99))
        return None


@pytest.mark.parametrize(("how", "request_json", "message"), [
    ("frames", {"grid_size": 2, "frame_indices": [0, 2, 4, 6]}, "the tracker returned 3 frames for 4 frames"),
    ("frames", {"grid_size": 2, "summary": True}, "the tracker returned 17 frames for 18 frames"),
    ("points", {"queries": [[0, 5, 5], [1, 9, 9]]}, "the tracker returned 1 points for 2 query points"),
    ("query_frames", {"grid_size": 2}, "the tracker returned query frames outside 0..17"),
    ("none", {"grid_size": 2}, "the tracker returned NoneType for 18 frames"),
])
def test_tracks_breaking_the_tracker_contract_are_a_run_fault(service_root, how, request_json, message):
    """The service checked only finite positions: a tracker one frame short answered 200 with frame_indices
    longer than its tracks (the client could not read them back), a wrong point count or query frame passed
    as evidence, and None was an AttributeError."""
    app = create_app(ToolSettings(), service_root, tracker=_OffContract(how), enable_surprise=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", **request_json})
    assert r.status_code == 500, r.text
    assert r.json()["fault"] == {"tool": "motion", "kind": "run", "message": message}


def test_surprise_can_be_disabled(service_root):
    app = create_app(ToolSettings(), service_root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/surprise", json={"path": "clip.mp4"})
        assert r.status_code == 501 and "not enabled" in r.json()["detail"]  # permanent: 503 means busy


def test_cli_defaults_and_token_from_env(monkeypatch, service_root):
    import typer
    import uvicorn
    from typer.testing import CliRunner

    from tools.cli import serve_tools_command
    from tools.service_http import SERVER_KEEPALIVE_S

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, log_level, **kw: seen.update(app=app, host=host, port=port, **kw))
    app = typer.Typer()
    app.command()(serve_tools_command)
    result = CliRunner().invoke(app, ["--allowed-root", str(service_root), "--no-surprise"], env={"RAA_TOOLS_TOKEN": "tok"})
    assert result.exit_code == 0, result.output
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8765
    assert seen["timeout_keep_alive"] == SERVER_KEEPALIVE_S  # longer than the clients keep a connection idle
    assert seen["app"].state.tools.token == "tok"
    bad = CliRunner().invoke(app, ["--device", "tpu"])
    assert bad.exit_code != 0


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


def test_regions_in_pixels_are_a_bad_request(client):
    r = client.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2, "summary": True,
                                       "regions": {"gripper": [0, 0, 32, 32]}}, headers=AUTH)
    assert r.status_code == 400 and "fractions of the frame" in r.json()["detail"]


def test_a_non_ascii_token_is_refused_at_the_edge_without_echoing_it(service_root):
    """A token like "pässwort" failed in the client with a bare UnicodeEncodeError, and a server started
    with it accepted only its latin-1 bytes."""
    import typer
    from typer.testing import CliRunner

    from tools.cli import serve_tools_command
    from tools.client import ToolServiceClient

    with pytest.raises(ValueError, match="RAA_TOOLS_TOKEN must be printable ASCII") as info:
        ToolSettings.from_env({"RAA_TOOLS_URL": "http://127.0.0.1:9", "RAA_TOOLS_TOKEN": "pässwort"})
    assert "pässwort" not in str(info.value) and "character 2" in str(info.value)
    with pytest.raises(ValueError, match="printable ASCII"):
        ToolSettings(tools_token="tab\there")
    with pytest.raises(ValueError, match="the tool service token must be printable ASCII"):
        ToolServiceClient("http://127.0.0.1:9", token="pässwort")
    with pytest.raises(ValueError, match="the service token must be printable ASCII"):
        create_app(ToolSettings(), service_root, token="pässwort", tracker=LKTracker(), enable_surprise=False)
    app = typer.Typer()
    app.command()(serve_tools_command)
    result = CliRunner().invoke(app, ["--allowed-root", str(service_root), "--no-surprise"],
                                env={"RAA_TOOLS_TOKEN": "pässwort"})
    assert result.exit_code == 2 and "must be printable ASCII" in result.output and "pässwort" not in result.output
    assert ToolSettings(tools_token="s3cret-Token_1").token() == "s3cret-Token_1"


def test_a_tool_service_url_without_a_scheme_is_refused_at_load():
    """"gpu-host:8765" loaded fine and every run of a batch then failed on its first tool request."""
    for bad in ("gpu-host:8765", "ftp://gpu-host", "http://", "127.0.0.1"):
        with pytest.raises(ValueError, match="RAA_TOOLS_URL .* needs http:// or https:// and a host"):
            ToolSettings.from_env({"RAA_TOOLS_URL": bad})
    assert ToolSettings(tools_url=" https://gpu-host:8765/ ").tools_url == "https://gpu-host:8765/"
    assert ToolSettings(tools_url="HTTP://10.0.0.2:8765").tools_url == "HTTP://10.0.0.2:8765"


def test_an_app_served_without_its_lifespan_says_so(service_root, service_scorer):
    """Without the lifespan (TestClient outside `with`, a server with lifespan off) no model had loaded: /healthz
    said ok, /v1/info answered {} (read by clients as "serves nothing"), /v1/surprise said --no-surprise and
    /v1/track failed with a 500. Every route now answers 503 naming the lifespan; after startup all work."""
    app = create_app(ToolSettings(), service_root, token=TOKEN, workers=1, tracker=LKTracker(),
                     scorer=service_scorer)
    bare = TestClient(app)
    for method, url in (("get", "/healthz"), ("get", "/v1/info"), ("post", "/v1/track"), ("post", "/v1/surprise")):
        r = getattr(bare, method)(url, headers=AUTH, **({"json": {"path": "clip.mp4"}} if method == "post" else {}))
        assert r.status_code == 503 and "lifespan" in r.json()["detail"], (url, r.status_code, r.text)
    with TestClient(app) as started:
        assert started.get("/healthz").status_code == 200
        assert started.get("/v1/info", headers=AUTH).json()["motion_backend"] == "lk"
        assert started.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH).status_code == 200
