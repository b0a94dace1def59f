"""Answers that every request of a run meets alike, whatever their status: a model served without a chat template and
an account without credit (also as a 500, which was retried and then reported "transport"), OpenAI's no-credit words
relayed by a gateway under another code, a model the chat-completions route does not serve (a 404 that is no wrong
URL), and TGI's cap on `max_new_tokens` (a limit of its setup, not the model's answer about the clip)."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from langchain_core.exceptions import ModelInvalidRequestError, ModelRateLimitError

from graph.backbone import BackboneFault, Usage
from graph.transport import BACKBONE_NAMES, is_transient, settings_problem
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_chat_template import HF_NO_TEMPLATE
from tests.test_backbone_http import MSGS, Verdict, good, make, run
from tests.test_backbone_scripted import _bb

OPENAI_NO_CREDIT = ("You exceeded your current quota, please check your plan and billing details. For more "
                    "information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/"
                    "api-errors.")
LITELLM_NO_CREDIT = {"error": {"message": "litellm.RateLimitError: RateLimitError: OpenAIException - Error code: 429 - "
                               "{'error': {'message': '" + OPENAI_NO_CREDIT + "', 'type': 'insufficient_quota', "
                               "'param': None, 'code': 'insufficient_quota'}}", "type": "throttling_error",
                               "param": None, "code": "429"}}
"""How a LiteLLM proxy relays OpenAI's answer for an account without credit: its own `code` ("429", the status) and
type, OpenAI's code only inside the message (as LiteLLM's users quote it: OpenHands/OpenHands#998)."""
RESPONSES_ONLY = {"error": {"message": "This model is only supported in v1/responses and not in v1/chat/completions.",
                            "type": "invalid_request_error", "param": "model", "code": None}}
"""OpenAI's 404 for a model served by the Responses API only (as its users quote it: n8n-io/n8n#18352,
pgadmin-org/pgadmin4#9795)."""
NOT_A_CHAT_MODEL = {"error": {"message": "This is not a chat model and thus not supported in the v1/chat/completions "
                              "endpoint. Did you mean to use v1/completions?", "type": "invalid_request_error",
                              "param": "model", "code": None}}
TGI_MAX_NEW_TOKENS = {"error": "Input validation error: `max_new_tokens` must be <= 1024. Given: 4096",
                      "error_type": "validation"}


def _call(replies: list[StubReply], max_retries: int = 2) -> tuple[BackboneFault | None, int]:
    with OpenAIStub(replies) as stub:
        try:
            run(make(stub, "json_schema", max_retries=max_retries), Usage())
        except BackboneFault as fault:
            return fault, len(stub.requests)
    return None, len(stub.requests)


@pytest.mark.parametrize("reply", [StubReply(status=500, content=HF_NO_TEMPLATE),
                                   StubReply(status=500, content=OPENAI_NO_CREDIT + " (insufficient_quota)")],
                         ids=["no_template", "no_credit"])
def test_a_500_that_every_request_meets_alike_is_settings_at_once(reply: StubReply) -> None:
    """A server that raises transformers' template error as a 500 (exo-explore/exo#897, as its users report it), a
    gateway that relays an account without credit as a 500 (lm-sys/RouteLLM#14, as its users report it): it was
    retried `max_retries` times, then "transport", naming nothing to change."""
    fault, sent = _call([reply] * 3 + [good("json_schema")])
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "RAA_MODEL" in fault.message or "credit" in fault.message, fault.message


def test_a_gateway_relaying_no_credit_under_its_own_code_is_not_retried() -> None:
    fault, sent = _call([StubReply(status=429, body=json.dumps(LITELLM_NO_CREDIT))] * 3 + [good("json_schema")])
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message, fault.message


def test_a_rate_limit_saying_retry_is_still_retried() -> None:
    """The words of a quota per minute (Vertex's RESOURCE_EXHAUSTED) are a rate limit, not an empty account."""
    limit = {"error": {"message": "Quota exceeded for aiplatform.googleapis.com/online_prediction_tokens_per_minute",
                       "type": None, "code": "429"}}
    fault, sent = _call([StubReply(status=429, body=json.dumps(limit)), good("json_schema")])
    assert fault is None and sent == 2, fault


AZURE_OTHER_OPERATION = {"error": {"code": "OperationNotSupported", "message": (
    "The chatCompletion operation does not work with the specified model, gpt-5.1-codex. Please choose different "
    "model and try again. You can learn more about which models can be used with each operation here: "
    "https://go.microsoft.com/fwlink/?linkid=2197993.")}}
"""Azure OpenAI's 400 for a deployment chat completions do not serve (a Responses-only or embedding model, as its
users quote it: langchain-ai/langchain-azure#228, run-llama/llama_index#16503): "refused" for every clip, the
model's answer and no outage."""


@pytest.mark.parametrize(("status", "body"), [(404, RESPONSES_ONLY), (404, NOT_A_CHAT_MODEL),
                                              (400, AZURE_OTHER_OPERATION)],
                         ids=["responses_only", "not_a_chat_model", "azure_other_operation"])
def test_a_model_the_chat_route_does_not_serve_is_named_not_the_url(status: int, body: dict) -> None:
    fault, sent = _call([StubReply(status=status, body=json.dumps(body))])
    assert fault is not None and fault.kind == "settings" and sent == 1, fault
    assert "RAA_MODEL" in fault.message and "chat completions" in fault.message, fault.message
    assert "ends in /v1" not in fault.message, fault.message  # the URL is right: it answered about the model


def test_tgi_s_cap_on_new_tokens_names_the_max_tokens_setting() -> None:
    fault, sent = _call([StubReply(status=422, body=json.dumps(TGI_MAX_NEW_TOKENS))])
    assert fault is not None and fault.kind == "settings" and sent == 1, fault
    assert "RAA_MAX_TOKENS" in fault.message and "--max-total-tokens" in fault.message, fault.message


def _status(status: int, body: object, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://server/v1/chat/completions")
    response = httpx.Response(status, request=request, headers=headers)
    message = body["error"]["message"] if isinstance(body, dict) and isinstance(body.get("error"), dict) else ""
    return openai.APIStatusError(f"Error code: {status} - {message}", response=response, body=body)


def test_x_should_retry_true_does_not_retry_a_missing_template() -> None:
    exc = _status(500, {"error": {"message": HF_NO_TEMPLATE}}, {"x-should-retry": "true"})
    assert not is_transient(exc)
    assert settings_problem(exc, BACKBONE_NAMES) is not None


LITELLM_BUDGET = {"error": {"message": "Budget has been exceeded! Current cost: 10.51, Max budget: 10.0",
                            "type": "budget_exceeded", "param": None, "code": "429"}}
"""A LiteLLM proxy's key, team or user whose budget is spent: type `budget_exceeded`, as a 429 (BerriAI/litellm#36729)
or, in the versions before, a 400 (BerriAI/litellm#4139): no wait within a run refills it."""
ANTHROPIC_NO_CREDIT = {"type": "error", "error": {
    "type": "invalid_request_error", "message": "Your credit balance is too low to access the Anthropic API. Please go "
                                               "to Plans & Billing to upgrade or purchase credits."}}
"""Anthropic's account without credit, a 400 (as its users quote it: anthropics/claude-code#4208)."""


@pytest.mark.parametrize(("status", "body"), [(429, {**LITELLM_BUDGET}),
                                              (400, {"error": {**LITELLM_BUDGET["error"], "code": "400"}}),
                                              (400, ANTHROPIC_NO_CREDIT)],
                         ids=["litellm_budget_429", "litellm_budget_400", "anthropic_400"])
def test_a_spent_budget_or_balance_is_settings_not_retried_nor_the_model_s_answer(status: int, body: dict) -> None:
    """As a 429 it was retried `max_retries` times, then "transport" naming nothing to change; as a 400, "refused":
    the model's answer about every clip, no outage."""
    fault, sent = _call([StubReply(status=status, body=json.dumps(body))] * 3 + [good("json_schema")])
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "no credit" in fault.message and "RAA_API_KEY" in fault.message, fault.message


@pytest.mark.parametrize(("error", "words"), [
    (ModelRateLimitError, "Error code: 429 - {'error': {'message': '" + OPENAI_NO_CREDIT + "', 'type': "
                          "'insufficient_quota', 'code': 'insufficient_quota'}}"),
    (ModelInvalidRequestError, ANTHROPIC_NO_CREDIT["error"]["message"])], ids=["rate_limit_error", "invalid_request"])
def test_another_chat_model_s_empty_account_is_settings_not_retried(error: type, words: str) -> None:
    """Another chat model than ChatOpenAI raises LangChain's `ModelError`s, with the provider's words and no HTTP
    status: an empty account was retried as a rate limit (then "transport") or "refused" for every clip."""
    bb, model = _bb([error(words)] * 3 + [{"label": "a", "score": 2}])
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == "settings" and len(model.calls) == 1, (info.value, len(model.calls))
    assert "no credit" in info.value.message, info.value.message
