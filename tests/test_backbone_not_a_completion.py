"""A URL that answers 200 with something other than an OpenAI chat completion (RAA_BASE_URL pointing at a web
page, a server root without /v1, another API): one clear "transport" fault at once for every structured method
and tool rounds (it was "unexpected AttributeError 'str' object has no attribute 'choices'" under json_schema
and json_mode, and re-asked as an invalid reply under function_calling and in tool rounds)."""

from __future__ import annotations

import asyncio
import json

import pytest

from graph.backbone import BackboneFault, Usage
from graph.transport import _LC_SHAPE, BACKBONE_NAMES, _raised_by_reader, not_a_completion
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import METHODS, MSGS, good, make, run

HTML = StubReply(body="<!doctype html><html><head><title>Welcome</title></head><body>Hi</body></html>",
                 content_type="text/html; charset=utf-8")
OTHER_JSON = StubReply(body=json.dumps({"status": "ok", "version": "2.1"}))  # a server root's health JSON
ERROR_200 = StubReply(body=json.dumps({"error": "upstream unavailable"}))  # an error body with status 200
BODIES = {"html": HTML, "other_json": OTHER_JSON, "error_200": ERROR_200}
VIEW = {"type": "function", "function": {"name": "view_frames", "description": "view frames",
                                         "parameters": {"type": "object", "properties": {}}}}


def _check(fault: BackboneFault, stub: OpenAIStub, usage: Usage) -> None:
    assert fault.kind == "transport", fault.message
    assert fault.message.startswith("the endpoint's reply is not an OpenAI chat completion (HTTP 200")
    assert "check RAA_BASE_URL" in fault.message and "/v1" in fault.message
    assert len(stub.requests) == 1 and usage.calls == 0  # no retry, no re-ask, no model reply counted


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("method", METHODS)
def test_structured_call_faults_at_once(method: str, body: str) -> None:
    with OpenAIStub([BODIES[body]] * 4) as stub, pytest.raises(BackboneFault) as info:
        usage = Usage()
        run(make(stub, method, schema_retries=2, max_retries=2), usage)
    _check(info.value, stub, usage)
    if method != "function_calling":  # the SDK attached the HTTP reply: its content type is shown
        assert ("text/html" in info.value.message) == (body == "html")


@pytest.mark.parametrize("body", BODIES)
def test_tool_round_faults_at_once(body: str) -> None:
    with OpenAIStub([BODIES[body]] * 4) as stub, pytest.raises(BackboneFault) as info:
        usage = Usage()
        asyncio.run(make(stub, "json_schema", schema_retries=2).atool_round("inspect", list(MSGS), [VIEW], usage))
    _check(info.value, stub, usage)
    assert info.value.stage == "inspect" and "--tool-call-parser" not in info.value.message


@pytest.mark.parametrize("method", METHODS)
def test_real_completions_still_pass_and_are_reasked(method: str) -> None:
    """The check must not catch a chat completion whose content fails validation (json_schema attaches the
    same HTTP reply to that error)."""
    bad = StubReply(content='{"label": "ok", "score": 99}') if method != "function_calling" else \
        StubReply(content="{'label': oops")
    with OpenAIStub([bad, good(method, score=2)]) as stub:
        out = run(make(stub, method, schema_retries=1), Usage())
    assert out.score == 2 and len(stub.requests) == 2


def test_both_langchain_signals_hold_for_the_installed_version() -> None:
    """Without an attached HTTP reply (function_calling, tool rounds) the check relies on langchain-openai's
    reader raising, or its wording: each is checked here so an upgrade that changes one is seen."""
    for body in (HTML, OTHER_JSON):
        with OpenAIStub([body]) as stub, pytest.raises(BackboneFault) as info:
            run(make(stub, "function_calling", schema_retries=0), Usage())
        cause = info.value.__cause__
        assert isinstance(cause, Exception) and _raised_by_reader(cause)
        assert str(cause).strip("\"'").startswith(_LC_SHAPE)


def test_unrelated_errors_are_not_taken_for_a_wrong_url() -> None:
    assert not_a_completion(ValueError("Unexpected token in the reply"), BACKBONE_NAMES) is None
    assert not_a_completion(AttributeError("'str' object has no attribute 'choices'"), BACKBONE_NAMES) is None  # no HTTP reply seen


def test_a_run_against_a_web_page_ends_ineligible_with_the_reason(monkeypatch, tmp_path) -> None:
    pytest.importorskip("graph.builder")
    from typer.testing import CliRunner

    from graph.cli import app
    from tests.test_cli_agent import _clip, _env

    clip = _clip(tmp_path / "a.mp4")
    with OpenAIStub(responder=lambda body: HTML) as stub:
        _env(monkeypatch, tmp_path, stub.base_url)
        res = CliRunner().invoke(app, ["score", clip, "-i", "push the block right", "--json", "--preset",
                                       "no_wmreward"])
    assert res.exit_code == 3, res.output
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["reward"] is None and result["status"] == "ineligible"
    assert any("not an OpenAI chat completion" in r and "RAA_BASE_URL" in r for r in result["reasons"]), result
    stages = [r["messages"][0]["content"].splitlines()[0] for r in stub.requests]  # "# stage: NAME"
    assert len(stages) == len(set(stages))  # each stage (some run side by side) asked once: no retry, no re-ask
