"""`raa doctor`'s table shows its details as data: a model name, a server's words or a path holding an emoji code
(":smile:") was printed as the emoji, and a control character in them reached the terminal (an escape sequence that
retitles or clears it), as the eval and trace consoles once did (graph/commands.py)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graph.cli import app
from tests.openai_stub import OpenAIStub


def test_an_emoji_code_in_a_model_name_is_printed_as_written(tmp_path, monkeypatch) -> None:
    env = {"RAA_TRACES_PATH": str(tmp_path / "t.sqlite"), "RAA_CACHE_PATH": "off", "COLUMNS": "250",
           "RAA_VJEPA_MODEL": str(tmp_path), "RAA_MODEL": ":smile:\x1b]0;t\x07", "RAA_API_KEY": "EMPTY"}
    with OpenAIStub([], models=[":smile:\x1b]0;t\x07"]) as stub:
        res = CliRunner().invoke(app, ["doctor"], env={**env, "RAA_BASE_URL": stub.base_url})
    assert "serves :smile:\\x1b]0;t\\x07" in res.output and "\U0001f604" not in res.output, res.output
    assert "\x1b" not in res.output and "\x07" not in res.output, res.output


def test_doctor_names_a_completion_token_cap_above_the_server_s(tmp_path) -> None:
    """`raa doctor --call` adds what its probe says to each limit the server names: a kind without a line of its own
    would have ended the check in a KeyError."""
    import asyncio

    from graph.doctor import run_checks
    from tests.openai_stub import StubReply, tool_reply
    from tests.test_doctor import _settings
    from tests.test_settings_answers import TGI_MAX_NEW_TOKENS
    from tools.settings import ToolSettings

    reply = StubReply(status=422, body=json.dumps(TGI_MAX_NEW_TOKENS))
    with OpenAIStub([reply, tool_reply("view_frames", {"frames": [0]})]) as stub:
        checks = asyncio.run(run_checks(_settings(stub.base_url, tmp_path, max_tokens=4096),
                                        ToolSettings(vjepa_model=str(tmp_path)), call=True, wait_s=2))
    detail = next(c.detail for c in checks if c.name.endswith("structured output"))
    assert "RAA_MAX_TOKENS" in detail and "--max-total-tokens" in detail, detail
