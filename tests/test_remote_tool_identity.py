"""Remote tools' identity in the frame cache's keys (`Toolbox.tracker_identity` / `scorer_identity`): it was the
tool service's URL alone, so two toolboxes sharing a frame cache took each other's tracks and surprise whatever
model each service at that URL ran (a service restarted with another V-JEPA 2 to compare two models, in one
notebook). Now a remote identity is the toolbox's own, and the service names what it serves in every answer
(`SERVED_HEADER`): a toolbox whose service comes back with other models faults instead of mixing their results
with the ones it cached."""

from __future__ import annotations

import pytest
from service_helpers import TOKEN, moving_clip, serve

from tools.client import SERVED_HEADER, RemoteMotionTracker, ToolServiceClient
from tools.errors import ToolFault
from tools.motion import LKTracker
from tools.motion.lk import LKConfig
from tools.service import create_app
from tools.settings import ToolSettings
from tools.toolbox import Toolbox, served_identity

URL = "http://127.0.0.1:9"


def test_two_remote_toolboxes_at_one_url_do_not_share_keys_and_one_keeps_its_own():
    a, b = Toolbox(ToolSettings(tools_url=URL)), Toolbox(ToolSettings(tools_url=URL))
    assert a.tracker_identity != b.tracker_identity and a.scorer_identity != b.scorer_identity
    before = (a.tracker_identity, a.scorer_identity)
    a.close()  # a fresh connection pool: the same toolbox, the same keys
    assert (a.tracker_identity, a.scorer_identity) == before


def test_the_service_names_what_it_serves_and_the_client_refuses_a_change(service_root):
    tracker = LKTracker()
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=tracker, enable_surprise=False)
    frames = moving_clip()
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=1) as client:
        remote = RemoteMotionTracker(client)
        client.check_serves("motion")  # pins what the service serves at start (a batch's preload_tools)
        app.state.tools.identity = served_identity(LKTracker(LKConfig(win_size=9)), None)
        with pytest.raises(ToolFault, match="other models"):
            remote.track(frames, grid_size=2)
        app.state.tools.identity = served_identity(tracker, None)
        remote.track(frames, grid_size=2)
        served = app.state.tools.identity
        assert served == served_identity(tracker, None)
        assert client.info()["served"] == served
        remote.track(frames, grid_size=2)  # the same models: answered as before
        app.state.tools.identity = served_identity(LKTracker(LKConfig(win_size=31)), None)  # the URL now serves another tracker
        with pytest.raises(ToolFault) as info:
            remote.track(frames, grid_size=2)
    assert info.value.tool == "service" and info.value.kind == "config"
    assert "other models" in info.value.message and url in info.value.message


def test_the_header_is_on_every_tool_answer(service_root):
    from fastapi.testclient import TestClient
    from service_helpers import AUTH

    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    assert r.status_code == 200 and r.headers[SERVED_HEADER] == app.state.tools.identity
