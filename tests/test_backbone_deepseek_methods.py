"""Which structured method a DeepSeek rejection names (graph/setup_rejections.py), through the real ChatOpenAI path
against a local OpenAI-compatible server. DeepSeek's API serves json_object only (no json_schema: "This response_format
type is unavailable now", for V4 Pro too, presenton/presenton#676), and its V4 models think by default, when they take
no forced tool call ("Thinking mode does not support this tool_choice", deepseek-ai/DeepSeek-V3#1376). The fault of
either named a method that meets the other rejection: json_schema's named function_calling as well as json_mode,
function_calling's named json_schema; only json_mode serves a thinking DeepSeek model."""

from __future__ import annotations

import pytest

from tests.test_gateway_budget_and_caps import DEEPSEEK_NO_JSON_SCHEMA, DEEPSEEK_THINKING_TOOL_CHOICE, _call

# langchain-openai warns once per process when json_schema is asked of a model it does not know (the stub's)
pytestmark = pytest.mark.filterwarnings("ignore:This model does not support OpenAI's structured output:UserWarning")


def test_deepseek_s_thinking_rejection_of_a_forced_call_names_json_mode_only() -> None:
    fault, sent = _call(400, DEEPSEEK_THINKING_TOOL_CHOICE, replies=1, method="function_calling")
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "set RAA_STRUCTURED_METHOD=json_mode " in fault.message, fault.message
    assert "=json_mode or json_schema" not in fault.message, fault.message


@pytest.mark.parametrize("body", DEEPSEEK_NO_JSON_SCHEMA, ids=["current", "earlier"])
def test_deepseek_s_json_schema_rejection_leads_with_json_mode_and_says_function_calling_needs_no_thinking(
        body: dict) -> None:
    fault, sent = _call(400, body, replies=1)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    fix = fault.message.split("RAA_STRUCTURED_METHOD=", 1)[1]
    assert fix.startswith("json_mode"), fault.message
    assert "thinking" in fix and "forced tool call" in fix, fault.message


def test_another_server_s_json_schema_rejection_names_no_deepseek_thinking() -> None:
    """OpenAI's words for a model without json_schema: no word of DeepSeek's thinking."""
    body = {"error": {"message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with "
                                 "this model.", "type": "invalid_request_error", "param": "response_format"}}
    fault, _ = _call(400, body, replies=1)
    assert fault is not None and fault.kind == "settings", fault
    assert "RAA_STRUCTURED_METHOD=json_mode or function_calling" in fault.message, fault.message
    assert "thinking" not in fault.message, fault.message
