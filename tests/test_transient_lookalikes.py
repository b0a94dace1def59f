"""Answers that only look like the ones every request meets alike (graph.transport.answered_alike, which are not
retried): rate limits and server crashes whose words name a quota, a chat template or a token cap in another sense
stay retried, and a cap that is the model's context stays a context limit. Pinned on the servers' own words, as
their users quote them, so that a wider matcher shows here before it turns an outage into a setup fault (the
ordinary rate limits and 500s: tests/test_backbone_ordinary_errors.py; here with `x-should-retry: true` too)."""

from __future__ import annotations

import json

import pytest

from tests.openai_stub import StubReply
from tests.test_backbone_http import good
from tests.test_settings_answers import _call

GEMINI_FREE_TIER = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": (
    "You exceeded your current quota, please check your plan and billing details. For more information on this "
    "error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. \n* Quota exceeded for metric: "
    "generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 5, model: gemini-2.5-flash\n"
    "Please retry in 17.3s.")}}
"""Gemini's per-minute limit of its free tier, OpenAI's words without its code (google-gemini/gemini-cli#8437,
continuedev/continue#9570)."""
VERTEX_VIA_LITELLM = {"error": {"message": (
    "Error code: 429 - {'error': {'code': 429, 'message': 'Quota exceeded for aiplatform.googleapis.com/"
    "online_prediction_tokens_per_minute_per_base_model with base model: anthropic-claude-3-haiku. Please submit a "
    "quota increase request.', 'status': 'RESOURCE_EXHAUSTED'}}"), "type": None, "param": None, "code": 500}}
"""A LiteLLM proxy relaying Vertex's per-minute quota as a 500 (BerriAI/litellm#4259)."""
LITELLM_RATE_LIMIT = {"error": {"message": (
    "LiteLLM Rate Limit Handler for rate limit type = team. Crossed TPM / RPM / Max Parallel Request Limit. current "
    "rpm: 1, rpm limit: 15, current tpm: 12260, tpm limit: 5000, current max_parallel_requests: 0, "
    "max_parallel_requests: 9223372036854775807"), "type": "auth_error", "param": "None", "code": "429"}}
"""A LiteLLM proxy's per-key or per-team rate limit (BerriAI/litellm#13898, #9440): a key with a budget and a TPM
limit, the limit's 429 beside the budget's (type `budget_exceeded`, graph.settings_faults): no budget words here."""
VLLM_CRASH = ("Traceback (most recent call last):\n  File \"/usr/lib/python3/site-packages/vllm/entrypoints/"
              "chat_utils.py\", line 1302, in apply_hf_chat_template\n    chat_template = resolve_hf_chat_template("
              "tokenizer, chat_template=None, tools=tools)\ntorch.OutOfMemoryError: CUDA out of memory. Tried to "
              "allocate 2.00 GiB; this function is not supported while the engine restarts\n")
"""A server's crash whose traceback passes through its chat-template code (a path, a function's name)."""
PROXY_PAGE = ("<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1><p>upstream said: "
              "insufficient_quota; tokenizer.chat_template is not set</p></body></html>")
"""A reverse proxy's page: only its title is the server's words (graph.server_words), not markup quoting a body."""
QUOTA_IN_A_TRACE = ("Traceback (most recent call last):\n  File \"/app/gateway/billing.py\", line 88, in "
                    "check_insufficient_quota\n    row = await db.fetch(account_id)\nasyncpg.exceptions."
                    "TooManyConnectionsError: sorry, too many clients already\n")
"""A gateway's crash whose traceback passes through its quota code (`check_insufficient_quota`): no answer that the
account has no credit (OpenAI's relayed error says so in its words: "You exceeded your current quota")."""


@pytest.mark.parametrize(("status", "body", "content_type"), [
    (429, json.dumps(GEMINI_FREE_TIER), "application/json"),
    (500, json.dumps(VERTEX_VIA_LITELLM), "application/json"),
    (429, json.dumps(LITELLM_RATE_LIMIT), "application/json"),
    (500, VLLM_CRASH, "text/plain"),
    (502, PROXY_PAGE, "text/html"),
    (500, QUOTA_IN_A_TRACE, "text/plain"),
    (500, json.dumps({"error": {"message": QUOTA_IN_A_TRACE, "type": "internal_server_error"}}), "application/json"),
], ids=["gemini_free_tier", "vertex_via_litellm", "litellm_rate_limit", "vllm_crash_in_template_code", "proxy_page",
        "quota_code_in_a_trace", "quota_code_in_a_trace_json"])
@pytest.mark.parametrize("told", [None, "true"], ids=["no_header", "x_should_retry"])
def test_a_rate_limit_or_crash_in_lookalike_words_is_retried(status: int, body: str, content_type: str,
                                                             told: str | None) -> None:
    headers = {"x-should-retry": told} if told else {}
    reply = StubReply(status=status, body=body, content_type=content_type, headers=headers)
    fault, sent = _call([reply, good("json_schema")])
    assert fault is None and sent == 2, (fault, sent)


VLLM_MAX_TOKENS = {"object": "error", "type": "BadRequestError", "param": None, "code": 400, "message": (
    "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens "
    "and your request has 2778 input tokens (8000 > 4096 - 2778). None")}
"""vLLM's cap check: the cap and the prompt together are over the context (as its users quote it), not a cap above
the server's own (TGI's `max_new_tokens` limit): the fault names the context's settings, a lower cap among them."""
OPENAI_MAX_TOKENS = {"error": {"message": "max_tokens is too large: 20480. This model supports at most 16384 "
                                          "completion tokens, whereas you provided 20480.",
                               "type": "invalid_request_error", "param": "max_tokens", "code": "invalid_value"}}
"""OpenAI's cap above the model's (tailcallhq/forgecode#1185, algorithmicsuperintelligence/optillm#4)."""


def test_vllm_s_cap_over_the_context_is_a_context_limit() -> None:
    fault, sent = _call([StubReply(status=400, body=json.dumps(VLLM_MAX_TOKENS))])
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "--max-model-len" in fault.message and "RAA_MAX_TOKENS" in fault.message, fault.message


def test_openai_s_cap_above_the_model_s_names_the_max_tokens_setting() -> None:
    fault, sent = _call([StubReply(status=400, body=json.dumps(OPENAI_MAX_TOKENS))])
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "lower RAA_MAX_TOKENS" in fault.message and "--max-model-len" not in fault.message, fault.message
