"""A reply the server cut at the token limit (finish_reason "length") is re-asked like any other rejected reply: its
text shown back (bounded, `graph.validation.SHOWN_CHARS`) and the model told to write a shorter answer. The re-ask
said only "the reply was cut ... (raise RAA_MAX_TOKENS)", a setting the model cannot change: it did not see what it
had written, nor that the answer had to be shorter, so it wrote the same length again and was cut again under the
same cap until the stage faulted."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage

from graph.backbone import Backbone, Usage
from graph.testing import ScriptedChatModel
from graph.validation import SHOWN_CHARS
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import MSGS, Verdict, good, make, run
from tests.test_backbone_replies import VIEW

CUT_TEXT = '{"label": "ok", "sco'
SHORTER = "write a shorter answer"


def _said(messages: list) -> tuple[list[str], str]:
    """(the assistant turns of a re-asked request, its last user text)."""
    shown = [m["content"] or json.dumps(m.get("tool_calls")) for m in messages if m["role"] == "assistant"]
    return shown, str(messages[-1]["content"])


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_a_cut_structured_reply_is_shown_back_with_the_ask_for_a_shorter_answer(method: str) -> None:
    """json_schema: the openai SDK's LengthFinishReasonError; json_mode and function_calling: `read_reply`."""
    cut = StubReply(content=CUT_TEXT, finish_reason="length")
    with OpenAIStub([cut, good(method)]) as stub:
        assert run(make(stub, method), usage := Usage()).score == 3
    assert usage.calls == 2
    shown, ask = _said(stub.requests[1]["messages"])
    assert shown == [CUT_TEXT] and SHORTER in ask and "RAA_MAX_TOKENS" in ask


def test_a_cut_reply_of_another_chat_model_is_shown_back_bounded() -> None:
    long = '{"label": "' + "x" * (SHOWN_CHARS + 500)
    cut = AIMessage(content=long, response_metadata={"finish_reason": "length"})
    model = ScriptedChatModel({"judge": [cut, {"label": "ok", "score": 3}]})
    bb = Backbone(model, method="json_mode", schema_retries=1, retry_wait=(0.0, 0.0))
    assert bb.structured("judge", Verdict, list(MSGS), Usage()).score == 3
    again = model.calls_for("judge")[1].messages
    assert isinstance(again[-2], AIMessage) and again[-2].text.startswith(long[:SHOWN_CHARS])
    assert "more characters not shown" in again[-2].text and SHORTER in again[-1].text


def test_a_tool_call_cut_at_the_token_limit_is_shown_back() -> None:
    """The cut call's arguments were shown back before the hint was added to its message, and then dropped."""
    call = {"id": "c1", "type": "function", "function": {"name": "view_frames", "arguments": '{"frames": [3, 5'}}
    cut = StubReply(body=json.dumps({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                     "finish_reason": "length"}]}))
    with OpenAIStub([cut, StubReply(content="R1 is met.")]) as stub:
        assert make(stub, "json_schema").tool_round("inspect", list(MSGS), [VIEW], Usage()).text == "R1 is met."
    shown, ask = _said(stub.requests[1]["messages"])
    assert shown == ['{"frames": [3, 5'] and SHORTER in ask and "RAA_MAX_TOKENS" in ask


def test_a_reply_not_cut_is_not_asked_to_be_shorter() -> None:
    with OpenAIStub([StubReply(content='{"label": "ok", "score": 99}'), good("json_mode")]) as stub:
        run(make(stub, "json_mode"), Usage())
    assert SHORTER not in _said(stub.requests[1]["messages"])[1]


def test_a_cut_function_call_is_shown_back_as_written() -> None:
    """function_calling: a call cut mid-arguments does not parse (LangChain's invalid_tool_calls), so the re-ask
    showed nothing of it, unlike a tool round's cut call."""
    call = {"id": "c1", "type": "function", "function": {"name": "Verdict", "arguments": CUT_TEXT}}
    cut = StubReply(body=json.dumps({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                     "finish_reason": "length"}]}))
    with OpenAIStub([cut, good("function_calling")]) as stub:
        assert run(make(stub, "function_calling"), Usage()).score == 3
    shown, ask = _said(stub.requests[1]["messages"])
    assert shown == [CUT_TEXT] and SHORTER in ask
