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
