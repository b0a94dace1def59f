"""`raa doctor --call`: the hint under a failed model call matches its cause. It said "the endpoint did not answer
... is the server up" for every "transport" fault, also for one the server answered (an HTTP 500 after the
retries) and for one where no request left (a chat model's own ValueError, a non-ASCII API key), sending the
researcher to check a server that was up."""

from __future__ import annotations

import asyncio

import httpx
import httpx2
import openai
import pytest
from langchain_core.exceptions import ModelConnectionError

from graph.doctor import run_checks
from graph.settings import BackboneSettings
from graph.testing import ScriptedChatModel
from graph.transport import no_answer
from tests.openai_stub import OpenAIStub, StubReply, json_reply, tool_reply
from tools.settings import ToolSettings

IMAGES = "48 images + structured output"
NO_ANSWER = "is the server up"


def _images_check(stub: OpenAIStub, tmp_path, **kw) -> tuple[str, str]:
    settings = BackboneSettings(base_url=stub.base_url, model="stub-model", api_key="EMPTY", max_retries=0,
                                schema_retries=0, traces_path=str(tmp_path / "traces.sqlite"),
                                cache_path=str(tmp_path / "cache.sqlite"), **{"timeout_s": 5, **kw})
    checks = asyncio.run(run_checks(settings, ToolSettings(), call=True, wait_s=2))
    return next((c.status, c.detail) for c in checks if c.name == IMAGES)


def _scripted(monkeypatch, error: BaseException) -> None:
    """The chat model the doctor builds from its settings raises `error` (the endpoint check still uses the stub)."""
    model = ScriptedChatModel({"doctor": [error]})
    monkeypatch.setattr("graph.backbone.default_chat_model", lambda settings: model)


def test_an_error_status_the_server_answered_is_shown_not_blamed_on_a_server_that_is_down(tmp_path):
    with OpenAIStub([StubReply(status=500, content="engine crashed"), tool_reply("view_frames", {"frames": [0]})],
                    models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "500" in detail and "engine crashed" in detail, detail
    assert NO_ANSWER not in detail and "did not answer" not in detail, detail


@pytest.mark.parametrize("error, shown", [
    (ValueError("temperature must be in [0, 1] for this provider"), "temperature must be in [0, 1]"),
    (UnicodeEncodeError("ascii", "EMPTY\u201d", 5, 6, "ordinal not in range(128)"), "RAA_API_KEY")])
def test_a_request_that_never_left_shows_the_faults_own_message(tmp_path, monkeypatch, error, shown):
    _scripted(monkeypatch, error)
    with OpenAIStub([], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "transport" in detail and shown in detail, detail
    assert NO_ANSWER not in detail and "did not answer" not in detail, detail


@pytest.mark.parametrize("error", [ConnectionError("[Errno 111] Connection refused"), TimeoutError()])
def test_a_connection_that_failed_or_timed_out_still_asks_whether_the_server_is_up(tmp_path, monkeypatch, error):
    _scripted(monkeypatch, error)
    with OpenAIStub([], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and NO_ANSWER in detail and "RAA_TIMEOUT_S" in detail, detail


def test_a_reply_slower_than_the_timeout_still_asks_whether_the_server_is_up(tmp_path):
    with OpenAIStub([StubReply(content="{}", delay_s=1.5), tool_reply("view_frames", {"frames": [0]})],
                    models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path, timeout_s=0.5)
    assert status == "problem" and "timeout" in detail and NO_ANSWER in detail, detail



@pytest.mark.parametrize("status, named", [(401, "RAA_API_KEY"), (403, "RAA_API_KEY"), (404, "RAA_MODEL")])
def test_a_key_or_model_the_server_refuses_names_that_setting_not_images_or_the_method(tmp_path, status, named):
    """A 401/403/404 on the image request (a `/models` list needs no key on vLLM, so the endpoint check passes) is a
    "settings" fault naming its setting: it was "refused", and the hint blamed the server's image limit."""
    with OpenAIStub([StubReply(status=status, content="no")] * 2, models=["stub-model"]) as stub:
        status_, detail = _images_check(stub, tmp_path)
    assert status_ == "problem" and "settings" in detail and named in detail, detail
    assert "limit-mm-per-prompt" not in detail and "RAA_STRUCTURED_METHOD" not in detail, detail


REJECTED = "Request failed validation: could not process the conversation"


def test_a_request_the_server_rejects_for_another_reason_is_not_blamed_on_its_image_limit(tmp_path):
    """A 400 the doctor cannot place (not an image or context limit: those are named by the server's words) was
    told "the server may take fewer than 48 images", also when the model takes no images at all or the server
    rejects the structured-output method. (A server's own words for a model that takes no images are a "settings"
    fault naming RAA_MODEL: tests/test_backbone_unsupported_requests.py.)"""
    with OpenAIStub([StubReply(status=400, content=REJECTED)] * 2, models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "refused" in detail and REJECTED in detail, detail
    assert "fewer than" not in detail and "limit-mm-per-prompt" not in detail, detail


def test_a_rejection_the_same_request_without_images_meets_too_names_the_structured_method(tmp_path):
    """The hint asked both "is RAA_MODEL a vision model" and "does the server take the method", with the
    recognised words of either now a "settings" fault naming its fix: the doctor sends the structured request
    again without images, and the rejection it meets again is the method's (or another parameter's), not the
    images'."""
    with OpenAIStub([StubReply(status=400, content=REJECTED)] * 2 + [tool_reply("view_frames", {"frames": [0]})],
                    models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert len(stub.requests) == 3 and "messages" in stub.requests[1], stub.requests
    assert not any(part.get("type") == "image_url" for m in stub.requests[1]["messages"]
                   if isinstance(m["content"], list) for part in m["content"]), "the second request has no image"
    assert status == "problem" and "without images" in detail, detail
    assert "RAA_STRUCTURED_METHOD=json_mode or function_calling" in detail and "vision model" not in detail, detail


def test_a_rejection_the_same_request_without_images_escapes_names_the_images(tmp_path):
    with OpenAIStub([StubReply(status=400, content=REJECTED), json_reply({"colour": "red"}),
                     tool_reply("view_frames", {"frames": [0]})], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "without images" in detail and "vision model" in detail, detail
    assert "RAA_STRUCTURED_METHOD=" not in detail, detail


def _status_error(status: int) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    return openai.APIStatusError("boom", response=httpx.Response(status, request=request), body=None)


@pytest.mark.parametrize("exc, expected", [
    (openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:1/v1")), True),
    (openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1:1/v1")), True),
    (httpx.ConnectError("refused"), True), (httpx2.ReadError("reset"), True), (httpx2.ReadTimeout("t"), True),
    (ConnectionResetError(), True), (ModelConnectionError("down"), True), (TimeoutError(), True),
    (_status_error(500), False), (_status_error(429), False), (ValueError("bad temperature"), False),
    (UnicodeEncodeError("ascii", "k\u201d", 1, 2, "no"), False), (RuntimeError("Event loop is closed"), False)])
def test_no_answer_is_a_timeout_or_a_failed_connection_only(exc, expected) -> None:
    assert no_answer(exc) is expected


def test_a_body_over_a_proxy_s_limit_names_the_size_sent_not_the_model(tmp_path):
    """A 413 from a reverse proxy before the server was "refused": the check asked whether RAA_MODEL is a vision
    model; it now says how large a body it sent and names the proxy's limit and the client settings to change."""
    too_large = StubReply(status=413, body="<html><title>413 Request Entity Too Large</title></html>",
                          content_type="text/html")
    with OpenAIStub([too_large, tool_reply("view_frames", {"frames": [0]})], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path, image_long_side=384)
    assert status == "problem" and "settings" in detail and "client_max_body_size" in detail, detail
    assert "48 images of 384x384 px" in detail and "MiB" in detail, detail
    assert "vision model" not in detail and NO_ANSWER not in detail, detail


# langchain-openai answers the stub's own json_schema wording with this warning before re-raising the 400 (expected here)
@pytest.mark.filterwarnings("ignore:This model does not support OpenAI's structured output feature:UserWarning")
def test_a_setup_fault_the_request_without_images_meets_is_named_with_its_fix(tmp_path):
    """A server that checks the images first and rejects them in words no fault reads, then names the method it does
    not serve once they are gone: the second request's "settings" fault says what to change, but the hint only
    asked about both parts again ("failed too: settings"), its fix not shown."""
    unserved = ("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.")
    with OpenAIStub([StubReply(status=400, content=REJECTED), StubReply(status=400, content=unserved),
                     tool_reply("view_frames", {"frames": [0]})], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "without images" in detail, detail
    assert "RAA_STRUCTURED_METHOD=json_mode or function_calling" in detail, detail


def test_a_request_without_images_that_failed_for_transport_leaves_both_parts_in_question(tmp_path):
    with OpenAIStub([StubReply(status=400, content=REJECTED), StubReply(status=503, content="upstream down"),
                     tool_reply("view_frames", {"frames": [0]})], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "vision model" in detail and "RAA_STRUCTURED_METHOD" in detail, detail
    assert "upstream down" in detail, "what the check request met is shown, not only its kind"
