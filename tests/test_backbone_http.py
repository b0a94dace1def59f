"""The real ChatOpenAI path against a local OpenAI-compatible stub server, for each structured method."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from graph.backbone import Backbone, BackboneFault, Usage
from graph.cache import StageCache
from tests.openai_stub import OpenAIStub, StubReply, json_reply, tool_reply

METHODS = ["json_schema", "function_calling", "json_mode"]


class Verdict(BaseModel):
    """A tiny test schema."""

    label: str = Field(description="short label", max_length=20)
    score: int = Field(description="0..10", ge=0, le=10)


def good(method: str, label: str = "ok", score: int = 3) -> StubReply:
    if method == "function_calling":
        return tool_reply("Verdict", {"label": label, "score": score})
    return json_reply({"label": label, "score": score})


def bad_schema(method: str) -> StubReply:
    if method == "function_calling":
        return tool_reply("Verdict", {"label": "ok", "score": 99})
    return json_reply({"label": "ok", "score": 99})


def malformed(method: str) -> StubReply:
    if method == "function_calling":
        return StubReply(content="{'label': oops")  # neither a tool call nor JSON
    return StubReply(content='{"label": "ok", "score": ')


MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="Is it ok?")]


def make(stub: OpenAIStub, method: str, *, timeout_s: float = 5.0, max_retries: int = 2,
         schema_retries: int = 1, cache: StageCache | None = None) -> Backbone:
    chat = ChatOpenAI(base_url=stub.base_url, model="stub-model", api_key="EMPTY", timeout=timeout_s,
                      max_retries=0, temperature=0.0)
    return Backbone(chat, method=method, schema_retries=schema_retries, max_retries=max_retries,
                    timeout_s=timeout_s, cache=cache, model_name="stub-model", retry_wait=(0.0, 0.01))


def run(bb: Backbone, usage: Usage, messages=MSGS) -> BaseModel:
    """The sync call (on the process's bridge loop, like every sync entry point)."""
    return bb.structured("judge", Verdict, list(messages), usage)


@pytest.mark.parametrize("method", METHODS)
def test_success(method: str) -> None:
    with OpenAIStub([good(method, score=7)]) as stub:
        usage = Usage()
        out = run(make(stub, method), usage)
    assert out == Verdict(label="ok", score=7)
    assert usage.calls == 1 and usage.input_tokens == 11 and usage.output_tokens == 7
    body = stub.requests[0]
    if method == "json_schema":
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "Verdict"
    elif method == "function_calling":
        assert body["tool_choice"]["function"]["name"] == "Verdict"
    else:
        assert body["response_format"] == {"type": "json_object"}
        assert "Verdict" in body["messages"][-1]["content"]  # schema shown to the server


@pytest.mark.parametrize("method", METHODS)
def test_rate_limited_then_success(method: str) -> None:
    with OpenAIStub([StubReply(status=429), StubReply(status=503), good(method)]) as stub:
        usage = Usage()
        out = run(make(stub, method, max_retries=2), usage)
    assert out.score == 3
    assert len(stub.requests) == 3 and usage.calls == 1


@pytest.mark.parametrize("method", METHODS)
def test_server_error_until_exhaustion(method: str) -> None:
    with OpenAIStub([StubReply(status=500)] * 10) as stub:
        usage = Usage()
        with pytest.raises(BackboneFault) as info:
            run(make(stub, method, max_retries=2), usage)
    assert info.value.kind == "transport" and info.value.stage == "judge"
    assert "3 attempts" in info.value.message
    assert len(stub.requests) == 3 and usage.calls == 0


@pytest.mark.parametrize("method", METHODS)
def test_malformed_json_reasked_then_success(method: str) -> None:
    with OpenAIStub([malformed(method), good(method, score=4)]) as stub:
        usage = Usage()
        out = run(make(stub, method, schema_retries=1), usage)
    assert out.score == 4 and usage.calls == 2
    reask = stub.requests[1]["messages"][-1]
    assert reask["role"] == "user" and "rejected" in reask["content"]


@pytest.mark.parametrize("method", METHODS)
def test_malformed_json_until_fault(method: str) -> None:
    with OpenAIStub([malformed(method)] * 5) as stub:
        usage = Usage()
        with pytest.raises(BackboneFault) as info:
            run(make(stub, method, schema_retries=2), usage)
    assert info.value.kind == "invalid_reply"
    assert len(stub.requests) == 3 and usage.calls == 3


@pytest.mark.parametrize("method", METHODS)
def test_schema_violation_reasked_with_error(method: str) -> None:
    with OpenAIStub([bad_schema(method), good(method, score=10)]) as stub:
        out = run(make(stub, method, schema_retries=1), Usage())
    assert out.score == 10
    assert "less than or equal to 10" in stub.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize("method", METHODS)
def test_schema_violation_exhausted(method: str) -> None:
    with OpenAIStub([bad_schema(method)] * 3) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, method, schema_retries=1), Usage())
    assert info.value.kind == "invalid_reply" and "score" in info.value.message


@pytest.mark.parametrize("method", ["json_mode", "function_calling"])
def test_reasoning_left_in_the_content_is_skipped(method: str) -> None:
    """A reasoning model served without a reasoning parser: the answer follows its </think>."""
    text = 'Maybe {"label": "bad", "score": 1}? The arm did reach it.</think>\n{"label": "ok", "score": 8}'
    with OpenAIStub([StubReply(content=text)]) as stub:
        out = run(make(stub, method), Usage())
    assert out == Verdict(label="ok", score=8) and len(stub.requests) == 1


@pytest.mark.parametrize("method", METHODS)
def test_empty_content(method: str) -> None:
    with OpenAIStub([StubReply(content="")] * 3) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, method, schema_retries=1), Usage())
    assert info.value.kind == "empty_reply" and len(stub.requests) == 2


@pytest.mark.parametrize("method", METHODS)
def test_slow_reply_times_out(method: str) -> None:
    with OpenAIStub([StubReply(content="{}", delay_s=3.0)] * 3) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, method, timeout_s=0.6, max_retries=1), Usage())
    assert info.value.kind == "timeout" and len(stub.requests) == 2


def test_client_error_is_refused_without_retry() -> None:
    with OpenAIStub([StubReply(status=400, content="bad request"), good("json_schema")]) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    assert info.value.kind == "refused" and len(stub.requests) == 1


def test_a_bad_key_is_a_settings_fault_without_retry() -> None:
    """A 401 is the API key (RAA_API_KEY), an outage of the machinery: not "refused", the model's answer."""
    with OpenAIStub([StubReply(status=401, content="bad key"), good("json_schema")]) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    assert info.value.kind == "settings" and "RAA_API_KEY" in info.value.message and len(stub.requests) == 1


def test_connection_refused_is_transport() -> None:
    with OpenAIStub() as stub:
        url = stub.base_url
    chat = ChatOpenAI(base_url=url, model="m", api_key="EMPTY", timeout=1.0, max_retries=0)
    bb = Backbone(chat, max_retries=1, timeout_s=1.0, retry_wait=(0.0, 0.01))
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind in ("transport", "timeout")


def _frame_msgs(data_url: str) -> list:
    return [SystemMessage(content="# stage: judge"),
            HumanMessage(content=[{"type": "text", "text": "frame 0 of 1, t=0.00s"},
                                  {"type": "image_url", "image_url": {"url": data_url}}])]


def test_cache_identical_inputs_one_call_and_new_image_new_call() -> None:
    cache = StageCache(None)
    with OpenAIStub([good("json_schema", score=1), good("json_schema", score=2)]) as stub:
        bb = make(stub, "json_schema", cache=cache)
        usage = Usage()
        a = run(bb, usage, _frame_msgs("data:image/jpeg;base64,AAAA"))
        b = run(bb, usage, _frame_msgs("data:image/jpeg;base64,AAAA"))
        c = run(bb, usage, _frame_msgs("data:image/jpeg;base64,BBBB"))
    assert len(stub.requests) == 2
    assert a == b and a.score == 1 and c.score == 2
    assert usage.calls == 2 and usage.cache_hits == 1 and usage.images == 2


def test_cache_collapses_concurrent_identical_calls() -> None:
    cache = StageCache(None)
    with OpenAIStub([StubReply(content=json.dumps({"label": "x", "score": 5}), delay_s=0.2)]) as stub:
        bb = make(stub, "json_schema", cache=cache)

        async def many() -> list:
            usage = Usage()
            outs = await asyncio.gather(*(bb.astructured("judge", Verdict, list(MSGS), usage) for _ in range(4)))
            return [outs, usage]

        outs, usage = asyncio.run(many())
    assert len(stub.requests) == 1 and usage.cache_hits == 3
    assert all(o.score == 5 for o in outs)


def test_tool_round_returns_tool_calls_and_caches() -> None:
    tool = {"type": "function", "function": {"name": "view_frames", "description": "view frames",
                                             "parameters": {"type": "object",
                                                            "properties": {"frames": {"type": "array",
                                                                                      "items": {"type": "integer"}}},
                                                            "required": ["frames"]}}}
    with OpenAIStub([tool_reply("view_frames", {"frames": [1, 2]})]) as stub:
        bb = make(stub, "json_schema", cache=StageCache(None))
        usage = Usage()
        first = asyncio.run(bb.atool_round("inspect", list(MSGS), [tool], usage))
        again = asyncio.run(bb.atool_round("inspect", list(MSGS), [tool], usage))
    assert first.tool_calls[0]["name"] == "view_frames" and first.tool_calls[0]["args"] == {"frames": [1, 2]}
    assert again.tool_calls[0]["args"] == {"frames": [1, 2]}
    assert len(stub.requests) == 1 and usage.cache_hits == 1
    assert stub.requests[0]["tools"][0]["function"]["name"] == "view_frames"


def test_tool_round_empty_reply_faults() -> None:
    with OpenAIStub([StubReply(content="")] * 3) as stub, pytest.raises(BackboneFault) as info:
        asyncio.run(make(stub, "json_schema", schema_retries=1).atool_round("inspect", list(MSGS), [], Usage()))
    assert info.value.kind == "empty_reply" and len(stub.requests) == 2


VLLM_NO_AUTO_TOOLS = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'


def test_tool_round_rejected_by_server_says_how_to_fix_it() -> None:
    """vLLM without tool calling answers a request with `tools` with a 400: no retry, and the fault names
    both ways out (serve with tool calling, or RAA_INSPECT_MODE=plan) next to the server's own message. It is
    a "settings" fault, an outage (every clip fails the same way), as a chat model that cannot bind tools is."""
    view = {"type": "function", "function": {"name": "view_frames", "description": "view frames",
                                             "parameters": {"type": "object", "properties": {}}}}
    with OpenAIStub([StubReply(status=400, content=VLLM_NO_AUTO_TOOLS)] * 2) as stub:
        with pytest.raises(BackboneFault) as info:
            asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [view], Usage()))
        assert len(stub.requests) == 1
        assert info.value.kind == "settings" and info.value.stage == "inspect"
        assert "--enable-auto-tool-choice" in info.value.message and "RAA_INSPECT_MODE=plan" in info.value.message
        with pytest.raises(BackboneFault) as plain:  # a 400 on a structured call gets no tool hint
            run(make(stub, "json_schema"), Usage())
    assert "RAA_INSPECT_MODE" not in plain.value.message and plain.value.kind == "refused"


def test_tool_round_over_the_context_gets_the_context_hint_not_the_tool_calling_one() -> None:
    """The tool-calling hint was added to any 400 whose fault message named "tool", whatever its kind: a tool round
    over the model's context (a "settings" fault with the --max-model-len fix) whose server message counts the tool
    definitions was told to serve the model with tool calling, which it already was."""
    over = ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4200 in the "
            "messages and tool definitions, 800 in the completion).")
    with OpenAIStub([StubReply(status=400, content=over)]) as stub, pytest.raises(BackboneFault) as info:
        asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [], Usage()))
    assert info.value.kind == "settings" and "--max-model-len" in info.value.message, info.value.message
    assert "--enable-auto-tool-choice" not in info.value.message, info.value.message


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "view_frames", "arguments": {"frames": [3, 4]}}\n</tool_call>',  # Hermes / Qwen
    '[TOOL_CALLS] [{"name": "view_frames", "arguments": {"frames": [3]}}]',  # Mistral
    '{"name": "view_frames", "parameters": {"frames": [3]}}',  # Llama JSON
])
def test_tool_call_left_in_the_text_is_a_fault_and_never_cached(text: str) -> None:
    """A server without a matching tool-call parser returns the model's call as content: the inspection the
    model asked for would silently not happen, so the run must not go on as if the model had finished."""
    view = {"type": "function", "function": {"name": "view_frames", "description": "view frames",
                                             "parameters": {"type": "object", "properties": {}}}}
    cache = StageCache(None)
    with OpenAIStub([StubReply(content=text)] * 2) as stub, pytest.raises(BackboneFault) as info:
        asyncio.run(make(stub, "json_schema", cache=cache).atool_round("inspect", list(MSGS), [view], Usage()))
    # the server's setup, as a 400 naming tools is: an outage, not the model's answer about the clip
    assert info.value.kind == "settings" and "tool call as plain text" in info.value.message
    assert "--tool-call-parser" in info.value.message and "RAA_INSPECT_MODE=plan" in info.value.message
    assert len(stub.requests) == 1 and len(cache) == 0  # no re-ask (the server would do the same), nothing stored


def test_a_closing_text_that_names_a_tool_is_not_a_fault() -> None:
    prose = 'I used view_frames on frames 10 and 20; the "name" of the object is the red block. R2 is met.'
    with OpenAIStub([StubReply(content=prose)]) as stub:
        reply = asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [], Usage()))
    assert reply.text == prose and not reply.tool_calls


def test_a_call_spelled_out_in_the_reasoning_is_not_a_fault() -> None:
    """A reasoning model that planned a call in its reasoning and then decided it needed none."""
    text = ('I could call {"name": "view_frames", "arguments": {"frames": [3]}} but frame 3 is clear.</think>'
            "R2 is met; no further inspection needed.")
    with OpenAIStub([StubReply(content=text)]) as stub:
        reply = asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [], Usage()))
    assert reply.text == text and not reply.tool_calls
    left = '<think>Frame 3 needs a closer look.</think><tool_call>\n{"name": "view_frames", "arguments": {}}\n</tool_call>'
    with OpenAIStub([StubReply(content=left)]) as stub, pytest.raises(BackboneFault, match="plain text"):
        asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [], Usage()))


def test_a_key_http_cannot_carry_is_not_counted_as_replies() -> None:
    """A smart quote pasted into the API key makes httpx fail to build the request (UnicodeEncodeError, a
    ValueError): no request leaves, so it is not a reply that failed validation, is not re-asked and counts no
    call; the fault says the request could not be sent."""
    with OpenAIStub([good("json_schema")] * 3) as stub:
        chat = ChatOpenAI(base_url=stub.base_url, model="m", api_key="k\u2019ey", timeout=5.0, max_retries=0)
        usage = Usage()
        with pytest.raises(BackboneFault) as info:
            run(Backbone(chat, schema_retries=2, max_retries=1, retry_wait=(0.0, 0.01)), usage)
    assert not stub.requests and usage.calls == 0
    assert info.value.kind == "transport" and "could not be sent" in info.value.message


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bad", [bad_schema, malformed])
def test_a_rejected_reply_counts_its_tokens(method: str, bad) -> None:
    """With json_schema the openai SDK validates inside the call and raises, so a rejected reply was counted
    as a call without its tokens (ChatOpenAI attaches the HTTP reply to the error: its usage is read there)."""
    rejected = bad(method)
    rejected.prompt_tokens, rejected.completion_tokens = 5, 3
    with OpenAIStub([rejected, good(method)]) as stub:
        usage = Usage()
        run(make(stub, method), usage)
    assert usage.calls == 2 and (usage.input_tokens, usage.output_tokens) == (5 + 11, 3 + 7)


@pytest.mark.parametrize("method", METHODS)
def test_a_request_the_client_cannot_build_is_not_counted_as_replies(method: str) -> None:
    """langchain-openai refuses a content block it cannot translate (a base64 image without its mime type)
    with a ValueError while it builds the request: nothing is sent, yet it was taken for a reply that failed
    validation, re-asked, and each try counted as a model call with its images. It is a fault at once that
    says the request could not be built, with no call counted (as a key httpx cannot carry)."""
    image = {"type": "image", "source_type": "base64", "data": "AAAA"}
    messages = [MSGS[0], HumanMessage(content=[{"type": "text", "text": "Is it ok?"}, image])]
    with OpenAIStub([good(method)] * 3) as stub:
        usage = Usage()
        with pytest.raises(BackboneFault) as info:
            run(make(stub, method, schema_retries=2), usage, messages)
    assert not stub.requests and usage.as_dict() == Usage().as_dict()
    assert info.value.kind == "transport" and "could not be built" in info.value.message
    assert "mime_type" in info.value.message and "replies failed" not in info.value.message
    with OpenAIStub([StubReply(content="ok")] * 3) as stub:
        usage = Usage()
        with pytest.raises(BackboneFault, match="could not be built"):
            asyncio.run(make(stub, method, schema_retries=2).atool_round("judge", messages, [], usage))
    assert not stub.requests and usage.calls == 0


def test_the_places_a_request_is_built_still_exist() -> None:
    """graph.transport.request_not_built recognises them by name: pinned against the installed versions."""
    import langchain_core.language_models.chat_models as chat_models

    from graph.transport import _BUILDERS

    assert [callable(getattr(where, fn, None)) for where, fn in
            zip((chat_models, ChatOpenAI), (name for _, name in _BUILDERS), strict=True)] == [True, True]
