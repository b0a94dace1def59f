"""What a fault advises for a provider's own credit and structured-output answers (graph/settings_faults.py,
graph/setup_rejections.py), through the real ChatOpenAI path against a local OpenAI-compatible server, in the
providers' words as their users quote them:
- OpenRouter's 403 for an API key over its own credit limit ("Key limit exceeded (total limit). Manage it using
  https://openrouter.ai/settings/keys", MCPJam/inspector#1287; "Key limit exceeded. Manage it using
  https://openrouter.ai/keys", RooCodeInc/Roo-Code#515): the generic 403 advice (a key that may not use the model);
- OpenRouter's 402 for a completion token cap the credit left cannot cover ("This request requires more credits, or
  fewer max_tokens. You requested up to 32000 tokens, but can only afford 27342. ...", Gitlawb/openclaude#1125;
  "... To increase, visit https://openrouter.ai/settings/keys and create a key with a higher monthly limit",
  anomalyco/opencode#12219): advised as no credit, naming no max_tokens;
- DeepSeek's refusal of a json_object `response_format` ("deepseek-reasoner does not support Json Output.",
  gomate-community/TrustRAG#140; its generic "This response_format type is unavailable now"): named json_schema,
  which DeepSeek's API never serves."""

from __future__ import annotations

import pytest

from tests.test_gateway_budget_and_caps import _call

OPENROUTER_KEY_LIMIT = [
    {"error": {"message": "Key limit exceeded (total limit). Manage it using https://openrouter.ai/settings/keys",
               "code": 403}},
    {"error": {"message": "Key limit exceeded. Manage it using https://openrouter.ai/keys", "code": 403}},
    {"error": {"message": "Key limit exceeded (monthly limit). Manage it using https://openrouter.ai/settings/keys",
               "code": 403}}]  # gptme/gptme#1449


@pytest.mark.parametrize("body", OPENROUTER_KEY_LIMIT, ids=["total_limit", "earlier", "monthly_limit"])
def test_openrouter_s_key_limit_is_the_key_s_credit_limit_not_retried(body: dict) -> None:
    fault, sent = _call(403, body)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "may not use this endpoint or model" not in fault.message, fault.message
    assert "credit limit" in fault.message and "openrouter.ai/settings/keys" in fault.message, fault.message
    assert "RAA_API_KEY" in fault.message, fault.message


OPENROUTER_AFFORD = {"error": {"message": "This request requires more credits, or fewer max_tokens. You requested up "
                                          "to 32000 tokens, but can only afford 27342. To increase, visit "
                                          "https://openrouter.ai/settings/credits and upgrade to a paid account",
                               "code": 402, "metadata": {"provider_name": None}}, "user_id": "user_3D0"}
OPENROUTER_AFFORD_KEY = {"error": {"message": "This request requires more credits, or fewer max_tokens. You "
                                              "requested up to 32000 tokens, but can only afford 0. To increase, "
                                              "visit https://openrouter.ai/settings/keys and create a key with a "
                                              "higher monthly limit", "code": 402}}


OPENROUTER_AFFORD_EARLIER = {"error": {"message": "This request requires more credits, or fewer max_tokens. You "
                                                  "requested up to 225702 tokens, but can only afford 92985. To "
                                                  "increase, visit https://openrouter.ai/settings/credits and add "
                                                  "more credits", "code": 402}}
"""Its earlier ending, "... and add more credits" (QwenLM/qwen-code#73)."""
OPENROUTER_AFFORD_SHORT = {"error": {"message": "You requested up to 65535 tokens, but can only afford 16000.",
                                     "code": 402}}
"""Its words without the opening sentence, as a client quotes them (a 402 body in a provider's test)."""
OPENROUTER_AFFORD_WRAPPED = {"error": {"message": "This request requires more credits, or fewer\nmax_tokens. You "
                                                  "requested up to 32000 tokens, but can only afford 27342.",
                                       "code": 402}}
"""A line break inside the phrase (as a relay wraps it): `_AFFORD_MAX_TOKENS` was read with single spaces only."""


@pytest.mark.parametrize("body", [OPENROUTER_AFFORD, OPENROUTER_AFFORD_EARLIER, OPENROUTER_AFFORD_SHORT,
                                  OPENROUTER_AFFORD_WRAPPED], ids=["current", "earlier", "short", "wrapped"])
def test_openrouter_s_402_for_max_tokens_names_the_max_tokens_setting_and_credit(body: dict) -> None:
    fault, sent = _call(402, body)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "lower RAA_MAX_TOKENS" in fault.message and "credit" in fault.message, fault.message


OPENROUTER_AFFORD_KEY_SOME = {"error": {"message": "This request requires more credits, or fewer max_tokens. You "
                                                   "requested up to 32000 tokens, but can only afford 9120. To "
                                                   "increase, visit https://openrouter.ai/settings/keys and create a "
                                                   "key with a higher monthly limit", "code": 402}}
"""`OPENROUTER_AFFORD_KEY` with some tokens affordable: a lower cap may pass within the key's limit."""


def test_openrouter_s_402_under_a_key_limit_names_the_key_s_limit_and_max_tokens() -> None:
    fault, sent = _call(402, OPENROUTER_AFFORD_KEY_SOME)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "credit limit" in fault.message and "openrouter.ai/settings/keys" in fault.message, fault.message
    assert "RAA_MAX_TOKENS" in fault.message, fault.message


@pytest.mark.parametrize("body", [OPENROUTER_AFFORD_KEY, {"error": {
    "message": "You requested up to 65535 tokens, but can only afford 0.", "code": 402}}], ids=["key_limit", "short"])
def test_openrouter_s_402_affording_no_token_names_no_lower_max_tokens(body: dict) -> None:
    """"... but can only afford 0" (anomalyco/opencode#12219): no completion token cap passes, so "lower
    RAA_MAX_TOKENS" named a change that cannot pass; the credit (or the key's limit) is what to change."""
    fault, sent = _call(402, body)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "RAA_MAX_TOKENS" not in fault.message and "credit" in fault.message, fault.message


DEEPSEEK_REASONER_NO_JSON = {"error": {"message": "deepseek-reasoner does not support Json Output.",
                                       "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}}
DEEPSEEK_TYPE_UNAVAILABLE = {"error": {"message": "This response_format type is unavailable now",
                                       "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}}
"""DeepSeek's generic words for a `response_format` type it does not serve (for json_schema to deepseek-chat, as its
users quote it: ItzCrazyKns/Vane#969): they name the type, not the model, nor whether it thinks."""


@pytest.mark.parametrize("body", [DEEPSEEK_REASONER_NO_JSON, DEEPSEEK_TYPE_UNAVAILABLE], ids=["reasoner", "unavailable"])
def test_deepseek_s_json_object_refusal_names_no_json_schema(body: dict) -> None:
    """Its API serves no json_schema: a fix that names it sends the user to a second fault."""
    fault, sent = _call(400, body, replies=1, method="json_mode")
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "=json_schema" not in fault.message and "or json_schema" not in fault.message, fault.message


def test_deepseek_s_thinking_model_without_json_output_names_a_model_that_does_not_think() -> None:
    """A thinking model (the one its words name as giving no JSON output) takes no forced tool call either: what
    works is a DeepSeek model that does not think, with json_mode or function_calling."""
    fault, _ = _call(400, DEEPSEEK_REASONER_NO_JSON, replies=1, method="json_mode")
    assert fault is not None and "set RAA_MODEL to a DeepSeek model that does not think" in fault.message, fault
    assert fault.message.split("RAA_STRUCTURED_METHOD=", 1)[1].startswith("json_mode or function_calling"), fault


def test_deepseek_s_type_unavailable_says_only_what_its_words_establish() -> None:
    """"This response_format type is unavailable now" says the type sent (json_object) is not served; it names no
    model, and says nothing of thinking: the advice called it a model that "gives no JSON output", to be replaced by
    one that does not think, where the type is what the words name."""
    fault, _ = _call(400, DEEPSEEK_TYPE_UNAVAILABLE, replies=1, method="json_mode")
    assert fault is not None and fault.kind == "settings", fault
    assert "gives no JSON output" not in fault.message and "does not think (" not in fault.message, fault.message
    assert "json_object" in fault.message and "RAA_STRUCTURED_METHOD=function_calling" in fault.message, fault.message


DEEPSEEK_NO_JSON_VIA_GATEWAY = [
    {"error": {"message": "deepseek-reasoner does not support Json Output. (request id: 2025032312000012345678)",
               "type": "invalid_request_error", "param": "", "code": "invalid_request_error"}},
    {"error": {"message": "deepseek-reasoner does not support Json Output. (aiproxy: 7f3c9a1b2d)",
               "type": "aiproxy_error", "code": 400}}]
"""DeepSeek's words relayed by a gateway that appends its own request id to every error message: one-api and new-api
("%s (request id: %s)", their `MessageWithRequestId`), sealos' aiproxy ("%s (aiproxy: %s)")."""


@pytest.mark.parametrize("body", DEEPSEEK_NO_JSON_VIA_GATEWAY, ids=["one_api_request_id", "aiproxy_request_id"])
def test_deepseek_s_no_json_output_relayed_with_a_request_id_names_a_model_that_does_not_think(body: dict) -> None:
    """`DEEPSEEK_NO_JSON` is read as the whole message, up to its end: a gateway's request id after it was read as
    other words, and the fix named the structured methods the thinking model does not serve either."""
    fault, _ = _call(400, body, replies=1, method="json_mode")
    assert fault is not None and fault.kind == "settings", fault
    assert "set RAA_MODEL to a DeepSeek model that does not think" in fault.message, fault.message


QUOTING_THE_PHRASE = [
    "Invalid 'messages[1].content': the caption 'deepseek-reasoner does not support json output' was flagged",
    "Content policy: the request quotes deepseek-r1 does not support json output. in its text and was refused"]


@pytest.mark.parametrize("words", QUOTING_THE_PHRASE, ids=["quoted_in_a_validation_error", "inside_a_sentence"])
def test_deepseek_s_words_quoted_in_another_message_are_not_its_refusal(words: str) -> None:
    """`DEEPSEEK_NO_JSON` (graph.deepseek_words) was read anywhere in the words: a message quoting them (the clip's text, the model's own
    earlier answer) was advised as DeepSeek's refusal, naming a model to switch to."""
    fault, _ = _call(400, {"error": {"message": words, "type": "invalid_request_error"}}, replies=1,
                     method="json_mode")
    assert fault is None or "DeepSeek model that does not think" not in fault.message, fault.message


def test_another_server_s_per_key_rate_limit_is_still_retried() -> None:
    """A gateway's throttle in its own words, "API key limit exceeded (60/minute)." (Django REST framework's
    `Throttled`, a 429 a self-hosted proxy may send), is a rate limit a wait passes: `_KEY_LIMIT` read any "key limit
    exceeded" as OpenRouter's spent credit limit, so it was "settings" at the first try, never retried."""
    limit = {"detail": "API key limit exceeded (60/minute)."}
    fault, sent = _call(429, limit, replies=1)
    assert fault is None and sent == 2, fault


def test_another_server_s_key_limit_is_not_advised_as_openrouter_s() -> None:
    """A 403 in another server's words that names no OpenRouter key page keeps the generic 403 advice: the fix
    `_KEY_LIMIT` gave sends the user to https://openrouter.ai/settings/keys, a site they may not use."""
    fault, sent = _call(403, {"error": {"message": "API key limit exceeded for this project", "code": 403}})
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "openrouter.ai" not in fault.message, fault.message
