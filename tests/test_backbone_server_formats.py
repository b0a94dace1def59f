"""Completions whose shape is the server's, not the model's, over the real ChatOpenAI path the backbone builds
(`graph.backbone.default_chat_model`) against a local stub: tool-call arguments sent as a JSON object instead of
a string (some llama.cpp llama-server builds, older TGI), and a 200 without a choice or a message."""

from __future__ import annotations

import asyncio
import json

import pytest

from graph.backbone import Backbone, BackboneFault, Usage, default_chat_model
from graph.settings import BackboneSettings
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import METHODS, MSGS, Verdict
from tests.test_backbone_not_a_completion import VIEW


def _body(choices: list, usage: dict | None = None) -> StubReply:
    return StubReply(body=json.dumps({
        "id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "m", "choices": choices,
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}))


def _call(name: str, arguments: object) -> StubReply:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return _body([{"index": 0, "finish_reason": "tool_calls",
                   "message": {"role": "assistant", "content": None, "tool_calls": [call]}}])


def _backbone(stub: OpenAIStub, method: str = "json_schema", schema_retries: int = 1) -> Backbone:
    settings = BackboneSettings(base_url=stub.base_url, model="stub-model", api_key="EMPTY", timeout_s=5.0,
                                method=method, schema_retries=schema_retries, max_retries=1)
    bb = Backbone.from_settings(settings, model=default_chat_model(settings))
    bb.retry_wait = (0.0, 0.01)
    return bb


def test_tool_call_arguments_as_an_object_are_read_as_the_call() -> None:
    """langchain-openai could not build the AIMessage ("validation error for AIMessage"): re-asked (the server
    answers every call so), then an invalid_reply fault with the tokens lost (0/0)."""
    with OpenAIStub([_call("view_frames", {"frames": [3, 5]})] * 3) as stub:
        reply = asyncio.run(_backbone(stub).atool_round("inspect", list(MSGS), [VIEW], usage := Usage()))
    assert reply.tool_calls[0]["name"] == "view_frames" and reply.tool_calls[0]["args"] == {"frames": [3, 5]}
    assert len(stub.requests) == 1 and (usage.calls, usage.input_tokens, usage.output_tokens) == (1, 11, 7)


def test_function_calling_arguments_as_an_object_validate() -> None:
    with OpenAIStub([_call("Verdict", {"label": "ok", "score": 4})] * 3) as stub:
        out = _backbone(stub, "function_calling").structured("judge", Verdict, list(MSGS), usage := Usage())
    assert out == Verdict(label="ok", score=4) and len(stub.requests) == 1 and usage.output_tokens == 7


def test_arguments_that_are_a_json_string_but_not_an_object_are_still_reasked() -> None:
    """`"[1,2]"` is the model's mistake, not the server's format: re-asked as before, then invalid_reply."""
    with OpenAIStub([_call("view_frames", "[1,2]")] * 3) as stub, pytest.raises(BackboneFault) as info:
        asyncio.run(_backbone(stub).atool_round("inspect", list(MSGS), [VIEW], usage := Usage()))
    assert info.value.kind == "invalid_reply" and "[1, 2]" in info.value.message
    assert len(stub.requests) == 2 and usage.calls == 2


NO_CHOICE = {"empty": [], "no_message": [{"index": 0, "finish_reason": "stop"}],
             "null_message": [{"index": 0, "message": None, "finish_reason": "stop"}]}


@pytest.mark.parametrize("shape", NO_CHOICE)
@pytest.mark.parametrize("method", [*METHODS, "tools"])
def test_a_200_without_a_choice_or_message_is_a_clear_fault(method: str, shape: str) -> None:
    """It was "transport: unexpected IndexError/AttributeError"."""
    with OpenAIStub([_body(NO_CHOICE[shape])] * 4) as stub, pytest.raises(BackboneFault) as info:
        if method == "tools":
            asyncio.run(_backbone(stub).atool_round("inspect", list(MSGS), [VIEW], usage := Usage()))
        else:
            _backbone(stub, method).structured("judge", Verdict, list(MSGS), usage := Usage())
    fault = info.value
    assert fault.kind == "transport" and "unexpected" not in fault.message, fault.message
    want = "without a choice" if shape == "empty" else "without a message"
    assert f"the server answered 200 {want}" in fault.message, fault.message
    assert len(stub.requests) == 1 and usage.calls == 0  # not retried, not re-asked, no model reply


def _answer(index: int, score: int) -> dict:
    content = json.dumps({"label": "ok", "score": score})
    return {"index": index, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}


@pytest.mark.parametrize("usage", [{"total_tokens": 5}, {"prompt_tokens": None, "completion_tokens": None}])
@pytest.mark.parametrize("method", [*METHODS, "tools"])
def test_usage_without_token_counts_counts_the_call_and_no_tokens(method: str, usage: dict) -> None:
    with OpenAIStub([_body([_answer(0, 3)], usage)]) as stub:
        bb, counted = _backbone(stub, "json_schema" if method == "tools" else method), Usage()
        if method == "tools":
            assert asyncio.run(bb.atool_round("inspect", list(MSGS), [VIEW], counted)).text
        else:
            assert bb.structured("judge", Verdict, list(MSGS), counted).score == 3
    assert (counted.calls, counted.input_tokens, counted.output_tokens) == (1, 0, 0)


@pytest.mark.parametrize("method", METHODS)
def test_two_choices_take_the_first_and_count_the_tokens_once(method: str) -> None:
    with OpenAIStub([_body([_answer(0, 3), _answer(1, 4)])]) as stub:
        out = _backbone(stub, method).structured("judge", Verdict, list(MSGS), usage := Usage())
    assert out.score == 3 and (usage.calls, usage.input_tokens, usage.output_tokens) == (1, 11, 7)


def _parts(*parts: dict, finish_reason: str = "stop") -> StubReply:
    return _body([{"index": 0, "finish_reason": finish_reason,
                   "message": {"role": "assistant", "content": list(parts)}}])


def _text(obj: object) -> dict:
    return {"type": "text", "text": obj if isinstance(obj, str) else json.dumps(obj)}


@pytest.mark.parametrize("method", METHODS)
def test_content_as_a_list_of_text_parts_is_parsed_like_a_string(method: str) -> None:
    """json_schema: the openai SDK validated the list itself ("JSON input should be string"): re-asked, then an
    invalid_reply fault, on every reply of a server that sends content parts."""
    split = _parts(_text('{"label": "ok", '), _text('"score": 4}'))
    with OpenAIStub([split] * 3) as stub:
        out = _backbone(stub, method).structured("judge", Verdict, list(MSGS), usage := Usage())
    assert out == Verdict(label="ok", score=4) and len(stub.requests) == 1
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (1, 11, 7)


def test_content_parts_that_fail_the_schema_are_reasked_with_the_schemas_error() -> None:
    with OpenAIStub([_parts(_text({"label": "ok", "score": 99}))] * 3) as stub, pytest.raises(BackboneFault) as info:
        _backbone(stub).structured("judge", Verdict, list(MSGS), usage := Usage())
    assert info.value.kind == "invalid_reply" and "score" in info.value.message
    assert "should be string" not in info.value.message, info.value.message  # the list's type is no reason
    assert len(stub.requests) == 2 and usage.calls == 2


def test_a_refusal_part_is_a_refusal() -> None:
    with OpenAIStub([_parts({"type": "refusal", "refusal": "not this clip"})] * 3) as stub, \
            pytest.raises(BackboneFault) as info:
        _backbone(stub).structured("judge", Verdict, list(MSGS), Usage())
    assert info.value.kind == "refused" and "not this clip" in info.value.message and len(stub.requests) == 1


def test_the_sync_call_of_the_shaped_model_reads_content_parts_too() -> None:
    with OpenAIStub([_parts(_text({"label": "ok", "score": 5}))]) as stub:
        settings = BackboneSettings(base_url=stub.base_url, model="stub-model", api_key="EMPTY", timeout_s=5.0)
        structured = default_chat_model(settings).with_structured_output(Verdict, method="json_schema")
        assert structured.invoke(list(MSGS)) == Verdict(label="ok", score=5)
