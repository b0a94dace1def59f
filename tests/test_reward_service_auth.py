"""The reward service's bearer token: an empty token means an open service, as for the tool service."""

from __future__ import annotations

from fastapi.testclient import TestClient

from graph.reward_service import create_reward_app
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings


def test_an_empty_token_is_an_open_service_for_every_client(tmp_path):
    """``raa serve-reward --token ""`` warned that it served without a token, yet it compared every request's
    token with "": a trainer sending one (``reward_options.token_env`` set) got 401 on each batch, every
    reward ineligible, while a client sending none passed. The tool service reads "" as no token."""
    headers = ({}, {"Authorization": "Bearer s3cret"})
    reward = create_reward_app(object(), "decomposed", token="")
    tools = create_app(ToolSettings(), tmp_path, token="", tracker=LKTracker(), enable_surprise=False)
    for app in (tools, reward):
        with TestClient(app) as c:
            assert [c.get("/v1/info", headers=h).status_code for h in headers] == [200, 200]
    with TestClient(create_reward_app(object(), "decomposed", token="s3cret")) as c:  # a token is still checked
        assert [c.get("/v1/info", headers=h).status_code for h in headers] == [401, 200]
