"""A body over a service's size limit is refused (413) naming the setting that sets it, so whoever reads the
client's fault knows what to raise (tools/service.py, graph/reward_service.py)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from service_helpers import AUTH, TOKEN

from graph.reward_service import create_reward_app
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_upload_over_the_tool_service_limit_names_max_upload_mb(tmp_path, declared):
    app = create_app(ToolSettings(), tmp_path, token=TOKEN, tracker=LKTracker(), enable_surprise=False,
                     max_upload_mb=1.0)
    body = b"\x93NUMPY" + b"\0" * (2 << 20)
    with TestClient(app) as c:
        content = body if declared else iter([body[:1 << 20], body[1 << 20:]])
        r = c.post("/v1/track", content=content, headers={**AUTH, "Content-Type": "application/x-npy"})
    assert r.status_code == 413 and "--max-upload-mb" in r.json()["detail"], r.text


def test_a_body_over_the_reward_service_limit_names_max_body_mb():
    app = create_reward_app(object(), "decomposed", max_body_mb=1.0)
    with TestClient(app) as c:
        r = c.post("/v1/score", content=b'{"items": ["' + b"A" * (2 << 20) + b'"]}')
    assert r.status_code == 413 and "--max-body-mb" in r.json()["detail"], r.text
