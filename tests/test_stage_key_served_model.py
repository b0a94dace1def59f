"""The stage key names who answers an OpenAI-family chat model's calls and the request parameters that shape its answers
(graph/cache.py): two injected `ChatOpenAI`s of different served models shared one key (both "ChatOpenAI"), so the
second was handed the first one's outputs from a shared cache file: a reward from the wrong model. The completion
limit and the sampling parameters set on the model (`max_tokens`, its own temperature, top_p, seed, extra_body...)
were in no key either. The keys of the agent built from settings and of other chat models are those they had."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import AzureChatOpenAI, ChatOpenAI
from langchain_openai.chat_models.base import BaseChatOpenAI

from graph.backbone import Backbone, Usage, default_chat_model
from graph.cache import StageCache
from graph.cache_keys import stage_key
from graph.context import backbone_settings
from graph.frame_store import FrameStore
from graph.settings import BackboneSettings
from graph.testing import ScriptedChatModel
from tests.openai_stub import OpenAIStub, json_reply
from tests.test_backbone_http import Verdict

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]
SCORES = {"qwen-a": 1, "qwen-b": 5}


def _by_model(body: dict) -> object:
    """Each served model answers with its own score."""
    return json_reply({"label": body["model"], "score": SCORES[body["model"]]})


def _chat(served: str, base_url: str = "http://127.0.0.1:9/v1", timeout: float = 5.0, **kw: object) -> ChatOpenAI:
    return ChatOpenAI(model=served, api_key="EMPTY", base_url=base_url, timeout=timeout, max_retries=0, **kw)


def _scores(*backbones: Backbone) -> list[int]:
    """Each backbone's score, asked in turn on one event loop (a ChatOpenAI pools its connections per loop)."""
    async def ask() -> list[int]:
        return [(await bb.astructured("judge", Verdict, list(MSGS), Usage())).score for bb in backbones]

    return asyncio.run(ask())


def _key(bb: Backbone) -> str:
    return bb.key_of("judge", list(MSGS), method="json_schema", schema=Verdict)


@pytest.mark.parametrize("how", ["constructor", "from_settings"])
def test_two_injected_openai_models_do_not_share_a_cache_file(tmp_path, how: str) -> None:
    cache = StageCache(tmp_path / "cache.sqlite")
    with OpenAIStub(responder=_by_model) as stub:
        if how == "constructor":  # build_reward_agent(backbone=Backbone(ChatOpenAI(...), cache=...))
            first, second = (Backbone(_chat(m, stub.base_url), cache=cache, max_retries=0) for m in SCORES)
        else:  # the settings name qwen-a; the model injected with them asks for another
            settings = BackboneSettings(base_url=stub.base_url, model="qwen-a", api_key="EMPTY", max_retries=0)
            first, second = (Backbone.from_settings(settings, model=_chat(m, stub.base_url), cache=cache)
                             for m in SCORES)
        assert _scores(first, second) == [1, 5]  # qwen-b was handed qwen-a's answer (1)
        assert [r["model"] for r in stub.requests] == ["qwen-a", "qwen-b"]
        assert _scores(first, second) == [1, 5] and len(stub.requests) == 2  # each its own entry, kept


@pytest.mark.parametrize("one, other", [
    (dict(max_completion_tokens=64), dict(max_completion_tokens=4096)),
    (dict(max_completion_tokens=64), {}),
    (dict(temperature=0.7), dict(temperature=0.0)),
    ({}, dict(temperature=0.0)),  # no temperature sent: the server's default, not 0
    (dict(top_p=0.5), {}),
    (dict(seed=1), dict(seed=2)),
    (dict(extra_body={"top_k": 20}), {}),
    (dict(reasoning_effort="low"), dict(reasoning_effort="high")),
    (dict(stop=["</answer>"]), {}),
    (dict(base_url="http://gpu-a:8000/v1"), dict(base_url="http://gpu-b:8000/v1")),
])
def test_the_parameters_that_shape_the_answer_are_keyed(one: dict, other: dict) -> None:
    assert _key(Backbone(_chat("qwen-a", **{"base_url": "http://h/v1", **one}))) != \
        _key(Backbone(_chat("qwen-a", **{"base_url": "http://h/v1", **other})))


def test_transport_settings_are_not_keyed() -> None:
    """Timeouts and retries decide whether an answer comes, not what it says."""
    assert _key(Backbone(_chat("qwen-a", timeout=5.0))) == _key(Backbone(_chat("qwen-a", timeout=60.0)))
    assert _key(Backbone(_chat("qwen-a"), timeout_s=5.0, max_retries=0)) == _key(Backbone(_chat("qwen-a")))


@pytest.mark.parametrize("temperature, max_tokens", [(0.0, None), (0.4, None), (0.0, 512)])
def test_an_injected_model_of_the_settings_shares_the_settings_agents_entries(temperature, max_tokens) -> None:
    settings = BackboneSettings(base_url="http://h:8000/v1", model="qwen-a", api_key="EMPTY",
                                temperature=temperature, max_tokens=max_tokens)
    injected = _chat("qwen-a", "http://h:8000/v1", temperature=temperature, max_completion_tokens=max_tokens)
    assert _key(Backbone(injected)) == _key(Backbone.from_settings(settings))
    assert _key(Backbone.from_settings(settings, model=injected)) == _key(Backbone.from_settings(settings))


def test_the_settings_agents_and_other_models_keys_are_those_they_had() -> None:
    for temperature in (0.0, 0.4):
        settings = BackboneSettings(base_url="http://h:80/v1/", model="qwen-a", api_key="k", temperature=temperature)
        assert _key(Backbone.from_settings(settings)) == stage_key(
            model_name="qwen-a", endpoint="http://h:80/v1/", method="json_schema", stage="judge", messages=MSGS,
            params={"temperature": temperature} if temperature else None, schema=Verdict)
        assert _key(Backbone.from_settings(settings).for_draw(2)) == stage_key(
            model_name="qwen-a", endpoint="http://h:80/v1/", method="json_schema", stage="judge", messages=MSGS,
            params={"draw": 2, **({"temperature": temperature} if temperature else {})}, schema=Verdict)
    scripted = Backbone(ScriptedChatModel({}))
    assert _key(scripted) == stage_key(model_name="ScriptedChatModel", method="json_schema", stage="judge",
                                       messages=MSGS, schema=Verdict)
    settings = BackboneSettings(base_url="http://h/v1", model="m", api_key="k", max_tokens=512)
    assert _key(Backbone.from_settings(settings, model=ScriptedChatModel({}))) == stage_key(
        model_name="m", endpoint="http://h/v1", method="json_schema", stage="judge", messages=MSGS, schema=Verdict)


def test_other_openai_family_models_are_keyed_by_what_they_ask_for() -> None:
    """AzureChatOpenAI (its deployment answers) and a BaseChatOpenAI (as ChatDeepSeek is) are read as ChatOpenAI is."""
    def azure(deployment: str) -> AzureChatOpenAI:
        return AzureChatOpenAI(azure_deployment=deployment, azure_endpoint="https://r.openai.azure.com",
                               api_version="2024-10-21", api_key="k")

    assert _key(Backbone(azure("dep-a"))) != _key(Backbone(azure("dep-b")))

    def base(served: str) -> BaseChatOpenAI:
        return BaseChatOpenAI(model=served, api_key="k", base_url="http://h/v1")

    assert _key(Backbone(base("deepseek-chat"))) != _key(Backbone(base("deepseek-reasoner")))


@pytest.mark.parametrize("temperature", [0.0, 0.7])
@pytest.mark.parametrize("how", ["from_settings", "builder"])
def test_a_settings_agent_whose_temperature_langchain_drops_keeps_its_keys_and_record(temperature: float,
                                                                                      how: str) -> None:
    """langchain-openai sends no temperature for a gpt-5 model (it takes only its default): the model built from
    settings naming one has none set, whatever RAA_TEMPERATURE says. Its stage keys and the temperature its runs
    record were the settings' (no `temperature` in the key at 0, 0.0 recorded): read from the model instead, its
    cache file missed on every stage input and a checkpoint it wrote was refused on resume ("temperature 0.0
    (agent None)"), with the same settings."""
    url = "https://api.openai.com/v1"
    settings = BackboneSettings(base_url=url, model="gpt-5-mini", api_key="k", temperature=temperature)
    # build_reward_agent and a batch worker build the chat model first (`default_chat_model`), then the backbone
    agent = Backbone.from_settings(settings, model=default_chat_model(settings) if how == "builder" else None)
    assert agent.model.temperature is None  # what langchain-openai makes of it (the premise)
    assert _key(agent) == stage_key(model_name="gpt-5-mini", endpoint=url, method="json_schema", stage="judge",
                                    messages=MSGS, params={"temperature": temperature} if temperature else None,
                                    schema=Verdict)
    assert backbone_settings(agent, FrameStore())["temperature"] == temperature
    # a model injected with these settings is keyed by what it sends (none: the server's default)
    injected = ChatOpenAI(model="gpt-5-mini", api_key="k", base_url=url, temperature=temperature)
    assert backbone_settings(Backbone.from_settings(settings, model=injected), FrameStore())["temperature"] is None


def test_a_limit_given_to_a_base_chat_openai_as_max_completion_tokens_is_keyed_and_recorded() -> None:
    """BaseChatOpenAI (ChatDeepSeek's base) has no `max_completion_tokens` field (ChatOpenAI and Azure alias it to
    `max_tokens`): given so, langchain-openai moves it to `model_kwargs` and sends it as written. It was dropped as a
    limit kept apart while the limit was read from the `max_tokens` field (None): models capped at 64 and at 4096
    shared their entries (the 4096 run's long answer served to the 64 one) and recorded no limit for the guard."""
    def base(limit: int | None) -> BaseChatOpenAI:
        if limit is None:
            return BaseChatOpenAI(model="deepseek-chat", api_key="k", base_url="http://h/v1")
        with pytest.warns(UserWarning):  # langchain-openai's "transferred to model_kwargs"
            return BaseChatOpenAI(model="deepseek-chat", api_key="k", base_url="http://h/v1",
                                  max_completion_tokens=limit)

    assert _key(Backbone(base(64))) != _key(Backbone(base(4096)))
    assert _key(Backbone(base(64))) != _key(Backbone(base(None)))
    assert backbone_settings(Backbone(base(64)), FrameStore())["max_tokens"] == 64
