"""Ordinary errors in the servers' real words keep their kind beside the setup faults the matchers read
(graph/setup_rejections.py, graph/transport.py): a rate limit is retried (only an account without credit is not), a
content policy's 400 is the model's answer ("refused"), and a 500 that merely mentions tools, a temperature, a
context or images is a transport fault, retried, not a "settings" fault never retried. A matcher reading too broadly
would turn an outage into a setting to change (no retry, a wrong hint) or the model's answer into an outage.
Through the real ChatOpenAI path against the local stub server, the request carrying images, structured output, a
temperature and a tool round's tools alike: each matcher has what it reads."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from graph.backbone import BackboneFault, Usage
from graph.schemas import Fault
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import good, make, run

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}
WITH_IMAGES = [SystemMessage(content="# stage: judge\nJudge."),
               HumanMessage(content=[{"type": "text", "text": "Is it ok?"}, IMAGE])]

RATE_LIMITS = {  # 429s as the services send them (their users quote them in issues)
    "openai_tpm": {"error": {"message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): "
                                        "Limit 30000, Used 29000, Requested 1500. Please try again in 1s. Visit "
                                        "https://platform.openai.com/account/rate-limits to learn more.",
                             "type": "tokens", "param": None, "code": "rate_limit_exceeded"}},
    "openai_request_too_large": {"error": {
        "message": "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, "
                   "Requested 45000. The input or output tokens must be reduced in order to run successfully.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}},
    "azure": {"error": {"code": "429", "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI "
                        "API version 2024-02-15-preview have exceeded token rate limit of your current OpenAI S0 "
                        "pricing tier. Please retry after 6 seconds. Please go here: https://aka.ms/oai/quotaincrease "
                        "if you would like to further increase the default rate limit."}},
    "azure_rate_limit_reached": {"error": {"code": "RateLimitReached", "message": "Your requests to gpt-4o for gpt-4o "
                                           "in East US have exceeded the call rate limit for your current AIServices "
                                           "S0 pricing tier. Please retry after 7 seconds."}},
    "gemini_free_tier": [{"error": {"code": 429, "message": "You exceeded your current quota, please check your plan "
                                    "and billing details.", "status": "RESOURCE_EXHAUSTED"}}],
    "anthropic_compatible": {"type": "error", "error": {"type": "rate_limit_error", "message": "This request would "
                             "exceed the rate limit for your organization of 40,000 input tokens per minute."}},
    "tgi_overloaded": {"error": "Model is overloaded", "error_type": "overloaded"},
}


def _call(replies: list[StubReply]) -> tuple[BackboneFault | None, int]:
    with OpenAIStub(replies) as stub:
        try:
            run(make(stub, "json_schema", max_retries=1), Usage(), WITH_IMAGES)
        except BackboneFault as fault:
            return fault, len(stub.requests)
    return None, len(stub.requests)


@pytest.mark.parametrize("body", list(RATE_LIMITS.values()), ids=list(RATE_LIMITS))
def test_a_rate_limit_is_retried_whatever_its_words(body) -> None:
    """Gemini's free tier says "You exceeded your current quota" as OpenAI's account without credit does, but with no
    `insufficient_quota` code: a rate limit, retried (`graph.settings_faults.no_credit` reads the code `insufficient_quota`, not those words)."""
    fault, sent = _call([StubReply(status=429, body=json.dumps(body)), good("json_schema")])
    assert fault is None and sent == 2, fault


@pytest.mark.parametrize("body", list(RATE_LIMITS.values())[:2], ids=list(RATE_LIMITS)[:2])
def test_an_exhausted_rate_limit_is_an_outage_of_transport(body) -> None:
    fault, sent = _call([StubReply(status=429, body=json.dumps(body))] * 2)
    assert fault is not None and fault.kind == "transport" and sent == 2, fault
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


SERVER_ERRORS = {  # 500s whose words mention a part of the request in another sense
    "vllm_tool_parser": "Error in extracting tool call from response: the tools' arguments were malformed",
    "sampling": "RuntimeError: probability tensor contains either inf, nan or element < 0 (temperature 0)",
    "kv_cache": "CUDA out of memory while allocating the context window's KV cache",
    "vision_encoder": "Error in vision encoder: image input of shape (3, 448, 448) raised an exception",
    "openai": "The server had an error while processing your request. Sorry about that!",
}


@pytest.mark.parametrize("text", list(SERVER_ERRORS.values()), ids=list(SERVER_ERRORS))
def test_a_500_mentioning_a_part_of_the_request_is_retried_as_transport(text: str) -> None:
    fault, sent = _call([StubReply(status=500, content=text)] * 2)
    assert fault is not None and fault.kind == "transport" and sent == 2, fault


REFUSALS = {  # 400s about the content, answered for this clip: the model's (or its server's) answer
    "openai_invalid_prompt": {"error": {"message": "Invalid prompt: your prompt was flagged as potentially violating "
                                                   "our usage policy. Please try again with a different prompt.",
                                        "type": "invalid_request_error", "param": None, "code": "invalid_prompt"}},
    "azure_content_filter": {"error": {"message": "The response was filtered due to the prompt triggering Azure "
                                                  "OpenAI's content management policy. Please modify your prompt and "
                                                  "retry.", "type": None, "param": "prompt", "code": "content_filter",
                                       "status": 400}},
    "openai_invalid_image": {"error": {"message": "You uploaded an unsupported image. Please make sure your image is "
                                                  "valid.", "type": "invalid_request_error", "param": None,
                                       "code": "invalid_image"}},
}


@pytest.mark.parametrize("body", list(REFUSALS.values()), ids=list(REFUSALS))
def test_a_content_rejection_stays_the_model_s_answer(body) -> None:
    fault, sent = _call([StubReply(status=400, body=json.dumps(body)), good("json_schema")])
    assert fault is not None and fault.kind == "refused" and sent == 1, fault
    assert not Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


def test_a_validation_error_echoing_the_request_is_not_read_as_the_server_s_words() -> None:
    """FastAPI's own 422 (`{"detail": [{..., "input": <the request>}]}`, a server or gateway that does not wrap it)
    echoes the request: the clip's instruction and the model's own earlier text. Only the server's words are read
    (`graph.setup_rejections.server_words`): a request whose text says "image input is not supported" is no model
    without images."""
    echo = {"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not permitted",
                        "input": {"messages": [{"role": "user", "content": [
                            {"type": "text", "text": "The robot says: image input is not supported"}, IMAGE]}]}}]}
    fault, sent = _call([StubReply(status=422, body=json.dumps(echo)), good("json_schema")])
    assert fault is not None and fault.kind == "refused" and sent == 1, fault
