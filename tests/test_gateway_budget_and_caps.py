"""Answers the same request meets again, in the servers' own words (graph/settings_faults.py,
graph/setup_rejections.py), through the real ChatOpenAI path against a local OpenAI-compatible server:
- a LiteLLM proxy's spent budget where its error `type` is not `budget_exceeded` (a proxy relaying another's budget
  error, `type` None; its `max_budget_limiter` hook's "Max budget limit reached.", `type` "None"): retried as a 429 and
  then "transport", or "refused" as a 400, where it is an account with no budget left ("settings", not retried);
- a completion token cap above the model's in DeepSeek's, Volcengine Ark's (Doubao) and DashScope's words: "refused" of
  no known cause, where it is the max_tokens limit, naming RAA_MAX_TOKENS;
- DeepSeek's answer for a `response_format` of type json_schema, which it does not serve: "refused", where it names
  another structured method."""

from __future__ import annotations

import json

import pytest

from graph.backbone import BackboneFault, Usage
from graph.server_limits import limit_kind
from graph.setup_rejections import _STRUCTURED, unsupported_part
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import good, make, run
from tests.test_settings_answers import _status

LITELLM_RELAYED_BUDGET = {"error": {
    "message": "litellm.BadRequestError: OpenAIException - Budget has been exceeded! Current cost: 14.2, Max budget: "
               "100. Received Model Group=meta.llama3-8b-instruct-v1:0\nAvailable Model Group Fallbacks=None",
    "type": None, "param": None, "code": "400"}}
"""A LiteLLM proxy relaying another proxy's spent budget: the budget words inside its own message, `type` None (as a
LiteLLM maintainer quotes it: BerriAI/litellm#14144)."""
LITELLM_MAX_BUDGET_HOOK = {"error": {"message": "Max budget limit reached.", "type": "None", "param": "None",
                                     "code": "429"}}
"""A LiteLLM proxy's `max_budget_limiter` pre-call hook (litellm/proxy/hooks/max_budget_limiter.py raises
`HTTPException(status_code=429, detail="Max budget limit reached.")`, which the proxy answers as a ProxyException
whose `type` and `param` default to the string "None")."""
LITELLM_END_USER_BUDGET = {"error": {
    "message": "ExceededBudget: End User=ishaan3 over budget. Spend=0.000887, Budget=0.0001", "type": "None",
    "param": "None", "code": "400"}}
"""A LiteLLM proxy's end user over budget (litellm/proxy/auth/auth_checks.py: "ExceededBudget: End User=... over
budget. Spend=..., Budget=..."), here without its `budget_exceeded` type (relayed, or an older proxy)."""
LITELLM_TOKEN_BUDGET = {"error": {
    "message": "Authentication Error, ExceededTokenBudget: Current spend for token: 7.2e-05; Max Budget for Token: "
               "2e-07", "type": "auth_error", "param": "None", "code": "401"}}
"""An older LiteLLM proxy's API key over its budget ("ExceededTokenBudget: Current spend for token: ...; Max Budget
for Token: ...", raised in its key auth), sent as a 401, a 400 or a 429 by its versions: read as a bad API key, a
refusal, or a rate limit (retried, then "transport")."""
LITELLM_MODEL_BUDGET = {"error": {
    "message": "Authentication Error, ExceededModelBudget: Current spend for model: 0.0042; Max Budget for Model: "
               "0.001",
    "type": "auth_error", "param": "None", "code": "401"}}
"""The same proxy's API key over its budget for one model (its key's `model_max_budget`: "ExceededModelBudget: Current
spend for model: ...; Max Budget for Model: ...", raised beside `ExceededTokenBudget` in its key auth, as its own test
asserts "Authentication Error, ExceededModelBudget:"): read as a bad API key (401) or retried as a rate limit (429)."""


def _call(status: int, body: dict, replies: int = 3, method: str = "json_schema") -> tuple[BackboneFault | None, int]:
    """The fault (None: a valid reply came) of a `method` call whose server answers `replies` times with `body`, then
    well; and how many requests it got (2 retries allowed)."""
    with OpenAIStub([StubReply(status=status, body=json.dumps(body))] * replies + [good(method)]) as stub:
        try:
            run(make(stub, method, max_retries=2), Usage())
        except BackboneFault as fault:
            return fault, len(stub.requests)
    return None, len(stub.requests)


@pytest.mark.parametrize(("status", "body"), [(400, LITELLM_RELAYED_BUDGET), (429, LITELLM_RELAYED_BUDGET),
                                              (429, LITELLM_MAX_BUDGET_HOOK), (400, LITELLM_END_USER_BUDGET),
                                              (429, LITELLM_END_USER_BUDGET), (400, LITELLM_TOKEN_BUDGET),
                                              (401, LITELLM_TOKEN_BUDGET), (429, LITELLM_TOKEN_BUDGET),
                                              (401, LITELLM_MODEL_BUDGET), (429, LITELLM_MODEL_BUDGET)],
                         ids=["relayed_400", "relayed_429", "max_budget_hook_429", "end_user_400", "end_user_429",
                              "token_budget_400", "token_budget_401", "token_budget_429", "model_budget_401",
                              "model_budget_429"])
def test_a_litellm_budget_in_its_words_is_no_credit_not_retried(status: int, body: dict) -> None:
    fault, sent = _call(status, body)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message and "RAA_API_KEY" in fault.message, fault.message
    assert "refused the API key" not in fault.message and "budget" in fault.message.split("; ", 1)[1], fault.message


def test_a_rate_limit_that_names_no_budget_is_still_retried() -> None:
    """The LiteLLM proxy's own rate limit (its `type` "None" too) still waits and tries again."""
    limit = {"error": {"message": "Max parallel request limit reached. Hit limit for api_key: 1234.",
                       "type": "None", "param": "None", "code": "429"}}
    fault, sent = _call(429, limit, replies=1)
    assert fault is None and sent == 2, fault


DEEPSEEK_MAX_TOKENS = {"error": {"message": "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
                                 "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}}
"""DeepSeek's 400 for a cap above the model's (as its users quote it: deepseek-ai/DeepSeek-V3#69,
Gitlawb/openclaude#35)."""
ARK_MAX_COMPLETION_TOKENS = {"error": {
    "code": "InvalidParameter", "message": "The parameter `max_completion_tokens` specified in the request are not "
    "valid: integer above maximum value, expected a value <= 12288, but got 16384 instead. Request id: "
    "021787281042180b566464da517b102b4cb09cdfd60e7ee3d23dd", "param": "max_completion_tokens", "type": "BadRequest"}}
"""Volcengine Ark's (Doubao's) 400 for a cap above the model's (as its users quote it: Gitlawb/openclaude#331,
xuanyustudio/LocalMiniDrama#39); its `max_tokens` one reads alike (langgenius/dify#14376)."""
DASHSCOPE_MAX_TOKENS = {"error": {"message": "<400> InternalError.Algo.InvalidParameter: Range of max_tokens should "
                                             "be [1, 8192]", "type": "invalid_request_error", "param": None,
                                  "code": "invalid_parameter_error"}}
"""DashScope's (Qwen's) words for it (as its users quote them: open-webui/open-webui#10507)."""


@pytest.mark.parametrize("body", [DEEPSEEK_MAX_TOKENS, ARK_MAX_COMPLETION_TOKENS, DASHSCOPE_MAX_TOKENS],
                         ids=["deepseek", "ark", "dashscope"])
def test_a_cap_above_the_model_s_in_the_servers_words_names_the_max_tokens_setting(body: dict) -> None:
    fault, sent = _call(400, body, replies=1)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "lower RAA_MAX_TOKENS" in fault.message and "--max-model-len" not in fault.message, fault.message


@pytest.mark.parametrize("words", [
    "The parameter `max_tokens` specified in the request are not valid: integer above maximum value, expected a "
    "value <= 4096, but got 8192 instead. Request id: 0217",
    "The parameter max_tokens specified in the request is not valid: integer above maximum value, expected a value "
    "<= 32768, but got 64000 instead. Request id: 0217"])
def test_ark_s_max_tokens_wordings_are_the_max_tokens_limit(words: str) -> None:
    """Ark's words with and without the parameter's backticks (langgenius/dify#14376, yiliqi78/TOKENICODE#3)."""
    assert limit_kind(_status(400, {"error": {"code": "InvalidParameter", "message": words}})) == "max_tokens"


@pytest.mark.parametrize("words", [
    "The parameter `max_tokens` specified in the request are not valid: max_tokens and max_completion_tokens "
    "cannot be set at the same time. Request id: 0217",
    "Invalid 'messages[0].content': string too long. Expected a string with maximum length 1048576",
    "The parameter `temperature` specified in the request are not valid: number above maximum value, expected a "
    "value <= 2, but got 3 instead."])
def test_other_invalid_parameters_are_no_max_tokens_limit(words: str) -> None:
    assert limit_kind(_status(400, {"error": {"code": "InvalidParameter", "message": words}})) is None


DEEPSEEK_NO_JSON_SCHEMA = [
    {"error": {"message": "This response_format type is unavailable now", "type": "invalid_request_error",
               "param": None, "code": "invalid_request_error"}},
    {"error": {"message": "response_format.type `json_schema` is unavailable now", "type": "invalid_request_error",
               "param": None, "code": "invalid_request_error"}}]
"""DeepSeek's 400 for a json_schema `response_format` (it serves json_object only): its current words
(llm-exe/llm-exe#662, UKGovernmentBEIS/inspect_ai#4916) and its earlier ones (as BerriAI/litellm#31466 quotes them)."""


@pytest.mark.parametrize("body", DEEPSEEK_NO_JSON_SCHEMA, ids=["current", "earlier"])
def test_deepseek_s_json_schema_rejection_names_another_method(body: dict) -> None:
    fault, sent = _call(400, body, replies=1)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "RAA_STRUCTURED_METHOD=json_mode or function_calling" in fault.message, fault.message


def test_unavailable_words_are_structured_only_after_the_response_format() -> None:
    assert _STRUCTURED.search("this response_format type is unavailable now")
    assert not _STRUCTURED.search("the model is unavailable now, response_format aside")


LLAMA_CPP_PARSE_ERROR = {"error": {"code": 500, "type": "server_error", "message":
                                   'Failed to parse input at pos 0: {"observation": "the slide on screen reads '
                                   '\\"Budget has been exceeded! Current cost: 12\\"", "score": '}}
"""llama.cpp's 500 for a reply its parser could not read, quoting the model's own output ("Failed to parse input at
pos N: <output>", ggml-org/llama.cpp#20761, #24644): a clip whose screen shows a budget, read out by the model, is
no LiteLLM budget. The next sample may parse: retried, as any 500."""


def test_budget_words_in_the_model_s_output_quoted_by_a_500_are_retried_not_no_credit() -> None:
    fault, sent = _call(500, LLAMA_CPP_PARSE_ERROR, replies=1)
    assert fault is None and sent == 2, fault


@pytest.mark.parametrize("words", [
    "1 validation error for ChatCompletionRequest: messages.2.content: the frame budget has been exceeded, so the "
    "answer rests on 8 frames",
    "Invalid 'messages[3].content': I exceeded budget for frames on the first view; string too long",
    "Invalid 'messages[3].content': the agent's max budget limit reached 48 frames; string too long"])
def test_budget_words_inside_a_quoted_prompt_are_not_no_credit(words: str) -> None:
    """A 400 quoting the request (the model's earlier answer, a tool's frame budget note): "refused", as before."""
    fault, sent = _call(400, {"error": {"message": words, "type": "invalid_request_error"}}, replies=1)
    assert fault is not None and fault.kind == "refused" and sent == 1, (fault, sent)


def test_a_structured_backend_temporarily_unavailable_is_retried_not_a_refused_method() -> None:
    """A 500 (read for a part's rejection: llama.cpp sends those as 500s) saying the structured-output path is down
    for now: the next try may pass, so it is retried, not 'settings' naming another method."""
    down = {"error": {"code": 500, "type": "server_error", "message":
                      "response_format json_schema: the grammar worker is temporarily unavailable, please retry"}}
    fault, sent = _call(500, down, replies=1)
    assert fault is None and sent == 2, fault


def test_a_settings_fault_s_fix_follows_the_server_s_words_without_a_stray_full_stop() -> None:
    """"Max budget limit reached.; HTTP 429: ..." read as two sentences, as the connection hint did before
    `graph.server_words.clause_joined`: the settings fault joins its fix alike."""
    fault, _ = _call(429, LITELLM_MAX_BUDGET_HOOK, replies=1)
    assert fault is not None and ".;" not in fault.message, fault
    assert "Max budget limit reached; HTTP 429: the API key's account" in fault.message, fault.message


@pytest.mark.parametrize("words", [
    "calling the model with response_format json_schema failed: 503 service unavailable",
    "structured output worker is temporarily unavailable, please retry"])
def test_a_structured_part_named_before_a_service_unavailable_is_no_rejection(words: str) -> None:
    """HTTP's own reason phrase, or a path down for now, after a structured part's name (another chat model's 5xx
    `ModelAPIError` is read for a rejection, whatever its status): no rejection of the method."""
    assert not _STRUCTURED.search(words)


LITELLM_RELAYED_TEAM_BUDGET = {"error": {
    "message": "litellm.BadRequestError: OpenAIException - Team=99c74652-6e33-4dbd-93f3-5b545da15ade over budget. "
               "Spend=10.52, Budget=10.0. Received Model Group=gpt-4o\nAvailable Model Group Fallbacks=None",
    "type": None, "param": None, "code": "400"}}
"""A LiteLLM proxy's spent team budget in its words of late 2024 (litellm/proxy/auth/auth_checks.py `common_checks`
raised `BudgetExceededError(message=f"Team={team_id} over budget. Spend=..., Budget=...")`), relayed by another proxy:
`type` None, no "ExceededBudget:" before it."""


@pytest.mark.parametrize("status", [400, 429])
def test_a_litellm_team_budget_in_its_earlier_words_is_no_credit(status: int) -> None:
    fault, sent = _call(status, LITELLM_RELAYED_TEAM_BUDGET)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message and "RAA_API_KEY" in fault.message, fault.message


DEEPSEEK_THINKING_TOOL_CHOICE = {"error": {"message": "Thinking mode does not support this tool_choice",
                                           "type": "invalid_request_error", "param": None,
                                           "code": "invalid_request_error"}}
"""DeepSeek's 400 for a forced tool call (`tool_choice` naming a function, or "required") to a model in thinking mode,
the V4 models' default (as its users quote it: deepseek-ai/DeepSeek-V3#1376, tickernelz/opencode-mem#253,
duolahypercho/codex-router#106): function_calling's call, refused for every clip."""


def test_deepseek_s_thinking_mode_refusing_a_forced_tool_call_names_another_method() -> None:
    fault, sent = _call(400, DEEPSEEK_THINKING_TOOL_CHOICE, replies=1, method="function_calling")
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "RAA_STRUCTURED_METHOD=json_mode " in fault.message, fault.message  # DeepSeek serves no json_schema
    assert "does not serve tool calls" not in fault.message, fault.message  # it does: a tool round's are served


TOOL_ROUND = {"tools": [{"type": "function", "function": {"name": "zoom"}}], "tool_choice": "auto"}


@pytest.mark.parametrize("sent", [TOOL_ROUND, {"response_format": {"type": "json_object"}}, {}],
                         ids=["tool_round", "json_mode", "nothing"])
def test_thinking_mode_s_tool_choice_words_for_a_request_without_a_forced_call_are_no_rejected_part(sent: dict) -> None:
    """No forced call was sent: the words are no rejection of a part of this request (\"refused\", as before)."""
    assert unsupported_part(_status(400, DEEPSEEK_THINKING_TOOL_CHOICE), sent) is None
