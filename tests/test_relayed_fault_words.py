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

import pytest

from tests.test_gateway_budget_and_caps import _call
from tests.test_provider_credit_advice import QUOTING_THE_PHRASE


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
