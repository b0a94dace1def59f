"""graph/transport.py: which model-call failures are retried, and how long between tries."""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel

from graph.backbone import Backbone, BackboneFault, Usage
from graph.testing import ScriptedChatModel
from graph.transport import is_timeout, is_transient

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]


class Verdict(BaseModel):
    label: str
    score: int


@pytest.mark.parametrize("exc", [httpx2.ReadTimeout("t"), httpx2.ConnectTimeout("t"), httpx2.PoolTimeout("t")])
def test_httpx2_timeouts_are_transient_timeouts(exc) -> None:
    """openai >= 3 sends with httpx2, whose errors are not httpx's: one that escaped the SDK unwrapped was
    neither retried nor reported as a timeout."""
    assert is_transient(exc) and is_timeout(exc)


@pytest.mark.parametrize("exc", [httpx2.ConnectError("refused"), httpx2.RemoteProtocolError("cut"),
                                 httpx2.ReadError("reset")])
def test_httpx2_transport_errors_are_transient(exc) -> None:
    assert is_transient(exc) and not is_timeout(exc)


def test_an_httpx2_timeout_is_retried_and_then_reported_as_a_timeout() -> None:
    model = ScriptedChatModel({"judge": [httpx2.ReadTimeout("slow")] * 3 + [{"label": "a", "score": 1}]})
    bb = Backbone(model, max_retries=1, retry_wait=(0.0, 0.0))
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == "timeout" and "after 2 attempts" in info.value.message
    assert len(model.calls) == 2
