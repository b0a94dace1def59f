"""`graph.setup_rejections.rejected_request` counts the server's rejections of a request only: not a connection
that failed or timed out (no reply came) nor the model declining (a reply came, the model's own). It counted every
LangChain `ModelError`, and langchain-openai raises its connection and timeout errors as `ModelError`s too
(`OpenAIConnectionError`, `OpenAITimeoutError`): a connection error's words were read as the server's answer to the
request (a part it does not take, an account without credit: "settings" at once, never retried), and a model's
refusal sent `raa doctor` to ask whether RAA_MODEL is a vision model."""

from __future__ import annotations

import asyncio
import socket

import pytest
from langchain_core.exceptions import ModelConnectionError, ModelError, ModelRefusalError, ModelTimeoutError
from langchain_openai import ChatOpenAI

from graph.backbone import BackboneFault, Usage
from graph.server_limits import limit_kind, rejected_request
from graph.settings_faults import no_credit, no_template
from graph.setup_rejections import unsupported_part
from tests.openai_stub import OpenAIStub, StubReply, tool_reply
from tests.test_backbone_http import MSGS
from tests.test_backbone_scripted import _bb
from tests.test_backbone_unsupported_requests import OLLAMA_TOOLS, VIEW
from tests.test_doctor_call_hints import _images_check, _scripted


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chat_error(base_url: str, timeout: float) -> BaseException:
    chat = ChatOpenAI(base_url=base_url, model="m", api_key="k", timeout=timeout, max_retries=0)
    with pytest.raises(ModelError) as info:
        chat.invoke("hi")
    return info.value


@pytest.mark.parametrize("kind", ["connection", "timeout"])
def test_chat_openai_s_connection_and_timeout_errors_are_no_rejection(kind: str) -> None:
    if kind == "connection":
        exc = _chat_error(f"http://127.0.0.1:{_closed_port()}/v1", 5.0)
        assert isinstance(exc, ModelConnectionError), type(exc)
    else:
        with OpenAIStub([StubReply(content="{}", delay_s=1.0)]) as stub:
            exc = _chat_error(stub.base_url, 0.2)
        assert isinstance(exc, ModelTimeoutError), type(exc)
    assert not rejected_request(exc) and limit_kind(exc) is None


NOT_TAKEN = f"Connection error: the relay lost the upstream ({OLLAMA_TOOLS})"
NO_CREDIT = "Request timed out; credit balance is too low to read? budget has been exceeded!"


@pytest.mark.parametrize("error", [ModelConnectionError, ModelTimeoutError])
def test_another_chat_model_s_failed_connection_is_retried_whatever_its_words(error: type) -> None:
    """Its words are the client's, not the server's answer: a tool round's "does not support tools" in them was a
    "settings" fault at once (one call, never retried), as were a 4xx's words for an account without credit."""
    assert unsupported_part(error(NOT_TAKEN), {"tools": [VIEW]}) is None
    assert not no_credit(error(NO_CREDIT)) and not no_template(error("tokenizer.chat_template is not set"))
    bb, model = _bb([error(NOT_TAKEN)] * 3)
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.atool_round("judge", list(MSGS), [VIEW], Usage()))
    assert info.value.kind in ("transport", "timeout") and len(model.calls) == 3, (info.value, len(model.calls))


def test_a_model_s_refusal_is_its_answer_not_a_rejection_the_doctor_probes(tmp_path, monkeypatch) -> None:
    """The doctor took the model's refusal for a server's rejection it could not place: it sent the request again
    without images and asked whether RAA_MODEL is a vision model and the server takes the method."""
    refusal = ModelRefusalError("I can't describe these images.")
    assert not rejected_request(refusal) and limit_kind(refusal) is None
    _scripted(monkeypatch, refusal)
    with OpenAIStub([tool_reply("view_frames", {"frames": [0]})], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "can't describe" in detail, detail
    assert "without images" not in detail and "vision model" not in detail, detail
