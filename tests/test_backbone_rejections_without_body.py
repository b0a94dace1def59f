"""A rejection of a part the request carried, when no request body can be read off the error.

Another chat model than ChatOpenAI raises LangChain's `ModelError`s with no request attached, and an openai SDK error
may carry a request whose body cannot be read (a streamed body, one that is not JSON). The backbone knows what it
sent: the messages, and the tools (a tool round, or function_calling's forced call) or the `response_format`
(json_schema, json_mode) of the call. Only the messages were passed on, so a server without tool calling or structured
output was "refused" for every clip (a 400) or retried and then "transport" (a 500), as the trainer counts clips the
agent could not judge; an openai SDK error whose body could not be read fell back to nothing at all.
"""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest
from langchain_core.exceptions import ModelAPIError, ModelInvalidRequestError

from graph.backbone import BackboneFault, Usage
from graph.schemas import Fault
from tests.test_backbone_http import MSGS, Verdict
from tests.test_backbone_scripted import _bb
from tests.test_backbone_unsupported_requests import (
    LLAMACPP_TOOLS,
    OLLAMA_TOOLS,
    OPENAI_SCHEMA,
    VIEW,
    VLLM_AUTO,
)

GOOD = {"label": "a", "score": 2}


def _structured_fault(replies: list, method: str) -> tuple[BackboneFault, int]:
    bb, model = _bb(replies + [GOOD], method=method)
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    return info.value, len(model.calls)


def _tool_round_fault(replies: list) -> tuple[BackboneFault, int]:
    bb, model = _bb(replies)
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.atool_round("judge", list(MSGS), [VIEW], Usage()))
    return info.value, len(model.calls)


def _settings(fault: BackboneFault, calls: int, *named: str) -> None:
    assert fault.kind == "settings" and calls == 1, fault  # not retried, not re-asked
    assert all(name in fault.message for name in named), fault.message
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


@pytest.mark.parametrize("error", [ModelInvalidRequestError, ModelAPIError], ids=["400", "500"])
def test_another_chat_model_s_function_calling_without_tool_support_names_the_method(error: type) -> None:
    fault, calls = _structured_fault([error(OLLAMA_TOOLS)] * 3, "function_calling")
    _settings(fault, calls, "RAA_STRUCTURED_METHOD=json_schema")


@pytest.mark.parametrize("error, text", [(ModelInvalidRequestError, VLLM_AUTO), (ModelAPIError, LLAMACPP_TOOLS)],
                         ids=["400", "500"])
def test_another_chat_model_s_tool_round_without_tool_support_names_both_ways_out(error: type, text: str) -> None:
    fault, calls = _tool_round_fault([error(text)] * 3)
    _settings(fault, calls, "RAA_INSPECT_MODE=plan")


def test_another_chat_model_s_structured_output_the_server_does_not_serve_names_the_method() -> None:
    fault, calls = _structured_fault([ModelInvalidRequestError(OPENAI_SCHEMA)], "json_schema")
    _settings(fault, calls, "RAA_STRUCTURED_METHOD=json_mode")


def test_another_chat_model_s_rejection_of_a_part_it_was_not_sent_stays_refused() -> None:
    """A json_mode request carries no tools: words about tools are no setup of the server's."""
    fault, _ = _structured_fault([ModelInvalidRequestError(VLLM_AUTO)], "json_mode")
    assert fault.kind == "refused", fault


def _unread_body(status: int, text: str) -> openai.APIStatusError:
    """The openai SDK's error for a request whose body was streamed (httpx cannot give it back: RequestNotRead)."""
    request = httpx.Request("POST", "http://stub/v1/chat/completions", content=iter([b'{"tools": []}']))
    return openai.APIStatusError(text, response=httpx.Response(status, request=request), body=None)


def test_an_openai_error_without_a_readable_body_is_read_against_what_was_sent() -> None:
    with pytest.raises(httpx.RequestNotRead):
        _ = _unread_body(400, VLLM_AUTO).request.content
    fault, calls = _tool_round_fault([_unread_body(400, VLLM_AUTO)])
    _settings(fault, calls, "RAA_INSPECT_MODE=plan")
    fault, calls = _structured_fault([_unread_body(500, LLAMACPP_TOOLS)] * 3, "function_calling")
    _settings(fault, calls, "RAA_STRUCTURED_METHOD=json_schema")
