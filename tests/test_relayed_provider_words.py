"""A gateway's relay of a provider's refusal, read by the same rules as the provider's own words (graph/server_words.py,
graph/deepseek_words.py `WHOLE_OPEN`):
- "Error from provider (<name>): " before the provider's message: "Error from provider (Moonshot AI): invalid
  temperature: only 1 is allowed for this model" (HenriGrimm/Minnow#291, anomalyco/opencode#33957), "Error from
  provider (Alibaba): <400> InternalError.Algo.InvalidParameter: ..." (plastic-labs/honcho#663);
- OpenRouter's "Provider returned error", whose `error.metadata.raw` holds the provider's reply as a JSON string
  ("{\"error\":{...,\"message\":\"...\"}}": diegosouzapw/OmniRoute#3044, reVrost/go-openrouter#21) or as plain text
  (open-webui/computer#293), with `provider_name`.
Each was "refused" for every clip: the wrapper's words opened no whole message, and the raw reply was never read.
A provider's image limit per prompt ("Model '<id>' supports at most N image per prompt.", relayed so or its own) was
"refused" too: the image-limit rule (graph/server_limits.py `_IMAGE_LIMIT`) did not read its words."""

from __future__ import annotations

import json

import pytest
from langchain_core.exceptions import ModelError

from graph.server_limits import limit_kind
from graph.server_words import server_words
from graph.setup_rejections import unsupported_part
from tests.test_backbone_temperature_rejection import _fault
from tests.test_gateway_budget_and_caps import _call
from tests.test_provider_temperature_and_thinking_words import DASHSCOPE_THINKING_TOOL_CHOICE
from tests.test_settings_answers import _status

pytestmark = pytest.mark.filterwarnings("ignore:This model does not support OpenAI's structured output:UserWarning")

MOONSHOT = "invalid temperature: only 1 is allowed for this model"
WRAPPED = {"error": {"message": f"Error from provider (Moonshot AI): {MOONSHOT}", "type": "invalid_request_error"}}
"""The relay's body as HenriGrimm/Minnow#291 quotes it."""


def openrouter(raw: str, provider: str = "Moonshot AI", message: str = "Provider returned error") -> dict:
    """OpenRouter's body for a provider's error (the shape of diegosouzapw/OmniRoute#3044)."""
    return {"error": {"message": message, "code": 400, "metadata": {"raw": raw, "provider_name": provider,
                                                                     "is_byok": False}}, "user_id": "user_1"}


RAW_MOONSHOT = json.dumps({"error": {"message": MOONSHOT, "type": "invalid_request_error"}})


@pytest.mark.parametrize("body", [WRAPPED, openrouter(RAW_MOONSHOT), openrouter(MOONSHOT)],
                         ids=["error_from_provider", "openrouter_raw_json", "openrouter_raw_text"])
def test_moonshot_s_words_relayed_name_the_value(body: dict) -> None:
    fault, sent = _fault(body=body)
    assert fault.kind == "settings" and sent == 1, fault
    assert "RAA_TEMPERATURE=1 " in fault.message, fault.message


def test_dashscope_s_words_after_error_from_provider_name_a_model_that_does_not_think() -> None:
    body = {"error": {**DASHSCOPE_THINKING_TOOL_CHOICE["error"]}}
    body["error"]["message"] = "Error from provider (Alibaba): " + body["error"]["message"]
    fault, sent = _call(400, body, replies=1, method="function_calling")
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "thinking" in fault.message and "RAA_MODEL" in fault.message, fault.message


def test_the_raw_reply_is_read_from_the_sdk_s_error_body() -> None:
    """The openai SDK keeps the body's "error" object as `exc.body`: its metadata's raw reply is the server's words."""
    import httpx
    import openai
    request = httpx.Request("POST", "http://server/v1/chat/completions")
    exc = openai.BadRequestError("Error code: 400 - Provider returned error", response=httpx.Response(400,
                                 request=request), body=openrouter(RAW_MOONSHOT)["error"])
    assert server_words(exc) == f"Error code: 400 - Provider returned error - {MOONSHOT}"


@pytest.mark.parametrize("body", [
    {"error": {"message": "Error from provider (Moonshot AI): invalid top_p: only 0.95 is allowed for this model"}},
    {"error": {"message": f"Error from provider Moonshot AI: {MOONSHOT}"}},
    openrouter(json.dumps({"error": {"message": f"the robot said: {MOONSHOT}, twice"}})),
    openrouter(json.dumps({"detail": [{"msg": "bad", "input": MOONSHOT}]})),
], ids=["top_p_relayed", "no_parentheses", "raw_quotes_them_in_other_words", "raw_echoes_the_request"])
def test_relayed_words_that_are_not_moonshot_s_refusal_are_no_setup(body: dict) -> None:
    assert unsupported_part(_status(400, body), {"messages": [], "temperature": 0.0}) is None


def test_error_from_provider_quoted_in_a_500_s_echo_is_no_setup() -> None:
    echo = f"Failed to parse input at pos 0: the robot says Error from provider (Moonshot AI): {MOONSHOT}"
    assert unsupported_part(_status(500, {"error": {"message": echo}}), {"messages": [], "temperature": 0.0}) is None


KIMI_IMAGES = "Model 'moonshotai/kimi-k2.6' supports at most 1 image per prompt."
"""The provider's words OpenRouter relays for more images than the model takes in one prompt (the wording of
diegosouzapw/OmniRoute#3044, as a public client's test quotes it); the number is the limit."""


@pytest.mark.parametrize("body", [
    {"error": {"message": KIMI_IMAGES, "type": "invalid_request_error"}},
    openrouter(json.dumps({"error": {"message": KIMI_IMAGES, "type": "invalid_request_error"}}), "Moonshot AI"),
    openrouter(KIMI_IMAGES)], ids=["own_words", "openrouter_raw_json", "openrouter_raw_text"])
def test_a_model_s_image_limit_per_prompt_is_the_server_s_image_limit(body: dict) -> None:
    """It was "refused" for every clip (the image-limit rule read vLLM's and other hosted APIs' words only)."""
    fault, sent = _fault(body=body)
    assert fault.kind == "settings" and sent == 1, fault
    assert "fewer images per request" in fault.message and "max_images_per_call" in fault.message, fault.message
    assert limit_kind(_status(400, body)) == "images"


def test_a_model_s_limit_of_no_image_per_prompt_is_no_limit_to_raise() -> None:
    """The number is read as the limit, as vLLM's "At most 0 image(s)" is: 0 is a model that takes no image."""
    words = KIMI_IMAGES.replace("at most 1 image", "at most 0 images")
    assert limit_kind(_status(400, openrouter(json.dumps({"error": {"message": words}})))) is None
    assert limit_kind(_status(400, {"error": {"message": KIMI_IMAGES.replace(" 1 ", " 12 ")}})) == "images"


@pytest.mark.parametrize("exc", [
    _status(400, {"error": {"message": "Please send at most 1 image per prompt for the best results"}}),
    _status(400, openrouter(json.dumps({"error": {"message": f"the robot said: {KIMI_IMAGES} twice"}}))),
    _status(400, openrouter(json.dumps({"detail": [{"msg": "bad", "input": KIMI_IMAGES}]}))),
    _status(500, {"error": {"message": f"Failed to parse input at pos 0: {KIMI_IMAGES}"}}),
    ModelError(f"Error code: 500 - Failed to parse input at pos 0: the robot says {KIMI_IMAGES}"),
], ids=["other_words_at_most_1_image", "raw_quotes_them_in_other_words", "raw_echoes_the_request", "500_echo",
        "model_error_500_echo"])
def test_words_that_are_not_a_model_s_image_limit_are_no_limit(exc: BaseException) -> None:
    assert limit_kind(exc) is None
