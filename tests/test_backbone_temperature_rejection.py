"""A model that takes no temperature but its default rejects every clip's request alike: a setting to change.

OpenAI's reasoning models (o3, o4-mini, ...) answer a request at temperature 0, the agent's default, with a 400
"Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported."
(code `unsupported_value`, param `temperature`: OpenAI's words as quoted by many of its API's users; langchain-openai
drops the temperature for gpt-5 only). It was kind "refused", the model's answer about the clip, for every clip of
the run, with no word on what to change. Through the real ChatOpenAI path against the local stub server.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from evals.judge import JUDGE_NAMES
from graph.backbone import BackboneFault, Usage
from graph.schemas import Fault
from graph.setup_rejections import unsupported_part
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import good, make, run

OPENAI_TEMPERATURE = {"error": {"message": "Unsupported value: 'temperature' does not support 0 with this model. Only "
                                           "the default (1) value is supported.", "type": "invalid_request_error",
                                "param": "temperature", "code": "unsupported_value"}}


def _fault(names=None, body: dict = OPENAI_TEMPERATURE) -> tuple[BackboneFault, int]:
    """The fault of a json_schema call whose first reply is a 400 with `body`, and the requests the stub got."""
    with OpenAIStub([StubReply(status=400, body=json.dumps(body)), good("json_schema")]) as stub:
        bb = make(stub, "json_schema")
        if names is not None:
            bb.setting_names = names
        with pytest.raises(BackboneFault) as info:
            run(bb, Usage())
    return info.value, len(stub.requests)


def test_a_model_that_takes_only_its_default_temperature_names_the_temperature_setting() -> None:
    fault, sent = _fault()
    assert fault.kind == "settings" and sent == 1, fault
    assert "RAA_TEMPERATURE=1" in fault.message, fault.message
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


def test_the_judge_which_has_no_temperature_setting_names_its_model() -> None:
    fault, _ = _fault(JUDGE_NAMES)
    assert fault.kind == "settings" and "RAA_JUDGE_MODEL" in fault.message, fault.message
    assert "RAA_TEMPERATURE" not in fault.message, fault.message


def test_temperature_words_for_a_request_without_a_temperature_are_no_setup() -> None:
    """Only a rejection of what the request carried counts (graph/setup_rejections.py)."""
    def rejected(body: dict) -> openai.BadRequestError:
        request = httpx.Request("POST", "http://stub/v1/chat/completions", json=body)
        text = OPENAI_TEMPERATURE["error"]["message"]
        return openai.BadRequestError(text, response=httpx.Response(400, request=request), body=None)

    assert unsupported_part(rejected({"messages": []})) is None
    assert unsupported_part(rejected({"messages": [], "temperature": 0.0})) == "temperature"


OPENAI_NO_TEMPERATURE = {"error": {"message": "Unsupported parameter: 'temperature' is not supported with this model.",
                                   "type": "invalid_request_error", "param": "temperature",
                                   "code": "unsupported_parameter"}}


def test_a_model_that_takes_no_temperature_parameter_names_the_model_not_a_value() -> None:
    """o1, o3-mini, gpt-5.2 answer any temperature with `unsupported_parameter` (as their API's users quote it):
    the agent sends its temperature whatever RAA_TEMPERATURE holds (1 too), so the hint to set RAA_TEMPERATURE=1 led
    to a second run faulting alike; only another model (or a client that sends none) is a way out."""
    with OpenAIStub([StubReply(status=400, body=json.dumps(OPENAI_NO_TEMPERATURE)), good("json_schema")]) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault
    assert "RAA_TEMPERATURE=1" not in fault.message and "RAA_MODEL" in fault.message, fault.message
