"""The stage keys and the recorded limit of an OpenAI-family model are read from the parameters it sends with every
request (`graph.model_request.sent_params`), which langchain-openai keeps in a private property
(`BaseChatOpenAI._default_params`; it has no public way to them). These fail, naming what to do, when a
langchain-openai drops it or stops building its requests from it."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import AzureChatOpenAI, ChatOpenAI
from langchain_openai.chat_models.base import BaseChatOpenAI

from graph.model_request import sent_params

WHAT_TO_DO = ("graph.model_request.sent_params reads the parameters an OpenAI-family model sends with every request "
              "from it, for the stage-cache keys and the completion limit a run records; find what langchain-openai "
              "{v} builds a request from instead, read it there, and keep tests/test_stage_key_pins.py passing "
              "(the keys of caches already written)")


def test_langchain_openai_still_has_the_private_default_params() -> None:
    v = version("langchain-openai")
    try:
        params = sent_params(ChatOpenAI(model="m", api_key="k"))
    except AttributeError as e:
        pytest.fail(f"langchain-openai {v} has no BaseChatOpenAI._default_params ({e}): " + WHAT_TO_DO.format(v=v))
    assert isinstance(params, dict) and params.get("model") == "m", (
        f"langchain-openai {v}'s BaseChatOpenAI._default_params gave {params!r}: " + WHAT_TO_DO.format(v=v))


@pytest.mark.parametrize("model", [
    ChatOpenAI(model="m", api_key="k", temperature=0.3, max_tokens=64, seed=1, extra_body={"top_k": 5}, stop=["x"]),
    BaseChatOpenAI(model="deepseek-chat", api_key="k", max_tokens=64, reasoning_effort="low"),
    AzureChatOpenAI(azure_deployment="d", azure_endpoint="https://r.openai.azure.com", api_version="2024-10-21",
                    api_key="k", temperature=0.1),
    ChatOpenAI(model="m", api_key="k", model_kwargs={"top_k": 3}, streaming=True, stream_usage=True, stop="x"),
    ChatOpenAI(model="m", api_key="k", n=2, logprobs=True, top_logprobs=2),
    BaseChatOpenAI(model="deepseek-chat", api_key="k", model_kwargs={"max_completion_tokens": 9}),
    AzureChatOpenAI(azure_deployment="d", azure_endpoint="https://r.openai.azure.com", api_version="2024-10-21",
                    api_key="k", streaming=True, model_kwargs={"top_k": 1}),
], ids=["ChatOpenAI", "BaseChatOpenAI", "AzureChatOpenAI", "ChatOpenAI-model_kwargs-streaming-stop", "ChatOpenAI-n",
        "BaseChatOpenAI-max_completion_tokens", "AzureChatOpenAI-streaming-model_kwargs"])
def test_the_parameters_read_are_those_each_request_sends(model: BaseChatOpenAI) -> None:
    """What a request's payload holds besides its messages (`_get_request_payload`, langchain-openai's own)."""
    v = version("langchain-openai")
    payload = model._get_request_payload([HumanMessage(content="hi")])
    payload.pop("messages")
    assert sent_params(model) == payload, (
        f"langchain-openai {v} sends other parameters than BaseChatOpenAI._default_params: " + WHAT_TO_DO.format(v=v))
