"""`raa doctor` with a tool service that refuses this client (a wrong or missing RAA_TOOLS_TOKEN): every preset
with motion evidence or WMReward stops at start (`graph.context.preload_tools` asks the same /v1/info), so it
is a problem (exit 1), not the warning of a service that only lacks surprise. It was a warning saying that only
the WMReward presets would stop, and doctor exited 0."""

from __future__ import annotations

import pytest

from tools.settings import ToolSettings


@pytest.mark.parametrize("token", ["wrong-token", None])
def test_a_tool_service_that_refuses_the_token_is_a_problem(tmp_path, token):
    from graph.doctor_tools import service_check
    from tests.service_helpers import TOKEN, serve
    from tools.motion import LKTracker
    from tools.service import create_app

    app = create_app(ToolSettings(), tmp_path, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with serve(app) as url:
        check = service_check(ToolSettings(tools_url=url, tools_token=token))
    assert check.status == "problem", check
    assert "RAA_TOOLS_TOKEN" in check.detail and "cannot be used" in check.detail, check.detail
