"""What the services' error answers say of the server's files: a clip requested by path is named relative to the
tool service's allowed root (its absolute path stays in the server's log), and a reward item whose clip cannot be
written does not name the reward service's temporary folder."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient
from service_helpers import moving_clip

from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings
from tools.video import write_video


@pytest.fixture()
def root(tmp_path):
    """An allowed root holding a clip and a junk file in a subfolder."""
    sub = tmp_path / "root" / "episodes"
    sub.mkdir(parents=True)
    write_video(sub / "clip.mp4", moving_clip(6))
    (sub / "junk.mp4").write_bytes(b"definitely not a video")
    return tmp_path / "root"


@pytest.fixture()
def tools_client(root):
    app = create_app(ToolSettings(), root, workers=1, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize(("body", "status"), [
    ({"path": "episodes/junk.mp4", "grid_size": 2}, 422),  # undecodable: the reader's message names the file
    ({"path": "episodes/clip.mp4", "grid_size": 2, "frame_indices": [0, 99]}, 400),  # past the clip's end
])
def test_an_error_about_a_clip_by_path_names_it_relative_to_the_root(tools_client, root, body, status, caplog):
    """The reader names the file it was given, the resolved absolute path: a 422 read "undecodable video:
    VideoDecodeError: /srv/data/root/episodes/junk.mp4: ...", the server's layout sent to every client."""
    absolute = str((root / body["path"]).resolve())
    with caplog.at_level(logging.WARNING, logger="tools.service_frames"):
        r = tools_client.post("/v1/track", json=body)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert str(root.resolve()) not in detail and body["path"] in detail, detail
    assert absolute in caplog.text  # the server's log keeps the absolute path


def test_a_tool_fault_about_a_clip_by_path_names_it_relative_to_the_root(tools_client, root, monkeypatch):
    """Any other error of the job (an OSError reading the file, a bug) travels as the fault's message."""
    import tools.service_jobs as jobs

    def decode(src, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(src))

    monkeypatch.setattr(jobs, "decode_frames", decode)
    r = tools_client.post("/v1/track", json={"path": "episodes/clip.mp4", "grid_size": 2})
    assert r.status_code == 500, r.text
    answer = r.json()
    assert str(root.resolve()) not in r.text and "episodes/clip.mp4" in answer["fault"]["message"], r.text
    assert "episodes/clip.mp4" in answer["detail"]


def _score(app, items: list[dict], meta: dict | None = None):
    with TestClient(app, raise_server_exceptions=False) as c:
        return c.post("/v1/score", json={"items": items, "meta": meta or {}})


def _full_disk(monkeypatch, name: str = "00001.mp4") -> None:
    """Writing the clip ``name`` fails as a full disk does: an OSError naming the file."""
    import errno
    import pathlib

    real_write = pathlib.Path.write_bytes

    def write_bytes(self, data):
        if self.name == name:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_write(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", write_bytes)


def _fake_runs(monkeypatch) -> None:
    import graph.reward_service
    from graph.schemas import RewardResult

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        return RewardResult(status="scored", reward=0.5, run_id=run_id, preset=preset)

    monkeypatch.setattr(graph.reward_service, "arun_agent", fake_run)


ITEM = {"video_b64": "Ynl0ZXM=", "instruction": "x"}


def test_a_clip_that_cannot_be_written_does_not_name_the_services_temp_folder(monkeypatch, caplog):
    """The reason read "item 1: the clip cannot be written on the service host: [Errno 28] No space left on device:
    '/tmp/raa-reward-k2j4/00001.mp4'": the service's temporary folder, sent to the trainer."""
    import tempfile

    from graph.reward_service import create_reward_app

    _fake_runs(monkeypatch)
    _full_disk(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="graph.reward_service"):
        res = _score(create_reward_app(object(), "full"), [ITEM] * 3)
    assert res.status_code == 200, res.text
    results = res.json()["results"]
    assert [r["reward"] for r in results] == [0.5, None, 0.5] and results[1]["kind"] == "error"
    reason = results[1]["reasons"][0]
    assert reason.startswith("service: internal: item 1: the clip cannot be written on the service host")
    assert "No space left" in reason
    assert "raa-reward-" not in res.text and tempfile.gettempdir() not in res.text, reason
    assert "raa-reward-" in caplog.text  # the server's log names the file


def test_a_kept_clip_that_cannot_be_written_is_named_relative_to_the_keep_folder(monkeypatch, tmp_path):
    from graph.reward_service import create_reward_app

    _fake_runs(monkeypatch)
    _full_disk(monkeypatch)
    keep = tmp_path / "kept"
    res = _score(create_reward_app(object(), "full", keep_videos=keep), [ITEM] * 3, {"iteration": 3})
    reason = res.json()["results"][1]["reasons"][0]
    assert str(tmp_path) not in res.text, reason
    folder = next(keep.iterdir()).name
    assert folder.startswith("it000003-") and f"{folder}/00001.mp4" in reason, reason


def test_the_agents_reasons_about_a_clip_do_not_name_the_services_temp_folder(tmp_path):
    """The agent names the clip it reads: an undecodable video's reason named /tmp/raa-reward-.../00000.mp4."""
    import base64

    from graph_scripts import garbage_file
    from test_reward_service import _agent

    from graph.reward_service import create_reward_app

    junk = base64.b64encode(garbage_file(tmp_path / "g.mp4").read_bytes()).decode()
    res = _score(create_reward_app(_agent(), "decomposed"), [{"video_b64": junk, "instruction": "x"}])
    result = res.json()["results"][0]
    assert result["status"] == "ineligible" and "raa-reward-" not in res.text, result["reasons"]
    assert any("item 0" in r for r in result["reasons"]), result["reasons"]


def test_a_keep_folder_the_service_cannot_make_is_a_507_without_its_path(tmp_path):
    from graph.reward_service import create_reward_app

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    res = _score(create_reward_app(object(), "full", keep_videos=blocker / "kept"), [ITEM])
    assert res.status_code == 507 and "cannot make a folder" in res.text, res.text
    assert str(tmp_path) not in res.text, res.text


@pytest.mark.parametrize("code", [5, 116, 24])  # EIO, ESTALE (a network disk), EMFILE (too many open files)
def test_a_path_the_service_hosts_machine_fails_to_check_is_its_machine_fault(tools_client, root, monkeypatch, code):
    """The path check's ``stat`` failed by the service host's machine said so as a 404 with the clip's "cannot be
    read" (VideoNotFoundError): the one request was not retried, where the same failure a moment later, in the
    decode, is the 503 machine fault the client retries after its Retry-After (tools/service_frames.py)."""
    import os
    from pathlib import Path

    clip = (root / "episodes" / "clip.mp4").resolve()
    real = Path.stat

    def stat(self, *args, **kwargs):
        if self == clip:
            raise OSError(code, os.strerror(code), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    r = tools_client.post("/v1/track", json={"path": "episodes/clip.mp4", "grid_size": 2})
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] and r.json()["fault"]["kind"] == "machine"
    assert "episodes/clip.mp4" in r.json()["detail"] and str(root.resolve()) not in r.json()["detail"]
