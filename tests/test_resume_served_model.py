"""An injected chat model (`build_reward_agent(model=...)`) is named by its class in the backbone settings and the
stage-cache keys ("ChatOpenAI"): two OpenAI models injected passed the resume guard as one judge, a run started with
one answered on by the other. A run records the model an OpenAI-family model asks its endpoint for (`served_model`),
which keys its stage outputs too, and a checkpoint recorded before it still resumes."""

from __future__ import annotations

import pytest
from graph_scripts import FakeSurprise
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.cache_keys import stage_key
from graph.config import run_settings
from graph.context import backbone_settings
from graph.frame_store import FrameStore
from graph.settings import BackboneSettings
from graph.testing import ScriptedChatModel
from graph.thread_guard import resume_refusal
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"
CONFIG = {"configurable": {"thread_id": "served"}}
URL = "http://127.0.0.1:9/v1"  # nothing answers: a resume past the guard ends at once (no retries), ineligible


def _chat(name: str) -> ChatOpenAI:
    return ChatOpenAI(model=name, api_key="EMPTY", base_url=URL, max_retries=0)


def _agent(saver, name: str):
    return build_reward_agent(AgentConfig(preset="full"), model=_chat(name), checkpointer=saver,
                              settings=BackboneSettings(max_retries=0, timeout_s=5, cache_path=None),
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


def test_the_served_model_is_recorded_and_keys_the_stage_outputs():
    backbone = Backbone(_chat("gpt-a"))
    recorded = backbone_settings(backbone, FrameStore())
    assert recorded["model"] == "ChatOpenAI" and recorded["served_model"] == "gpt-a"
    messages = [HumanMessage(content="hello")]
    # keyed by what it asks for (tests/test_stage_key_served_model.py): the model and address it names, and no
    # temperature sent (the server's default)
    assert backbone.key_of("assess", messages, method="json_schema") == \
        stage_key(model_name="gpt-a", endpoint=URL, method="json_schema", stage="assess", messages=messages,
                  params={"temperature": None})
    assert backbone.key_of("assess", messages, method="json_schema") != \
        Backbone(_chat("gpt-b")).key_of("assess", messages, method="json_schema")
    assert backbone_settings(Backbone(ScriptedChatModel({})), FrameStore())["served_model"] is None


def test_a_run_of_one_injected_openai_model_resumed_with_another_is_refused(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.thread_guard import ResumeMismatchError

    saver = InMemorySaver(serde=traces_serde())
    _agent(saver, "gpt-a").invoke({"video": str(clip), "instruction": INSTRUCTION}, CONFIG,
                                  interrupt_after=["quality"], durability="sync")
    assert saver.get_tuple(CONFIG).checkpoint["channel_values"]["backbone"]["served_model"] == "gpt-a"
    with pytest.raises(ResumeMismatchError, match=r"served_model 'gpt-a' \(agent 'gpt-b'\)"):
        _agent(saver, "gpt-b").invoke(None, CONFIG)
    out = _agent(saver, "gpt-a").invoke(None, CONFIG)  # the same model: past the guard (nothing answers: ineligible)
    assert out["result"].status == "ineligible" and out["result"].reward is None


def test_a_run_recorded_before_its_served_model_still_resumes():
    cfg = AgentConfig(preset="full").resolved()
    backbone = {"model": "ChatOpenAI", "method": "json_schema", "temperature": 0.0, "image_long_side": 512,
                "jpeg_quality": 85}
    values = {**run_settings(cfg, backbone=backbone), "steps": [{"node": "assess"}]}
    assert resume_refusal("old", values, run_settings(cfg, backbone={**backbone, "served_model": "gpt-b"})) is None


def test_other_openai_family_models_record_their_served_model_and_token_limit():
    """AzureChatOpenAI and ChatDeepSeek subclass langchain-openai's BaseChatOpenAI, not ChatOpenAI: both were recorded
    as None. Azure asks for its deployment (its `model` names the weights for tracing only)."""
    from langchain_openai import AzureChatOpenAI
    from langchain_openai.chat_models.base import BaseChatOpenAI

    azure = AzureChatOpenAI(azure_deployment="dep-a", azure_endpoint="https://r.openai.azure.com",
                            api_version="2024-10-21", api_key="k", max_completion_tokens=64)
    recorded = backbone_settings(Backbone(azure), FrameStore())
    assert (recorded["served_model"], recorded["max_tokens"]) == ("dep-a", 64)
    deepseek_like = BaseChatOpenAI(model="deepseek-chat", api_key="k", base_url=URL, max_tokens=128)
    recorded = backbone_settings(Backbone(deepseek_like), FrameStore())
    assert (recorded["served_model"], recorded["max_tokens"]) == ("deepseek-chat", 128)


def test_a_settings_agent_of_another_model_is_refused_naming_the_model_once():
    """The agent built from settings asks for the model it is named by: its served model says nothing more."""
    cfg = AgentConfig(preset="full").resolved()
    backbone = {"model": "qwen-a", "served_model": "qwen-a", "method": "json_schema", "temperature": 0.0,
                "max_tokens": None, "image_long_side": 512, "jpeg_quality": 85}
    values = {**run_settings(cfg, backbone=backbone), "steps": [{"node": "assess"}]}
    refused = resume_refusal("t", values, run_settings(cfg, backbone={**backbone, "model": "qwen-b",
                                                                      "served_model": "qwen-b"}))
    assert refused is not None and "model 'qwen-a' (agent 'qwen-b')" in str(refused)
    assert "served_model" not in str(refused)
    # a name that does not say what is asked for (an injected model, or one injected with settings of another name)
    for agent in ({**backbone, "served_model": "qwen-b"}, {**backbone, "model": "qwen-b"}):
        refused = resume_refusal("t", values, run_settings(cfg, backbone=agent))
        assert refused is not None and str(refused).count("qwen-b") == 1, str(refused)
    refused = resume_refusal("t", values, run_settings(cfg, backbone={**backbone, "model": "m", "served_model": "x"}))
    assert refused is not None and "model 'qwen-a' (agent 'm')" in str(refused)
    assert "served_model 'qwen-a' (agent 'x')" in str(refused)


def test_an_openai_family_model_records_the_temperature_it_samples_at():
    """The backbone's temperature (RAA_TEMPERATURE, 0 by default) is not what an injected ChatOpenAI sends: its own
    is (none: the server's default), and a run records that one."""
    assert backbone_settings(Backbone(ChatOpenAI(model="m", api_key="k", base_url=URL, temperature=0.7)),
                             FrameStore())["temperature"] == 0.7
    assert backbone_settings(Backbone(_chat("gpt-a")), FrameStore())["temperature"] is None
    assert backbone_settings(Backbone(ScriptedChatModel({}), temperature=0.3), FrameStore())["temperature"] == 0.3
