"""A plain `langchain_openai.ChatOpenAI` the caller hands the backbone gets the completion-shape repairs of the one
the backbone builds from settings (`graph.completion_shape.shaped`): it got none of them, so a server sending
tool-call arguments as an object faulted every run that injected its own model, and a 200 without a choice was
"transport: unexpected IndexError"."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI

from graph.backbone import Backbone, BackboneFault, Usage
from graph.completion_shape import ShapedChatOpenAI, shaped
from graph.settings import BackboneSettings
from graph.testing import ScriptedChatModel
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import MSGS, Verdict
from tests.test_backbone_not_a_completion import VIEW


def _call_with_object_arguments() -> StubReply:
    call = {"id": "c1", "type": "function", "function": {"name": "view_frames", "arguments": {"frames": [3, 5]}}}
    return StubReply(body=json.dumps({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}))


def _plain(stub: OpenAIStub, **kw: object) -> ChatOpenAI:
    return ChatOpenAI(base_url=stub.base_url, model="stub-model", api_key="EMPTY", timeout=5.0, max_retries=0, **kw)


def _inspect(bb: Backbone) -> object:
    bb.retry_wait = (0.0, 0.01)
    return asyncio.run(bb.atool_round("inspect", list(MSGS), [VIEW], Usage()))


@pytest.mark.parametrize("how", ["constructor", "from_settings", "replaced"])
def test_an_injected_plain_chat_openai_reads_object_arguments(how: str) -> None:
    with OpenAIStub([_call_with_object_arguments()] * 3) as stub:
        plain = _plain(stub)
        if how == "constructor":
            bb = Backbone(plain, schema_retries=1, max_retries=0)
        elif how == "from_settings":
            settings = BackboneSettings(base_url=stub.base_url, model="stub-model", api_key="EMPTY",
                                        schema_retries=1, max_retries=0)
            bb = Backbone.from_settings(settings, model=plain)
        else:
            bb = Backbone(ScriptedChatModel({}), schema_retries=1, max_retries=0)
            bb.model = plain
        reply = _inspect(bb)
    assert reply.tool_calls[0]["args"] == {"frames": [3, 5]}  # was: re-asked, then an invalid_reply fault
    assert len(stub.requests) == 1
    assert type(plain) is ChatOpenAI  # the caller's model itself is left as it was


def test_an_injected_plain_chat_openai_names_a_200_without_a_choice() -> None:
    empty = StubReply(body=json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                                       "choices": []}))
    with OpenAIStub([empty] * 3) as stub, pytest.raises(BackboneFault) as info:
        _inspect(Backbone(_plain(stub), max_retries=0))
    assert info.value.kind == "transport" and "the server answered 200 without a choice" in info.value.message


def test_the_shaped_copy_keeps_the_callers_settings_and_clients() -> None:
    """Same fields, same openai clients (so a caller's own http client, headers and pool are what is used)."""
    client = httpx.AsyncClient()
    plain = ChatOpenAI(base_url="http://127.0.0.1:9/v1", model="m", api_key="k", max_retries=0, temperature=0.3,
                       max_tokens=77, default_headers={"X-Team": "robots"}, http_async_client=client)
    copy = shaped(plain)
    assert isinstance(copy, ShapedChatOpenAI) and copy is not plain
    assert copy.model_dump(exclude={"disable_streaming"}) == plain.model_dump(exclude={"disable_streaming"})
    assert copy.disable_streaming is True  # whole completions (a streaming callback does not switch it)
    assert copy.root_async_client is plain.root_async_client and copy.async_client is plain.async_client
    assert copy.root_client is plain.root_client and copy.http_async_client is client
    asyncio.run(client.aclose())


def test_other_models_are_used_as_given() -> None:
    scripted = ScriptedChatModel({})
    assert shaped(scripted) is scripted
    built = ShapedChatOpenAI(base_url="http://127.0.0.1:9/v1", model="m", api_key="k")
    assert shaped(built) is built


class _TextOnly(BaseChatModel):
    """A chat model that only answers text: no bind_tools, no with_structured_output of its own."""

    @property
    def _llm_type(self) -> str:
        return "text-only"

    def _generate(self, messages: list, stop: list[str] | None = None, run_manager: object = None,
                  **kwargs: object) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content='{"label": "ok", "score": 1}'))])


def test_a_chat_model_without_tool_calling_is_a_settings_fault_naming_the_plan_mode() -> None:
    """It was an "internal" fault reading "NotImplementedError: " (LangChain raises it without a message)."""
    with pytest.raises(BackboneFault) as info:
        asyncio.run(Backbone(_TextOnly()).atool_round("inspect", list(MSGS), [VIEW], Usage()))
    assert info.value.kind == "settings" and "_TextOnly" in info.value.message
    assert "RAA_INSPECT_MODE=plan" in info.value.message


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_a_chat_model_without_structured_output_is_a_settings_fault_naming_json_mode(method: str) -> None:
    bb = Backbone(_TextOnly(), method=method)
    with pytest.raises(BackboneFault) as info:
        bb.structured("judge", Verdict, list(MSGS), usage := Usage())
    assert info.value.kind == "settings" and "RAA_STRUCTURED_METHOD=json_mode" in info.value.message
    assert usage.calls == 0
    assert Backbone(_TextOnly(), method="json_mode").structured("judge", Verdict, list(MSGS), Usage()).score == 1


def _judge_graph(bb: Backbone) -> object:
    """A one-node graph whose node makes a structured backbone call, as the agent's nodes do."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class S(TypedDict, total=False):
        score: int

    async def judge(state: S) -> S:
        return {"score": (await bb.astructured("judge", Verdict, list(MSGS), Usage())).score}

    return StateGraph(S).add_node("judge", judge).add_edge(START, "judge").add_edge("judge", END).compile()


@pytest.mark.parametrize("how", ["settings", "injected"])
def test_a_graph_streamed_by_messages_still_reads_whole_completions(how: str) -> None:
    """LangGraph's stream_mode="messages" (langgraph dev / Studio, `astream`) attaches a streaming callback, which
    switched the backbone's ChatOpenAI to the streaming API: the completion-shape repairs, the reasoning length
    and (with a base URL of one's own, where langchain-openai asks no stream usage) the token counts were lost, so
    a run scored differently streamed than invoked. The backbone's calls read whole completions either way."""
    with OpenAIStub([StubReply(content=json.dumps({"label": "ok", "score": 4}))]) as stub:
        settings = BackboneSettings(base_url=stub.base_url, model="stub-model", api_key="EMPTY", max_retries=0)
        bb = Backbone.from_settings(settings, model=_plain(stub) if how == "injected" else None)

        async def streamed() -> list:
            return [chunk async for chunk in _judge_graph(bb).astream({}, stream_mode=["messages", "values"])]

        chunks = asyncio.run(streamed())
    assert chunks[-1] == ("values", {"score": 4})
    assert [r.get("stream") for r in stub.requests] == [False]


def test_a_chat_openai_set_to_stream_is_used_as_given() -> None:
    """streaming=True is the caller's (a server that only streams): kept, and so none of the repairs, which read a
    whole completion, apply to it."""
    plain = ChatOpenAI(base_url="http://127.0.0.1:9/v1", model="m", api_key="k", streaming=True)
    assert shaped(plain) is plain
    assert shaped(ChatOpenAI(base_url="http://127.0.0.1:9/v1", model="m", api_key="k")).disable_streaming is True
    told = ChatOpenAI(base_url="http://127.0.0.1:9/v1", model="m", api_key="k", disable_streaming="tool_calling")
    assert shaped(told).disable_streaming == "tool_calling"  # the caller's own setting is kept
