"""Usage counts every request sent to the model (`attempts`) beside the replies received (`calls`): a request that
timed out on the client, or ended in a 5xx or 429, counted nowhere, although a paid API may bill one it answered
after the client gave up, so a run's usage under-stated what it had asked for (a run of retried timeouts read 0)."""

from __future__ import annotations

import pytest

from graph.backbone import Backbone, BackboneFault, Usage
from graph.testing import ScriptedChatModel
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import MSGS, Verdict, good, make, run

OK = {"label": "ok", "score": 3}


def _backbone(replies: list, **kw) -> Backbone:
    return Backbone(ScriptedChatModel({"judge": replies}), method="json_mode", retry_wait=(0.0, 0.0), **kw)


def test_a_retried_timeout_is_an_attempt_not_a_call() -> None:
    bb = _backbone([TimeoutError("slow"), OK], max_retries=2)
    assert bb.structured("judge", Verdict, list(MSGS), usage := Usage()).score == 3
    assert (usage.calls, usage.attempts) == (1, 2)


def test_exhausted_timeouts_count_every_attempt() -> None:
    bb = _backbone([TimeoutError("slow")], max_retries=2)
    with pytest.raises(BackboneFault) as info:
        bb.structured("judge", Verdict, list(MSGS), usage := Usage())
    assert info.value.kind == "timeout" and (usage.calls, usage.attempts) == (0, 3)


def test_a_server_error_then_a_reply_over_http() -> None:
    with OpenAIStub([StubReply(status=500), StubReply(status=429), good("json_schema")]) as stub:
        assert run(make(stub, "json_schema", max_retries=3), usage := Usage()).score == 3
    assert (usage.calls, usage.attempts, len(stub.requests)) == (1, 3, 3)


def test_a_reask_counts_one_attempt_per_reply() -> None:
    bb = _backbone(["not json", OK], schema_retries=1)
    bb.structured("judge", Verdict, list(MSGS), usage := Usage())
    assert (usage.calls, usage.attempts) == (2, 2)


def test_a_request_never_sent_is_no_attempt() -> None:
    """A ValueError the chat model raises with no reply to read (its own check of the request): nothing left."""
    bb = _backbone([ValueError("temperature must be >= 0")])
    with pytest.raises(BackboneFault) as info:
        bb.structured("judge", Verdict, list(MSGS), usage := Usage())
    assert info.value.kind == "transport" and (usage.calls, usage.attempts) == (0, 0)


def test_the_result_reports_attempts(clip) -> None:
    from graph_scripts import full_script, make_agent
    from graph_scripts import run as run_agent

    script = full_script(contract=[TimeoutError("slow"), full_script()["contract"][0]])
    out = run_agent(make_agent("full", script)[0], clip)
    usage = out["result"].usage
    assert out["result"].status == "scored" and usage["attempts"] == usage["calls"] + 1, usage
