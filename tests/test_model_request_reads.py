"""The temperature a backbone samples at is chosen in one place (`graph.model_request.sampling_temperature`), for its
stage keys (`stage_identity`) and for what a run records (`Backbone.temperature`, `graph.context.backbone_settings`),
and a run's backbone settings read the model's request once (`Backbone.sampling`): they read it twice, once for the
served model and the limit and again for the temperature."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from graph.backbone import Backbone
from graph.context import backbone_settings
from graph.frame_store import FrameStore
from graph.model_request import requested, sampling_temperature, stage_identity
from graph.settings import BackboneSettings
from graph.testing import ScriptedChatModel

READS: list[str] = []
"""The reads of `_Counted`'s request parameters."""


class _Counted(ChatOpenAI):
    """A ChatOpenAI subclass (used as given: `graph.completion_shape.shaped`) that counts its request's reads."""

    @property
    def _default_params(self) -> dict[str, Any]:
        READS.append("request")
        return super()._default_params


def test_backbone_settings_read_the_request_once() -> None:
    backbone = Backbone(_Counted(model="qwen-a", api_key="k", base_url="http://h/v1", temperature=0.3,
                                 max_completion_tokens=64))
    READS.clear()
    settings = backbone_settings(backbone, FrameStore())
    assert READS == ["request"]
    assert (settings["served_model"], settings["temperature"], settings["max_tokens"]) == ("qwen-a", 0.3, 64)


def test_sampling_reads_the_request_once_and_gives_the_temperature() -> None:
    backbone = Backbone(_Counted(model="qwen-a", api_key="k", base_url="http://h/v1", temperature=0.3))
    READS.clear()
    request, temperature = backbone.sampling()
    assert READS == ["request"]
    assert request == requested(backbone.model) and temperature == 0.3 == backbone.temperature


def test_the_temperature_is_the_models_own_else_the_one_given() -> None:
    assert sampling_temperature(None, 0.4) == 0.4  # another chat model: the backbone's
    own = requested(ChatOpenAI(model="m", api_key="k", temperature=0.3))
    assert sampling_temperature(own, 0.9) == 0.3  # an OpenAI-family model: its own, whatever the backbone was given
    unsent = requested(ChatOpenAI(model="m", api_key="k"))
    assert sampling_temperature(unsent, 0.9) is None  # none sent: the server's default
    settings = BackboneSettings(base_url="http://h/v1", model="gpt-5-mini", api_key="k", temperature=0.7)
    shaped = requested(Backbone.from_settings(settings).model)  # langchain-openai sends none for gpt-5: the settings'
    assert sampling_temperature(shaped, 0.0) == 0.7


@pytest.mark.parametrize("model, given", [
    (ScriptedChatModel({}), 0.5), (ScriptedChatModel({}), 0.0),
    (ChatOpenAI(model="m", api_key="k", temperature=0.3), 0.9), (ChatOpenAI(model="m", api_key="k"), 0.9),
    (ChatOpenAI(model="gpt-5-mini", api_key="k", temperature=0.7), 0.0),
])
def test_the_keys_and_the_record_name_one_temperature(model, given: float) -> None:
    """The stage keys name the temperature `Backbone.temperature` records (none keyed at 0)."""
    backbone = Backbone(model, temperature=given)
    _, _, extra = stage_identity(backbone.model, model_name="n", endpoint=None, temperature=given, draw=0)
    assert extra.get("temperature", 0) == backbone.temperature
