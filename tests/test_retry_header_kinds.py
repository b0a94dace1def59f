"""The server's `x-should-retry` decides whether a failed model call is tried again, not what the failure is
(graph/transport.py, graph/backbone.py): the fault's kind once the tries end is read from the error itself.

A 401 sent with `x-should-retry: true` was retried and then reported as "transport" (the kind of an exhausted
retryable error), where a plain 401 is "settings" naming the API key; a 503 with `x-should-retry: false` was not
retried and reported as "refused", the model's answer about the clip, so the reward service and the trainer
counted a server outage as the agent's verdict (`Fault.outage` False), and its message claimed every attempt.
"""

from __future__ import annotations

import pytest

from graph.backbone import BackboneFault, Usage
from graph.schemas import Fault
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import good, make, run

RETRY = {"x-should-retry": "true"}
NO_RETRY = {"x-should-retry": "false"}


def _fault(replies: list[StubReply]) -> tuple[BackboneFault, int]:
    with OpenAIStub(replies) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema", max_retries=2), Usage())
    return info.value, len(stub.requests)


def test_a_401_the_server_says_to_retry_is_retried_and_still_a_settings_fault() -> None:
    fault, sent = _fault([StubReply(status=401, content="bad key", headers=RETRY)] * 3 + [good("json_schema")])
    assert sent == 3, "the server's header is obeyed: retried"
    assert fault.kind == "settings" and "RAA_API_KEY" in fault.message, fault
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


def test_a_413_the_server_says_to_retry_is_still_the_setups_limit() -> None:
    fault, sent = _fault([StubReply(status=413, content="Request Entity Too Large", headers=RETRY)] * 3)
    assert sent == 3 and fault.kind == "settings" and "client_max_body_size" in fault.message, fault


def test_a_400_the_server_says_to_retry_is_still_refused() -> None:
    fault, sent = _fault([StubReply(status=400, content="content policy violation", headers=RETRY)] * 3)
    assert sent == 3 and fault.kind == "refused", fault


def test_a_503_the_server_says_not_to_retry_is_an_outage_after_one_attempt() -> None:
    fault, sent = _fault([StubReply(status=503, content="overloaded", headers=NO_RETRY), good("json_schema")])
    assert sent == 1, "the server's header is obeyed: not retried"
    assert fault.kind == "transport" and "after 1 attempt:" in fault.message, fault
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


def test_an_exhausted_503_counts_its_attempts() -> None:
    fault, sent = _fault([StubReply(status=503, content="overloaded")] * 3)
    assert sent == 3 and fault.kind == "transport" and "after 3 attempts:" in fault.message, fault


def test_a_500_saying_the_request_s_part_is_not_taken_is_not_retried_whatever_the_header() -> None:
    """llama.cpp answers a part it does not take with a 500 (graph/setup_rejections.py); with `x-should-retry: true`
    the same request was sent `max_retries` more times, each answered alike, before the "settings" fault."""
    old_llama_cpp = 'response_format type must be one of "text" or "json_object", but got: json_schema'
    fault, sent = _fault([StubReply(status=500, content=old_llama_cpp, headers=RETRY)] * 3)
    assert sent == 1, "the same request gets the same answer: not retried"
    assert fault.kind == "settings" and "RAA_STRUCTURED_METHOD=json_mode" in fault.message, fault


def test_an_account_without_credit_is_not_retried_whatever_the_header() -> None:
    """No wait tops an account up (`graph.transport.no_credit`): with `x-should-retry: true` (a gateway's, or a
    server's on every 429) the quota 429 was sent `max_retries` more times, with their waits, before the same fault."""
    from tests.test_backbone_settings_status import OPENAI_QUOTA

    fault, sent = _fault([StubReply(status=429, body=OPENAI_QUOTA, headers=RETRY)] * 3 + [good("json_schema")])
    assert sent == 1, "waiting does not top an account up: not retried"
    assert fault.kind == "settings" and "credit" in fault.message, fault
