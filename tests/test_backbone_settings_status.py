"""An HTTP 401, 403 or 404 from the chat endpoint is a setting to fix, not the model's answer about the clip.

They were kind "refused", the kind of a model that declines the content, so the reward service and the trainer
counted an expired API key, a wrong model name or a base URL without `/v1` as the agent's verdict that the clip
could not be judged (`ineligible_none`), not as an outage of its machinery (`ineligible_error`). They are now
kind "settings" (`graph.schemas.OUTAGE_FAULTS`), never retried, naming the setting to check; a 400 or 422 (a
content policy, a request the server rejects) stays "refused".
"""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from langchain_core.exceptions import (
    ModelAuthenticationError,
    ModelInvalidRequestError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
)

from evals.judge import JUDGE_NAMES
from graph.backbone import BackboneFault, Usage
from graph.schemas import Fault
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import good, make, run
from tests.test_backbone_scripted import MSGS, Verdict, _bb, _status


@pytest.mark.parametrize("status, named", [(401, ["RAA_API_KEY"]), (403, ["RAA_API_KEY", "RAA_MODEL"]),
                                           (404, ["RAA_BASE_URL", "RAA_MODEL"])])
def test_an_endpoint_status_the_settings_cause_is_a_settings_fault(status: int, named: list[str]) -> None:
    with OpenAIStub([StubReply(status=status, content="no"), good("json_schema")]) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault
    assert str(status) in fault.message and all(name in fault.message for name in named), fault.message
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


@pytest.mark.parametrize("status", [400, 422])
def test_a_request_the_server_rejects_is_still_refused(status: int) -> None:
    with OpenAIStub([StubReply(status=status, content="content policy violation")] * 2) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    assert info.value.kind == "refused" and "RAA_API_KEY" not in info.value.message
    assert not Fault(stage="judge", kind=info.value.kind, message=info.value.message).outage


@pytest.mark.parametrize("exc, kind", [
    (ModelAuthenticationError("invalid api key"), "settings"), (ModelPermissionDeniedError("forbidden"), "settings"),
    (ModelNotFoundError("no such model"), "settings"), (ModelInvalidRequestError("flagged"), "refused"),
    (_status(401), "settings"), (_status(404), "settings"), (_status(400), "refused")])
def test_any_chat_model_s_errors_are_read_the_same_way(exc: BaseException, kind: str) -> None:
    bb, model = _bb([exc, {"label": "a", "score": 2}])
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == kind and len(model.calls) == 1, info.value


def test_the_judge_s_401_names_its_own_key() -> None:
    with OpenAIStub([StubReply(status=401, content="bad key")]) as stub, pytest.raises(BackboneFault) as info:
        bb = make(stub, "json_schema")
        bb.setting_names = JUDGE_NAMES
        run(bb, Usage())
    assert "RAA_JUDGE_API_KEY" in info.value.message and "RAA_API_KEY" not in info.value.message.replace(
        "RAA_JUDGE_API_KEY", "")


def test_an_openai_auth_error_raised_directly_is_a_settings_fault() -> None:
    request = httpx.Request("POST", "http://stub/v1/chat/completions")
    exc = openai.AuthenticationError("expired", response=httpx.Response(401, request=request), body=None)
    bb, _ = _bb([exc])
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == "settings" and "RAA_API_KEY" in info.value.message


@pytest.mark.parametrize("status", [501, 505])
def test_a_request_the_server_does_not_implement_is_its_setup_not_the_clip(status: int) -> None:
    """A 501 (a server's answer for a feature it does not implement, or was not started with) or 505 says the
    server cannot serve such a request at all: every clip gets it. It is not retried, and was "refused", the
    model's answer about the clip, so a trainer counted a server that serves none of the agent's requests as clips
    the agent could not judge (`ineligible_none`) instead of an outage."""
    with OpenAIStub([StubReply(status=status, content="not supported"), good("json_schema")]) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault
    assert str(status) in fault.message and "RAA_BASE_URL" in fault.message, fault.message
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


OPENAI_QUOTA = json.dumps({"error": {"message": "You exceeded your current quota, please check your plan and billing "
                                                "details.", "type": "insufficient_quota", "param": None,
                                     "code": "insufficient_quota"}})


@pytest.mark.parametrize("reply", [StubReply(status=402, content="Insufficient Balance"),
                                   StubReply(status=429, body=OPENAI_QUOTA)], ids=["402", "openai_quota"])
def test_an_account_without_credit_is_a_settings_fault_naming_the_key(reply: StubReply) -> None:
    """DeepSeek answers 402 "Insufficient Balance" (api-docs.deepseek.com/quick_start/error_codes; OpenRouter, Mistral
    and others document a 402 for it too): it was "refused", every clip the model's answer. OpenAI answers a 429 whose
    code is `insufficient_quota`: it was retried as a rate limit, then "transport", with no word on the account."""
    with OpenAIStub([reply] * 3 + [good("json_schema")]) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault  # waiting does not top an account up
    assert "credit" in fault.message and "RAA_API_KEY" in fault.message, fault.message
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


def test_a_rate_limit_429_is_still_retried() -> None:
    with OpenAIStub([StubReply(status=429, content="Rate limit reached for requests"), good("json_schema")]) as stub:
        run(make(stub, "json_schema"), Usage())
    assert len(stub.requests) == 2
