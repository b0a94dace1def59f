"""Pins the stage-cache keys, the sampling temperature (`Backbone.temperature`) and the recorded backbone settings
(`graph.context.backbone_settings`) of a representative set of model configurations: ChatOpenAI with and without a
temperature, a gpt-5 model (langchain-openai sends no temperature for it), a limit given as `max_tokens` and as
`max_completion_tokens`, an injected BaseChatOpenAI (ChatDeepSeek's base) and Azure model, the agent built from
settings, and a non-OpenAI scripted model, at draw 0 and another draw. The digests are those of caches already written
(taken before the key code was refactored): a cleanup of how the keys are computed must find them again, byte for
byte."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import AzureChatOpenAI, ChatOpenAI
from langchain_openai.chat_models.base import BaseChatOpenAI
from pydantic import BaseModel

from graph.backbone import Backbone
from graph.context import backbone_settings
from graph.frame_store import FrameStore
from graph.settings import BackboneSettings
from graph.testing import ScriptedChatModel

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]
URL = "http://h:8000/v1"


class Verdict(BaseModel):
    ok: bool


def _chat(model: str = "qwen-a", **kw: Any) -> ChatOpenAI:
    return ChatOpenAI(model=model, api_key="k", max_retries=0, **kw)


def _base(**kw: Any) -> BaseChatOpenAI:
    return BaseChatOpenAI(model="deepseek-chat", api_key="k", base_url="http://ds/v1", **kw)


def _settings(model: str = "qwen-a", **kw: Any) -> BackboneSettings:
    return BackboneSettings(base_url=URL, model=model, api_key="k", **kw)


CASES: dict[str, Callable[[], Backbone]] = {
    "chat_no_temperature_default_address": lambda: Backbone(_chat()),
    "chat_temperature": lambda: Backbone(_chat(temperature=0.3, base_url=URL)),
    "chat_temperature_zero": lambda: Backbone(_chat(temperature=0.0, base_url=URL)),
    "chat_given_temperature_ignored": lambda: Backbone(_chat(temperature=0.3, base_url=URL), temperature=0.9),
    "chat_max_tokens": lambda: Backbone(_chat(temperature=0.0, base_url=URL, max_tokens=256)),
    "chat_max_completion_tokens": lambda: Backbone(_chat(base_url=URL, max_completion_tokens=512)),
    "chat_params_draw": lambda: Backbone(_chat(base_url=URL, seed=1, top_p=0.5, extra_body={"top_k": 20},
                                               stop=["</a>"], reasoning_effort="low"), draw=3),
    "gpt5_chat_temperature_dropped": lambda: Backbone(_chat("gpt-5-mini", temperature=0.7, base_url=URL)),
    "gpt5_settings": lambda: Backbone.from_settings(_settings("gpt-5-mini", temperature=0.7)),
    "gpt5_settings_zero": lambda: Backbone.from_settings(_settings("gpt-5-mini")),
    "settings_default": lambda: Backbone.from_settings(_settings()),
    "settings_temperature_limit_draw": lambda: Backbone.from_settings(
        _settings(temperature=0.4, max_tokens=1024)).for_draw(2),
    "settings_injected_chat": lambda: Backbone.from_settings(_settings(temperature=0.4),
                                                             model=_chat("qwen-b", temperature=0.2)),
    "base_chat_openai": lambda: Backbone(_base()),
    "base_chat_openai_max_tokens": lambda: Backbone(_base(max_tokens=100, temperature=0.5)),
    "azure": lambda: Backbone(AzureChatOpenAI(azure_deployment="dep-a", azure_endpoint="https://r.openai.azure.com",
                                              api_version="2024-10-21", api_key="k", temperature=0.1)),
    "scripted": lambda: Backbone(ScriptedChatModel({})),
    "scripted_temperature_draw_endpoint": lambda: Backbone(ScriptedChatModel({}), model_name="m", temperature=0.5,
                                                           draw=2, endpoint=URL),
    "chat_model_kwargs_streaming_stop": lambda: Backbone(_chat(base_url=URL, model_kwargs={"top_k": 3}, streaming=True,
                                                               stop="x", frequency_penalty=0.1, temperature=0.2)),
    "chat_n": lambda: Backbone(_chat(base_url=URL, n=2)),
    # a temperature given as None (not one Backbone's signature allows, but its setter takes it): keyed as 0 always was
    "scripted_temperature_none": lambda: Backbone(ScriptedChatModel({}), temperature=None),  # type: ignore[arg-type]
    "scripted_settings": lambda: Backbone.from_settings(_settings(temperature=0.6, max_tokens=64),
                                                        model=ScriptedChatModel({})),
}

def _settings_of(temperature: float | None, model: str, served: str | None,
                 max_tokens: int | None) -> tuple[float | None, dict[str, Any]]:
    """(`Backbone.temperature`, `backbone_settings`) of a case at the default method and frame settings."""
    return temperature, {"model": model, "served_model": served, "method": "json_schema", "temperature": temperature,
                         "max_tokens": max_tokens, "image_long_side": 512, "jpeg_quality": 85}


PINS: dict[str, tuple[str, str, Any, dict[str, Any]]] = {
    "chat_no_temperature_default_address": (
        "f88d307f78798dee87d793eb779be139087ef97dc3a50903e8669d6c9520d17a",
        "103db017deb4d4632962957364406cf2724667202ec6d3e30538acd318d46291",
        *_settings_of(None, "ChatOpenAI", "qwen-a", None)),
    "chat_temperature": (
        "dfac0dace9e08aa71e693d3c0288dc75e8b48de6fcab5efe0a92c27edf81fb52",
        "e70f536aee13f64ecb12b7e4214372d239a3cffed0f5433c6a0b3cfbb655698c",
        *_settings_of(0.3, "ChatOpenAI", "qwen-a", None)),
    "chat_temperature_zero": (
        "e8b610998f474a1ba7b64c2e836b8806a5ce5ff989545a10ce2db5f1cd33e983",
        "2bc3f7624093bf712984fd3623b73a36ffc2da828b2c5723aae2f0bbacd5c392",
        *_settings_of(0.0, "ChatOpenAI", "qwen-a", None)),
    "chat_given_temperature_ignored": (
        "dfac0dace9e08aa71e693d3c0288dc75e8b48de6fcab5efe0a92c27edf81fb52",
        "e70f536aee13f64ecb12b7e4214372d239a3cffed0f5433c6a0b3cfbb655698c",
        *_settings_of(0.3, "ChatOpenAI", "qwen-a", None)),
    "chat_max_tokens": (
        "3d5e6cb37489b7b26cd1b9d6db7812590dbc6d8bf71d43ef170251283645954b",
        "7518ed6bd6fb53308840b6907a77fb1a6ad6c8df8cdb116d017a71e6092b8fc2",
        *_settings_of(0.0, "ChatOpenAI", "qwen-a", 256)),
    "chat_max_completion_tokens": (
        "9053659b27029bf42560c14587d2f254703723f2be459c142de986b7cdd4e562",
        "91b914361ae0470213b118cbc90a2af13c3aa5d145555fb88fc44a6591d42710",
        *_settings_of(None, "ChatOpenAI", "qwen-a", 512)),
    "chat_params_draw": (
        "882285d8f00e105feec5a4c5ab818e9417270521b8cb2693f7ef079d50b7f058",
        "ca712d064ef2d6bde493ab9c35c2d3dc30d96eabaa838c6a6750649eeb0b04b5",
        *_settings_of(None, "ChatOpenAI", "qwen-a", None)),
    "gpt5_chat_temperature_dropped": (
        "6e381c5757694c214651e46ec3ed647f9d9904066dcd4876a794d1c2e17773c8",
        "87eb3bd206015e56ef80a06f6bc6e311068cd57996d8cb9aecaa8aa903d141f2",
        *_settings_of(None, "ChatOpenAI", "gpt-5-mini", None)),
    "gpt5_settings": (
        "a1771ea274e437128c434526c13b525fcf3aa0f207ec1fe1be06f80d8a840720",
        "5bd67a31c9084b256c3e842b9f793d0eac6481790e3b8554282b479cc2d25e12",
        *_settings_of(0.7, "gpt-5-mini", "gpt-5-mini", None)),
    "gpt5_settings_zero": (
        "690ff6a9178c228056a4ee5fa342327ee8393f82d6105276b48a2fecdf751c9b",
        "68a5aa7aabe5903f54031f3103d3a53463659ea16fa9185e3db18839e1007192",
        *_settings_of(0.0, "gpt-5-mini", "gpt-5-mini", None)),
    "settings_default": (
        "e8b610998f474a1ba7b64c2e836b8806a5ce5ff989545a10ce2db5f1cd33e983",
        "2bc3f7624093bf712984fd3623b73a36ffc2da828b2c5723aae2f0bbacd5c392",
        *_settings_of(0.0, "qwen-a", "qwen-a", None)),
    "settings_temperature_limit_draw": (
        "e32b9c28ccd879b20d8c473e9c42aa882e41fef990b633c3e645e2627c5d2162",
        "c3a98065ba69f8209d18d862f324a8ba3e39d40a318b92fc785f9746e9260265",
        *_settings_of(0.4, "qwen-a", "qwen-a", 1024)),
    "settings_injected_chat": (
        "6d22d2f474224816ae7471016f37d4fe64a2929d5c37d34e2724095a7d208611",
        "d7d59e0e17addeccfe0f5a14430a1e576ca405f7ec2a2390c83256367cc05fab",
        *_settings_of(0.2, "qwen-a", "qwen-b", None)),
    "base_chat_openai": (
        "4dc7ddcc656f42e9753556e37d4ad72987f9dffe5920a9c5d75609b2a3d68539",
        "c73923e3a950491a99b2ae1c6a4dcae4b8e97241b6f42eac871a12ad17cc16e9",
        *_settings_of(None, "BaseChatOpenAI", "deepseek-chat", None)),
    "base_chat_openai_max_tokens": (
        "5f59ebea55cd5b617bf1a4dbf70fe346427b2a241ac60aabcdc6b69be6ffd177",
        "4b3e98198d3184e96e8ee05c43e0821868540d60279b9ecbcca2633899f38e6b",
        *_settings_of(0.5, "BaseChatOpenAI", "deepseek-chat", 100)),
    "azure": (
        "45652c4fc21255e910068bb02861ef1f7fbe92c861adc7777659843aa817cef2",
        "95e48d52584645756a8f39dbd2badc1a7deeece3db10410666085be3d052d2d5",
        *_settings_of(0.1, "AzureChatOpenAI", "dep-a", None)),
    "scripted": (
        "5f056165edd25981ef247a5412ec4eb69a866551c5bb3bd83a6b2ce7bf107ba7",
        "a3d906c4c4b528f2abff66c220c0e99894807fde3b05469040eef8f941acbc05",
        *_settings_of(0.0, "ScriptedChatModel", None, None)),
    "scripted_temperature_draw_endpoint": (
        "2c42f59d5a3bdb25b864441e59622dc72d129cc229f3939581570a012776e9ba",
        "ae98c1d604bd1c3908db479ebd6a2e875d3c7ecd54155e683bbcabb2be357b65",
        *_settings_of(0.5, "m", None, None)),
    "chat_model_kwargs_streaming_stop": (
        "7278ba5ab223ffcd2c7f74989001f17e1df87d1b7c5640f2e6d99fa27af3d8df",
        "f404624b32a87f06168b41a6d9854b17cd577afb1fa817d7cf71eee5006d274e",
        *_settings_of(0.2, "ChatOpenAI", "qwen-a", None)),
    "chat_n": (
        "5c9978012c8098c1f1c52aea751ff327039cfcc5791ec37603e23fd7acf1432e",
        "d813fdcebeb006d5e0cec458cb84123751467c73730f8fed7a01fb867ad34779",
        *_settings_of(None, "ChatOpenAI", "qwen-a", None)),
    "scripted_temperature_none": (
        "5f056165edd25981ef247a5412ec4eb69a866551c5bb3bd83a6b2ce7bf107ba7",
        "a3d906c4c4b528f2abff66c220c0e99894807fde3b05469040eef8f941acbc05",
        *_settings_of(None, "ScriptedChatModel", None, None)),
    "scripted_settings": (
        "d22cc3f42537b65d577960702ad83ef3b32cd2d80ce70ffd9945c64ac8b9ea3e",
        "7d4995078b9448a7c90c0b7dd12401d73feb6738e9ffcfc3e7116378d0a6f1d9",
        *_settings_of(0.6, "qwen-a", None, None)),
}
"""Case: (the schema call's key, a tool call's key, `Backbone.temperature`, `backbone_settings`)."""


def _observed(backbone: Backbone) -> tuple[str, str, Any, dict[str, Any]]:
    schema_key = backbone.key_of("judge", list(MSGS), method="json_schema", schema=Verdict)
    tool_key = backbone.key_of("inspect", list(MSGS), method="tools", params={"round": 1},
                               tools=[{"type": "function", "function": {"name": "view", "parameters": {}}}])
    return schema_key, tool_key, backbone.temperature, backbone_settings(backbone, FrameStore())


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """ChatOpenAI's default address is read from the environment: none here."""
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_every_case_is_pinned() -> None:
    assert set(PINS) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_keys_temperature_and_settings_are_those_pinned(name: str) -> None:
    observed = _observed(CASES[name]())
    assert observed == PINS[name]
    assert type(observed[2]) is type(PINS[name][2])  # a float stays a float (not an int, nor a NumPy scalar)
