"""A ValueError from the chat model is a reply that failed validation only when a reply came back (the HTTP reply
langchain-openai attaches to the openai SDK's error, or an error raised while a completion was read); one raised
with no reply (a chat model's own check of its request or parameters) is no model call and is never re-asked."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

from graph.backbone import Backbone, BackboneFault, Usage
from graph.testing import ScriptedChatModel
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import METHODS, MSGS, Verdict
from tests.test_backbone_not_a_completion import VIEW

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}
WITH_IMAGE = [MSGS[0], HumanMessage(content=[{"type": "text", "text": "Is it ok?"}, IMAGE])]


def _client_check() -> ValueError:
    return ValueError("temperature must be in [0, 1] for this provider")


@pytest.mark.parametrize("method", [*METHODS, "tools"])
def test_a_value_error_raised_without_a_reply_is_no_call_and_not_reasked(method: str) -> None:
    """It was taken for a reply that failed validation: re-asked `schema_retries` times (the same request, refused
    the same way), each try counted as a model call with its images, and the fault said "invalid_reply: 3 replies
    failed Verdict", sending the researcher to read replies that never existed."""
    model = ScriptedChatModel({"judge": [_client_check()] * 3})
    bb = Backbone(model, method=method if method != "tools" else "json_schema", schema_retries=2,
                  retry_wait=(0.0, 0.0))
    usage = Usage()
    with pytest.raises(BackboneFault) as info:
        if method == "tools":
            asyncio.run(bb.atool_round("judge", list(WITH_IMAGE), [VIEW], usage))
        else:
            asyncio.run(bb.astructured("judge", Verdict, list(WITH_IMAGE), usage))
    fault = info.value
    assert len(model.calls) == 1 and usage.as_dict() == Usage().as_dict()
    assert fault.kind == "transport" and "replies failed" not in fault.message, fault.message
    assert "ValueError" in fault.message and "temperature must be in [0, 1]" in fault.message
    assert "no reply" in fault.message


class _Mine(ChatOpenAI):
    """The caller's own ChatOpenAI subclass: used as given (no completion-shape repairs)."""


def test_a_reply_langchain_openai_cannot_read_is_still_a_reply() -> None:
    """A completion whose tool-call arguments are an object makes langchain-openai's reader raise a pydantic
    ValidationError after the reply came back (with no HTTP reply attached): still a call, re-asked."""
    call = {"id": "c1", "type": "function", "function": {"name": "view_frames", "arguments": {"frames": [3]}}}
    body = json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "tool_calls",
                                    "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
                       "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})
    with OpenAIStub([StubReply(body=body)] * 2) as stub, pytest.raises(BackboneFault) as info:
        chat = _Mine(base_url=stub.base_url, model="m", api_key="k", timeout=5.0, max_retries=0)
        bb = Backbone(chat, schema_retries=1, max_retries=0, retry_wait=(0.0, 0.0))
        asyncio.run(bb.atool_round("judge", list(MSGS), [VIEW], usage := Usage()))
    assert info.value.kind == "invalid_reply" and len(stub.requests) == 2 and usage.calls == 2
