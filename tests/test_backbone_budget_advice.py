"""What a spent LiteLLM budget's fault tells the user to change (graph/settings_faults.py), through the real ChatOpenAI
path against a local OpenAI-compatible server:
- an end user over budget, which LiteLLM answers as a 401 `auth_error`: the 401 was read first, and the fault sent the
  user to check the API key (a key that works) where the budget is spent;
- a deployment's (model's) budget, which the proxy's admin sets in its config: advised as the API key's account."""

from __future__ import annotations

from tests.test_gateway_budget_and_caps import _call

LITELLM_END_USER_401 = {"error": {
    "message": "ExceededBudget: End User=ishaan3 over budget. Spend=0.0008869999999999999, Budget=0.0001",
    "type": "auth_error", "param": "None", "code": 401}}
"""A LiteLLM proxy's answer for an end user (the request's `user`) over budget, as its budget docs show it
(BerriAI/litellm docs/my-website/docs/proxy/users.md): HTTP 401, type `auth_error`."""
LITELLM_BAD_KEY_401 = {"error": {
    "message": "Authentication Error, Invalid proxy server token passed. Received API Key = sk-...1234, Key Hash "
               "(Token) =e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855. Unable to find token in "
               "cache or `LiteLLM_VerificationTokenTable`", "type": "auth_error", "param": "None", "code": "401"}}
"""A LiteLLM proxy's 401 for a key it does not know (its user_api_key_auth's words)."""
LITELLM_DEPLOYMENT_BUDGET = {"error": {
    "message": "No deployments available - crossed budget: Exceeded budget for deployment model_name: gpt-4o, "
               "litellm_params.model: openai/gpt-4o, model_id: dbe80f2fe2b2465f7bfa9a5e77e0f143a2eb3f7d167a8b55fb7fe31"
               "aed62587f: 0.00015250000000000002 >= 1e-12", "type": "None", "param": "None", "code": "429"}}
"""A LiteLLM proxy whose router's budget for the model's deployment (`max_budget` in its config's `model_list`) is
spent, as its budget-routing docs show it (BerriAI/litellm docs/my-website/docs/proxy/provider_budget_routing.md)."""


def test_an_end_user_budget_sent_as_a_401_is_a_budget_fault_not_the_api_key() -> None:
    fault, sent = _call(401, LITELLM_END_USER_401)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message and "budget" in fault.message.split("; ", 1)[1], fault.message
    assert "refused the API key" not in fault.message, fault.message
    # the generic credit advice ("... no credit left (its balance, quota or budget): top it up, or check RAA_API_KEY")
    # says "budget" too: the end user's budget is named, and the key is not the cause
    fix = fault.message.split("; ", 1)[1]
    assert "end user" in fix and "API key's account" not in fix and "is not the cause" in fix, fault.message


def test_an_ordinary_401_keeps_its_api_key_advice() -> None:
    fault, sent = _call(401, LITELLM_BAD_KEY_401)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "HTTP 401: the endpoint refused the API key: check RAA_API_KEY" in fault.message, fault.message
    assert "no credit" not in fault.message, fault.message


def test_a_deployment_budget_is_advised_as_the_proxy_s_model_budget_not_the_key_s() -> None:
    fault, sent = _call(429, LITELLM_DEPLOYMENT_BUDGET)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    fix = fault.message.split("; ", 1)[1]
    assert "deployment" in fix and "proxy" in fix and "RAA_MODEL" in fix, fault.message
    assert "API key's account" not in fix and "RAA_API_KEY" not in fix, fault.message


LITELLM_PROVIDER_BUDGET_DOCS = {"error": {
    "message": "No deployments available - crossed budget for provider: Exceeded budget for provider openai: "
               "0.0007350000000000001 >= 1e-12", "type": "None", "param": "None", "code": "429"}}
"""A LiteLLM proxy whose router's budget for a provider is spent, in the words its budget-routing docs show
(BerriAI/litellm docs/my-website/docs/proxy/provider_budget_routing.md): "crossed budget for provider:", not
"crossed budget:"."""
LITELLM_TAG_BUDGET = {"error": {
    "message": "No deployments available - crossed budget: Exceeded budget for tag='product:chat-bot', "
               "tag_spend=0.00015250000000000002, tag_budget_limit=1e-12", "type": "None", "param": "None",
    "code": "429"}}
"""A LiteLLM proxy whose router's budget for a request tag is spent (the same docs)."""
LITELLM_END_USER_MODEL_BUDGET = {"error": {
    "message": "LiteLLM End User: ishaan3, exceeded budget for model=gpt-4o", "type": "budget_exceeded",
    "param": None, "code": "400"}}
"""A LiteLLM proxy's end user over its budget for one model (litellm/proxy/hooks/model_max_budget_limiter.py's
`is_end_user_within_model_budget`: "LiteLLM End User: <id>, exceeded budget for model=<model>")."""


def test_a_provider_budget_in_the_docs_words_is_the_proxy_s_not_the_key_s() -> None:
    fault, sent = _call(429, LITELLM_PROVIDER_BUDGET_DOCS)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    fix = fault.message.split("; ", 1)[1]
    assert "provider" in fix and "provider_budget_config" in fix, fault.message
    assert "API key's account" not in fix, fault.message


def test_a_tag_budget_s_fix_reads_as_a_list_of_ways_out() -> None:
    fault, _ = _call(429, LITELLM_TAG_BUDGET)
    assert fault is not None and fault.kind == "settings", fault
    assert "wait for it to reset, or have the admin raise it" in fault.message, fault.message


def test_an_end_user_s_model_budget_is_the_end_user_s_not_the_key_s() -> None:
    fault, sent = _call(400, LITELLM_END_USER_MODEL_BUDGET)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    fix = fault.message.split("; ", 1)[1]
    assert "end user" in fix and "API key's account" not in fix, fault.message
