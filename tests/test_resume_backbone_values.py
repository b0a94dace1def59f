"""The backbone settings a run records (`graph.context.backbone_settings`) are plain values the trace checkpointer
can write: a temperature given as a NumPy scalar (a sweep over `np.linspace`, which the stage keys take) made the
quality step's checkpoint fail, so every run of such a backbone on a thread raised instead of scoring; so did a token
limit (`max_tokens`) assigned to a ChatOpenAI as a NumPy integer, once the limit was recorded."""

from __future__ import annotations

import numpy as np
import pytest
from graph_scripts import FakeSurprise, assessment, full_script

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.context import backbone_settings
from graph.frame_store import FrameStore
from graph.testing import ScriptedChatModel
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"
FAILED = {"failure_established": True, "essential_unverifiable": False, "rationale": "the block never moves"}


def _agent(saver, temperature):
    script = full_script(assess=[assessment(s2="not_met")], reflect=[assessment(s2="not_met")],
                         repair=[assessment(s2="not_met")], final_check=[FAILED])
    backbone = Backbone(ScriptedChatModel(script), model_name="model-a", schema_retries=1, max_retries=1,
                        timeout_s=10, retry_wait=(0.0, 0.0), temperature=temperature)
    return build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=saver,
                              frame_store=FrameStore(), tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


@pytest.mark.parametrize("temperature", [np.float64(0.25), np.float32(0.25)])
def test_a_numpy_temperature_is_recorded_as_a_plain_float(temperature):
    settings = backbone_settings(Backbone(ScriptedChatModel({}), temperature=temperature), FrameStore())
    assert type(settings["temperature"]) is float and settings["temperature"] == 0.25
    traces_serde().dumps_typed({"backbone": settings})  # the checkpointer writes it


def test_a_run_of_a_numpy_temperature_is_checkpointed_and_resumed_under_the_same_float(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver(serde=traces_serde())
    config = {"configurable": {"thread_id": "np-temperature"}}
    agent = _agent(saver, np.float64(0.25))
    for chunk in agent.stream({"video": str(clip), "instruction": INSTRUCTION}, config, stream_mode="updates",
                              durability="sync"):
        if "assess" in chunk:
            break
    assert saver.get_tuple(config).checkpoint["channel_values"]["backbone"]["temperature"] == 0.25
    out = _agent(saver, 0.25).invoke(None, config)  # the same temperature as a Python float: the same judge
    assert out["result"].preset == "full" and out["result"].status != "ineligible"


def _chat_openai(max_tokens):
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-a", api_key="EMPTY", base_url="http://127.0.0.1:9/v1", max_retries=0)
    model.max_tokens = max_tokens  # set after it was built: pydantic checks no assignment, the NumPy scalar stays
    return model


@pytest.mark.parametrize("max_tokens", [np.int64(512), np.int32(512)])
def test_a_numpy_token_limit_is_recorded_as_a_plain_int(max_tokens):
    settings = backbone_settings(Backbone(_chat_openai(max_tokens)), FrameStore())
    assert type(settings["max_tokens"]) is int and settings["max_tokens"] == 512
    traces_serde().dumps_typed({"backbone": settings})  # the checkpointer writes it


def test_a_run_of_a_numpy_token_limit_is_checkpointed_and_resumed_under_the_same_int(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.settings import BackboneSettings

    def agent(max_tokens):
        return build_reward_agent(AgentConfig(preset="full"), model=_chat_openai(max_tokens), checkpointer=saver,
                                  settings=BackboneSettings(max_retries=0, timeout_s=5, cache_path=None),
                                  tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))

    saver = InMemorySaver(serde=traces_serde())
    config = {"configurable": {"thread_id": "np-max-tokens"}}
    agent(np.int64(512)).invoke({"video": str(clip), "instruction": INSTRUCTION}, config,
                                interrupt_after=["quality"], durability="sync")
    assert saver.get_tuple(config).checkpoint["channel_values"]["backbone"]["max_tokens"] == 512
    out = agent(512).invoke(None, config)  # the same limit as a Python int: past the guard, nothing answers
    assert out["result"].status == "ineligible" and out["result"].reward is None


@pytest.mark.parametrize("temperature, recorded", [(np.float64(0.25), 0.25), (np.float32(0.25), 0.25), (1, 1.0),
                                                   (None, None)], ids=["float64", "float32", "int", "none"])
def test_an_openai_models_own_temperature_is_recorded_as_a_plain_float_or_none(temperature, recorded):
    """The record takes the temperature as `Backbone.sampling` gives it: an OpenAI-family model's own, made a float
    where the request is read (`graph.model_request.requested`), not again by `backbone_settings`."""
    model = _chat_openai(None)
    model.temperature = temperature  # set after it was built: pydantic checks no assignment, the NumPy scalar stays
    settings = backbone_settings(Backbone(model), FrameStore())
    assert type(settings["temperature"]) is type(recorded) and settings["temperature"] == recorded
    traces_serde().dumps_typed({"backbone": settings})  # the checkpointer writes it
