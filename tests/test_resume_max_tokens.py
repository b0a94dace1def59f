"""A run records its completion-token limit (`max_tokens`, RAA_MAX_TOKENS: set on the ChatOpenAI an agent built from
settings calls) with its backbone settings, and a resume by an agent of another limit is refused: a run started at 512
and resumed at 4096 scored one reward from answers cut at two limits. A checkpoint recorded before the limit was
still resumes."""

from __future__ import annotations

import pytest
from graph_scripts import FakeSurprise
from langchain_openai import ChatOpenAI

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.config import run_settings
from graph.context import backbone_settings
from graph.frame_store import FrameStore
from graph.settings import BackboneSettings
from graph.testing import ScriptedChatModel
from graph.thread_guard import resume_refusal
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"
CONFIG = {"configurable": {"thread_id": "cut"}}


def _settings(max_tokens: int | None) -> BackboneSettings:
    # an address nothing answers at, no retries: a resume that gets past the guard ends at once (ineligible)
    return BackboneSettings(base_url="http://127.0.0.1:9/v1", model="model-a", api_key="EMPTY", max_retries=0,
                            timeout_s=5, cache_path=None, max_tokens=max_tokens)


def _agent(saver, max_tokens: int | None):
    return build_reward_agent(AgentConfig(preset="full"), checkpointer=saver, settings=_settings(max_tokens),
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


def test_the_token_limit_of_a_chat_openai_is_recorded_and_none_for_another_model():
    recorded = backbone_settings(Backbone.from_settings(_settings(512)), FrameStore())
    assert recorded["max_tokens"] == 512
    injected = ChatOpenAI(model="m", api_key="k", base_url="http://127.0.0.1:9/v1", max_completion_tokens=64)
    assert backbone_settings(Backbone(injected), FrameStore())["max_tokens"] == 64
    # langchain-openai moves a limit given in model_kwargs to the field: what the model sends is what is recorded
    with pytest.warns(UserWarning, match="model_kwargs"):  # (it says to give it as the field)
        in_kwargs = ChatOpenAI(model="m", api_key="k", base_url="http://127.0.0.1:9/v1",
                               model_kwargs={"max_tokens": 32})
    assert backbone_settings(Backbone(in_kwargs), FrameStore())["max_tokens"] == 32
    assert backbone_settings(Backbone(ScriptedChatModel({})), FrameStore())["max_tokens"] is None


def test_a_run_started_at_one_token_limit_and_resumed_at_another_is_refused(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.thread_guard import ResumeMismatchError

    saver = InMemorySaver(serde=traces_serde())
    _agent(saver, 512).invoke({"video": str(clip), "instruction": INSTRUCTION}, CONFIG, interrupt_after=["quality"],
                              durability="sync")
    assert saver.get_tuple(CONFIG).checkpoint["channel_values"]["backbone"]["max_tokens"] == 512
    with pytest.raises(ResumeMismatchError, match=r"max_tokens 512 \(agent 4096\)"):
        _agent(saver, 4096).invoke(None, CONFIG)
    with pytest.raises(ResumeMismatchError, match=r"max_tokens 512 \(agent None\)"):  # left to the server
        _agent(saver, None).invoke(None, CONFIG)
    out = _agent(saver, 512).invoke(None, CONFIG)  # the same limit: past the guard (nothing answers: ineligible)
    assert out["result"].status == "ineligible" and out["result"].reward is None


def test_a_run_recorded_before_its_token_limit_still_resumes():
    cfg = AgentConfig(preset="full").resolved()
    backbone = {"model": "model-a", "method": "json_schema", "temperature": 0.0, "image_long_side": 512,
                "jpeg_quality": 85}
    values = {**run_settings(cfg, backbone=backbone), "steps": [{"node": "assess"}]}
    assert resume_refusal("old", values, run_settings(cfg, backbone={**backbone, "max_tokens": 4096})) is None
    refused = resume_refusal("new", {**values, "backbone": {**backbone, "max_tokens": 512}},
                             run_settings(cfg, backbone={**backbone, "max_tokens": 4096}))
    assert refused is not None and "max_tokens 512 (agent 4096)" in str(refused)
