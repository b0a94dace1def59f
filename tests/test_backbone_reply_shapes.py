"""Reply shapes an OpenAI-compatible server (or another LangChain chat model) may send that the backbone read
wrongly: a refusal given as a content part, and a tool round cut at the token limit (before any content: a
reasoning model whose reasoning, split off by the server's reasoning parser, used the whole budget; or in the
middle of a tool call's arguments)."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage

from graph.backbone import Backbone, BackboneFault, Usage
from graph.replies import declined
from graph.testing import ScriptedChatModel
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import MSGS, Verdict, make, run
from tests.test_backbone_replies import VIEW


def _completion(message: dict, finish_reason: str = "stop") -> StubReply:
    return StubReply(body=json.dumps({
        "id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}))


REFUSAL_PART = {"content": [{"type": "refusal", "refusal": "I can't judge this clip."}]}


def test_a_refusal_content_part_is_declined() -> None:
    """LangChain's own structured-output parsers take a `refusal` content block for a refusal; `declined` read
    only `additional_kwargs["refusal"]`, so json_mode and tool rounds re-asked it as an empty reply."""
    reply = AIMessage(content=[{"type": "refusal", "refusal": "no"}])
    assert declined(reply) == "the model refused: no"
    assert declined(AIMessage(content=[{"type": "text", "text": "{}"}])) is None


@pytest.mark.parametrize("method", ["json_mode", "tools"])
def test_a_refusal_content_part_is_refused_at_once_over_http(method: str) -> None:
    with OpenAIStub([_completion(REFUSAL_PART)] * 3) as stub, pytest.raises(BackboneFault) as info:
        if method == "tools":
            make(stub, "json_schema").tool_round("inspect", list(MSGS), [VIEW], Usage())
        else:
            run(make(stub, method), Usage())
    assert info.value.kind == "refused" and "can't judge" in info.value.message and len(stub.requests) == 1


def test_a_scripted_refusal_content_part_is_refused_in_json_mode() -> None:
    model = ScriptedChatModel({"judge": [AIMessage(content=[{"type": "refusal", "refusal": "no"}])] * 3})
    bb = Backbone(model, method="json_mode", schema_retries=2, retry_wait=(0.0, 0.0))
    with pytest.raises(BackboneFault) as info:
        bb.structured("judge", Verdict, list(MSGS), usage := Usage())
    assert info.value.kind == "refused" and usage.calls == 1


def test_a_tool_round_cut_at_the_token_limit_before_any_content_says_to_raise_the_cap() -> None:
    """Content null with finish_reason "length": the structured methods said "raise RAA_MAX_TOKENS", a tool
    round only "the reply had neither content nor tool calls"."""
    cut = _completion({"content": None, "reasoning_content": "Frame 3 shows the gripper ..."}, "length")
    with OpenAIStub([cut, cut]) as stub, pytest.raises(BackboneFault) as info:
        make(stub, "json_schema", schema_retries=1).tool_round("inspect", list(MSGS), [VIEW], usage := Usage())
    assert "RAA_MAX_TOKENS" in info.value.message and usage.calls == 2 and usage.output_tokens == 14
    assert "RAA_MAX_TOKENS" in json.dumps(stub.requests[1]["messages"])  # the re-ask says so too


def test_a_tool_round_with_an_answer_or_not_cut_is_unchanged() -> None:
    empty = _completion({"content": None})
    with OpenAIStub([empty, empty]) as stub, pytest.raises(BackboneFault) as info:
        make(stub, "json_schema", schema_retries=1).tool_round("inspect", list(MSGS), [VIEW], Usage())
    assert info.value.kind == "empty_reply" and "RAA_MAX_TOKENS" not in info.value.message


def test_a_tool_call_cut_at_the_token_limit_says_to_raise_the_cap() -> None:
    """Arguments cut mid-JSON (finish_reason "length") were re-asked as "invalid arguments" without the hint."""
    call = {"id": "c1", "type": "function", "function": {"name": "view_frames", "arguments": '{"frames": [3, 5'}}
    cut = _completion({"content": None, "tool_calls": [call]}, "length")
    with OpenAIStub([cut, cut]) as stub, pytest.raises(BackboneFault) as info:
        make(stub, "json_schema", schema_retries=1).tool_round("inspect", list(MSGS), [VIEW], Usage())
    assert info.value.kind == "invalid_reply" and "RAA_MAX_TOKENS" in info.value.message
    assert "view_frames" in info.value.message


DECLINED = {"refusal": AIMessage(content="", additional_kwargs={"refusal": "not this clip"}),
            "refusal_part": AIMessage(content=[{"type": "refusal", "refusal": "not this clip"}]),
            "content_filter": AIMessage(content="", response_metadata={"finish_reason": "content_filter"})}


@pytest.mark.parametrize("shape", DECLINED)
@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_a_declined_structured_reply_of_any_chat_model_is_refused_at_once(method: str, shape: str) -> None:
    """Only langchain-openai's parsers report a refusal for json_schema and function_calling: from any other chat
    model it was "empty_reply: the reply had no content", re-asked schema_retries times (declined each time)."""
    model = ScriptedChatModel({"judge": [DECLINED[shape]] * 3})
    bb = Backbone(model, method=method, schema_retries=2, retry_wait=(0.0, 0.0))
    with pytest.raises(BackboneFault) as info:
        bb.structured("judge", Verdict, list(MSGS), usage := Usage())
    assert info.value.kind == "refused" and usage.calls == 1
    assert ("not this clip" if shape != "content_filter" else "content filter") in info.value.message


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_a_cut_structured_reply_of_any_chat_model_says_to_raise_the_cap(method: str) -> None:
    """json_mode from a chat model other than ChatOpenAI (whose SDK raises LengthFinishReasonError) only said
    "the reply's JSON object is not closed"."""
    cut = AIMessage(content='{"label": "ok", "sco', response_metadata={"finish_reason": "length"})
    bb = Backbone(ScriptedChatModel({"judge": [cut] * 2}), method=method, schema_retries=1, retry_wait=(0.0, 0.0))
    with pytest.raises(BackboneFault) as info:
        bb.structured("judge", Verdict, list(MSGS), Usage())
    assert info.value.kind == "invalid_reply" and "RAA_MAX_TOKENS" in info.value.message


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_a_cut_structured_reply_of_any_chat_model_is_never_taken(method: str) -> None:
    """A reply cut at the token limit whose object still validates was taken from a chat model other than
    ChatOpenAI (whose SDK refuses every cut reply) with json_mode and function_calling: an unfinished answer."""
    cut = AIMessage(content='{"label": "ok", "score": 3}\nThe arm then', response_metadata={"finish_reason": "length"})
    bb = Backbone(ScriptedChatModel({"judge": [cut] * 2}), method=method, schema_retries=1, retry_wait=(0.0, 0.0))
    with pytest.raises(BackboneFault) as info:
        bb.structured("judge", Verdict, list(MSGS), usage := Usage())
    assert info.value.kind == "invalid_reply" and "RAA_MAX_TOKENS" in info.value.message and usage.calls == 2


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode", "tools"])
def test_a_reply_whose_answer_the_reasoning_parser_took_says_so(method: str, field: str) -> None:
    """vLLM's reasoning parsers take a whole output without a closing think tag for reasoning (a model served with
    thinking off): content null, finish_reason "stop". The fault only said "the reply had no content"."""
    split = _completion({"content": None, field: '{"label": "ok", "score": 4}'})
    with OpenAIStub([split, split]) as stub, pytest.raises(BackboneFault) as info:
        if method == "tools":
            make(stub, "json_schema", schema_retries=1).tool_round("inspect", list(MSGS), [VIEW], Usage())
        else:
            run(make(stub, method, schema_retries=1), Usage())
    assert info.value.kind == "empty_reply" and "27 characters of reasoning" in info.value.message
    assert "reasoning parser" in info.value.message and "RAA_MAX_TOKENS" not in info.value.message
