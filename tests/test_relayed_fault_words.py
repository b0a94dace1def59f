"""Providers' fault words as a relay or gateway passes them on, and the same words quoted inside another error
(graph/settings_faults.py, graph/deepseek_words.py, graph/setup_rejections.py), through the real ChatOpenAI path
against a local OpenAI-compatible server:
- "... does not support Json Output" (DeepSeek's 400 for json_object to a thinking model) read anywhere by
  `_STRUCTURED`'s generic branch: a validation error or content policy quoting it was a structured-output fault;
- the same words under a provider-prefixed model name ("deepseek/deepseek-r1", "deepseek-ai/DeepSeek-R1"): missed by
  `DEEPSEEK_NO_JSON` once it was anchored, and advised with the generic methods a thinking model does not take;
- Anthropic's "credit balance is too low" read in any 5xx: a server's 500 quoting the model's own output (a screen
  read out) was "settings" at the first try, where OpenAI's quota words in a 5xx are read only as its whole error;
- OpenAI's "You exceeded your current quota" wrapped across lines by a relay's 5xx: missed, retried, "transport"."""

from __future__ import annotations

import json

import pytest

from tests.openai_stub import StubReply
from tests.test_backbone_http import good
from tests.test_gateway_budget_and_caps import _call
from tests.test_provider_credit_advice import QUOTING_THE_PHRASE
from tests.test_settings_answers import ANTHROPIC_NO_CREDIT
from tests.test_settings_answers import _call as _call_replies


@pytest.mark.parametrize("words", QUOTING_THE_PHRASE, ids=["quoted_in_a_validation_error", "inside_a_sentence"])
def test_no_json_output_words_quoted_in_another_message_are_refused_not_a_structured_fault(words: str) -> None:
    """The clip's text or the model's earlier answer quoted by a 400: the server rejected the content, not the
    method; advising another structured method (the generic branch of `_STRUCTURED`) named a change that is no fix."""
    fault, sent = _call(400, {"error": {"message": words, "type": "invalid_request_error"}}, replies=1,
                        method="json_mode")
    assert fault is not None and sent == 1, (fault, sent)
    assert fault.kind == "refused" and "RAA_STRUCTURED_METHOD" not in fault.message, fault


def test_another_model_s_no_json_output_as_its_whole_message_is_still_a_structured_fault() -> None:
    """The words as the whole of a message, for a model whose name is not DeepSeek's: still the server's refusal of
    json_object, advised with the other methods (as before)."""
    body = {"error": {"message": "qwen/qwq-32b does not support Json Output.", "type": "invalid_request_error"}}
    fault, sent = _call(400, body, replies=1, method="json_mode")
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "RAA_STRUCTURED_METHOD=function_calling or json_schema" in fault.message, fault.message
    assert "DeepSeek model" not in fault.message, fault.message


@pytest.mark.parametrize("name", ["deepseek/deepseek-r1", "deepseek-ai/DeepSeek-R1", "Pro/deepseek-ai/DeepSeek-R1"],
                         ids=["openrouter", "siliconflow", "siliconflow_pro"])
def test_a_provider_prefixed_deepseek_name_is_still_deepseek_s_refusal(name: str) -> None:
    body = {"error": {"message": f"{name} does not support Json Output.", "type": "invalid_request_error",
                      "param": None, "code": "invalid_request_error"}}
    fault, sent = _call(400, body, replies=1, method="json_mode")
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "set RAA_MODEL to a DeepSeek model that does not think" in fault.message, fault.message


LLAMA_CPP_QUOTING_A_BALANCE = {"error": {"code": 500, "type": "server_error", "message":
                                         'Failed to parse input at pos 0: {"observation": "the phone screen reads '
                                         '\\"Your credit balance is too low\\"", "score": '}}
"""llama.cpp's 500 for a reply its parser could not read, quoting the model's output (as
`tests.test_gateway_budget_and_caps.LLAMA_CPP_PARSE_ERROR` quotes a budget): a clip's screen, read out."""


def test_balance_words_in_the_model_s_output_quoted_by_a_500_are_retried_not_no_credit() -> None:
    fault, sent = _call(500, LLAMA_CPP_QUOTING_A_BALANCE, replies=1)
    assert fault is None and sent == 2, fault


ANTHROPIC_RELAYED_AS_500 = {"error": {"message": "upstream error: " + json.dumps(ANTHROPIC_NO_CREDIT),
                                      "type": "upstream_error", "code": 500}}
"""A relay that answers every upstream error as a 500, quoting Anthropic's 400 whole (as lm-sys/RouteLLM#14 relays
OpenAI's `insufficient_quota`)."""
ANTHROPIC_WRAPPED_AS_500 = ("upstream error 400: Your credit balance is too low to access the\nAnthropic API. "
                            "Please go to Plans & Billing to upgrade or purchase credits.")
"""The same relayed as plain text, its sentence wrapped across lines."""


@pytest.mark.parametrize(("body", "content_type"), [
    (json.dumps(ANTHROPIC_RELAYED_AS_500), "application/json"), (ANTHROPIC_WRAPPED_AS_500, "text/plain")],
    ids=["whole_error", "wrapped_text"])
def test_anthropic_s_whole_no_credit_sentence_relayed_as_a_500_is_settings_at_once(body: str,
                                                                                   content_type: str) -> None:
    reply = StubReply(status=500, body=body, content_type=content_type)
    fault, sent = _call_replies([reply] * 3 + [good("json_schema")])
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message and "RAA_API_KEY" in fault.message, fault.message


OPENAI_QUOTA_WRAPPED = ("upstream error 429 (insufficient_quota): You exceeded your\ncurrent quota, please check your "
                        "plan and billing details.")
"""A relay answering OpenAI's `insufficient_quota` as a plain-text 500, its sentence wrapped across lines."""


def test_openai_s_quota_sentence_wrapped_across_lines_in_a_500_is_settings_at_once() -> None:
    reply = StubReply(status=500, body=OPENAI_QUOTA_WRAPPED, content_type="text/plain")
    fault, sent = _call_replies([reply] * 3 + [good("json_schema")])
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message and "RAA_API_KEY" in fault.message, fault.message


@pytest.mark.parametrize("words", ["Your credit balance is\ntoo low to access the Anthropic API.",
                                   "Your credit balance is too low to access the Anthropic API."],
                         ids=["wrapped", "one_line"])
def test_anthropic_s_no_credit_in_a_400_is_settings_across_any_whitespace(words: str) -> None:
    fault, sent = _call(400, {"type": "error", "error": {"type": "invalid_request_error", "message": words}},
                        replies=1)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message, fault.message


CLAUDE_API_RELAYED_AS_500 = ("upstream error 400: Your credit balance is too low to access the Claude API. Please go "
                             "to Plans & Billing to upgrade or purchase credits.")
"""Anthropic's sentence naming "the Claude API" (as its API's users quote it too, in their clients' tests and
handlers), relayed as a plain-text 500: `_BALANCE_SENTENCE` read "the anthropic api" only,
so a 5xx carrying it was retried, then "transport", where before it was "settings" at once (any status)."""


def test_anthropic_s_no_credit_sentence_naming_the_claude_api_relayed_as_a_500_is_settings_at_once() -> None:
    reply = StubReply(status=500, body=CLAUDE_API_RELAYED_AS_500, content_type="text/plain")
    fault, sent = _call_replies([reply] * 3 + [good("json_schema")])
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message and "RAA_API_KEY" in fault.message, fault.message
