"""Moonshot's (Kimi's) temperature and DashScope's (Qwen's) thinking-mode refusals of every clip's request alike
(graph/provider_words.py, graph/setup_rejections.py), through the real ChatOpenAI path against the local stub server:
- "invalid temperature: only 1 is allowed for this model" (or "only 0.6"): the agent's temperature 0 refused, for
  every clip; it was "refused", with no word on what to change. The fix names the value the words name.
- "<400> InternalError.Algo.InvalidParameter: The tool_choice parameter does not support being set to required or
  object in thinking mode": function_calling's forced call refused; it was "refused". Not DeepSeek's words (whose fix
  names json_mode alone, its API serving json_object only): DashScope serves a response_format.
The words quoted inside other words (a 500 echoing the model's output), or said of another parameter, stay no
setup fault."""

from __future__ import annotations

import pytest

from evals.judge import JUDGE_NAMES
from graph.schemas import Fault
from graph.setup_rejections import unsupported_part
from tests.test_backbone_temperature_rejection import _fault
from tests.test_gateway_budget_and_caps import TOOL_ROUND, _call
from tests.test_settings_answers import _status

# langchain-openai warns once per process when json_schema is asked of a model it does not know (the stub's)
pytestmark = pytest.mark.filterwarnings("ignore:This model does not support OpenAI's structured output:UserWarning")


def moonshot(value: str) -> dict:
    """Moonshot's 400 body for a temperature the model does not take (XCNXNXNX/dsh-portable-tavern#1)."""
    return {"error": {"message": f"invalid temperature: only {value} is allowed for this model",
                      "type": "invalid_request_error"}}


DASHSCOPE_THINKING_TOOL_CHOICE = {
    "error": {"message": "<400> InternalError.Algo.InvalidParameter: The tool_choice parameter does not support being "
                         "set to required or object in thinking mode", "type": "invalid_request_error", "param": None,
              "code": "invalid_parameter_error"},
    "id": "chatcmpl-5bf78562-0341-9de2-8d10-5429ef761b7e", "request_id": "5bf78562-0341-9de2-8d10-5429ef761b7e"}
"""DashScope's 400 as cloudwego/eino#994 quotes it (qwen3.5-plus, enable_thinking true, tool_choice "required")."""


@pytest.mark.parametrize("value", ["1", "0.6"])
def test_moonshot_s_only_temperature_names_the_value_its_words_name(value: str) -> None:
    fault, sent = _fault(body=moonshot(value))
    assert fault.kind == "settings" and sent == 1, fault
    assert f"RAA_TEMPERATURE={value} " in fault.message, fault.message
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage
    if value != "1":
        assert "RAA_TEMPERATURE=1" not in fault.message and "only at 1" not in fault.message, fault.message


def test_moonshot_s_only_temperature_for_the_judge_names_its_model() -> None:
    fault, _ = _fault(JUDGE_NAMES, moonshot("1"))
    assert fault.kind == "settings" and "RAA_JUDGE_MODEL" in fault.message, fault.message
    assert "RAA_TEMPERATURE" not in fault.message, fault.message


@pytest.mark.parametrize("words", [
    "Failed to parse input at pos 0: invalid temperature: only 1 is allowed for this model, the robot said",
    "invalid top_p: only 0.95 is allowed for this model",
    "invalid temperature: only 1 is allowed for this model family's preview; retry later",
], ids=["quoted_in_a_500", "another_parameter", "other_words_after"])
def test_moonshot_like_words_that_are_not_its_refusal_are_no_setup(words: str) -> None:
    exc = _status(500 if words.startswith("Failed") else 400, {"error": {"message": words}})
    assert unsupported_part(exc, {"messages": [], "temperature": 0.0}) is None


def test_moonshot_s_words_for_a_request_without_a_temperature_are_no_setup() -> None:
    assert unsupported_part(_status(400, moonshot("1")), {"messages": []}) is None
    assert unsupported_part(_status(400, moonshot("1")), {"messages": [], "temperature": 0.0}) == "temperature"


def test_dashscope_s_thinking_refusal_of_a_forced_call_names_a_response_format_or_a_model_that_does_not_think() -> None:
    fault, sent = _call(400, DASHSCOPE_THINKING_TOOL_CHOICE, replies=1, method="function_calling")
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "RAA_STRUCTURED_METHOD=json_schema or json_mode " in fault.message, fault.message
    assert "thinking" in fault.message and "RAA_MODEL" in fault.message, fault.message
    assert "DeepSeek" not in fault.message and "serves no json_schema" not in fault.message, fault.message


@pytest.mark.parametrize("sent", [TOOL_ROUND, {"response_format": {"type": "json_object"}}, {}],
                         ids=["tool_round", "json_mode", "nothing"])
def test_dashscope_s_words_for_a_request_without_a_forced_call_are_no_rejected_part(sent: dict) -> None:
    assert unsupported_part(_status(400, DASHSCOPE_THINKING_TOOL_CHOICE), sent) is None


def test_dashscope_s_words_quoted_inside_a_500_are_no_rejected_part() -> None:
    quoted = {"error": {"message": "Failed to parse input at pos 4: the tool_choice parameter does not support being "
                                   "set to required or object in thinking mode, as the docs say"}}
    forced = {"tools": [{"type": "function", "function": {"name": "Verdict"}}],
              "tool_choice": {"type": "function", "function": {"name": "Verdict"}}}
    assert unsupported_part(_status(500, quoted), forced) is None
    assert unsupported_part(_status(400, DASHSCOPE_THINKING_TOOL_CHOICE), forced) == "structured"


@pytest.mark.parametrize("echo", [
    "Failed to parse input at pos 0: the robot says - invalid temperature: only 1 is allowed for this model",
    'Failed to parse input at pos 0: {"message": "invalid temperature: only 1 is allowed for this model"}',
], ids=["after_a_dash", "as_a_message_field"])
def test_moonshot_s_words_ending_a_500_s_echo_of_the_output_are_no_setup(echo: str) -> None:
    """A 500 quoting the model's own output (llama.cpp's "Failed to parse input at pos N: <output>") whose last words
    are Moonshot's, after a " - " or as a JSON "message" field of the output: the anchors read them as a whole
    message, and the call was a "temperature" settings fault (never retried, the run stopped, RAA_TEMPERATURE=1
    advised to a server that only failed to parse a reply). Moonshot answers with a 400: a 500 is no refusal of it."""
    exc = _status(500, {"error": {"message": echo}})
    assert unsupported_part(exc, {"messages": [], "temperature": 0.0}) is None


def test_dashscope_s_words_ending_a_500_s_echo_of_the_output_are_no_rejected_part() -> None:
    echo = ("Failed to parse input at pos 0: the robot says - the tool_choice parameter does not support being set to "
            "required or object in thinking mode")
    forced = {"tools": [{"type": "function", "function": {"name": "Verdict"}}],
              "tool_choice": {"type": "function", "function": {"name": "Verdict"}}}
    assert unsupported_part(_status(500, {"error": {"message": echo}}), forced) is None


LITELLM_MOONSHOT = {"error": {"message": "litellm.BadRequestError: MoonshotException - invalid temperature: only 1 is "
                                         "allowed for this model. Received Model Group=kimi-k2.5\nAvailable Model "
                                         "Group Fallbacks=None", "type": None, "param": None, "code": "400"}}
"""Moonshot's 400 relayed by a LiteLLM proxy: its router puts the provider's message after "<Provider>Exception - "
and adds ". Received Model Group=...\\nAvailable Model Group Fallbacks=None" (the shape of the LiteLLM budget
errors in tests/test_gateway_budget_and_caps.py)."""


def test_moonshot_s_words_relayed_by_a_litellm_proxy_name_the_value() -> None:
    """The anchors closed a whole message at its end, a " - " or a quote only: LiteLLM's ". Received Model Group="
    after the words left the refusal "refused", for every clip."""
    fault, sent = _fault(body=LITELLM_MOONSHOT)
    assert fault.kind == "settings" and sent == 1, fault
    assert "RAA_TEMPERATURE=1 " in fault.message, fault.message


def test_moonshot_s_words_before_other_words_of_a_litellm_like_suffix_stay_refused() -> None:
    words = "invalid temperature: only 1 is allowed for this model. Received Model Groups are listed below"
    assert unsupported_part(_status(400, {"error": {"message": words}}), {"messages": [], "temperature": 0.0}) is None


def test_deepseek_s_words_relayed_by_a_litellm_proxy_are_read_too() -> None:
    """The close is DeepSeek's matchers' too (graph.deepseek_words.WHOLE_CLOSE)."""
    from graph.deepseek_words import DEEPSEEK_NO_JSON
    assert DEEPSEEK_NO_JSON.search("error code: 400 - litellm.badrequesterror: deepseekexception - deepseek-reasoner "
                                   "does not support json output. received model group=r1\navailable model group "
                                   "fallbacks=none")
