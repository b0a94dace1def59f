"""langchain-openai raises its `OpenAIAPIContextOverflowError` (an `openai.APIError`, no status of its own, and a
LangChain `ContextOverflowError`) for ANY API error whose text says "exceeds the context window", a 500 too, with the
openai error and its status on `__cause__`. `graph.server_limits.limit_kind` read every `ContextOverflowError` as the
model's context: a 500 echoing the model's own output that quotes those words ("Failed to parse input at pos N:
<output>") was that limit, a "settings" fault naming --max-model-len. The cause's status is honoured as the status of
an openai error is: a 5xx cause is no limit; a 4xx cause, or none, is the context limit as before."""

from __future__ import annotations

import httpx2
import openai
import pytest
from langchain_core.exceptions import ContextOverflowError, ModelError
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models.base import OpenAIAPIContextOverflowError, _handle_openai_api_error
from pydantic import SecretStr

from graph.server_limits import limit_kind
from tests.openai_stub import OpenAIStub, StubReply

ECHO = "Failed to parse input at pos 0: the screen reads: your prompt exceeds the context window of the model"
"""A 500 quoting the model's own output (llama.cpp's parse failure) with langchain-openai's words for an overflow."""
OVERFLOW = "Input exceeds the context window of this model."


def _overflow(status: int, message: str) -> ContextOverflowError:
    """The error as langchain-openai raises it for an openai error of `status` (its `_handle_openai_api_error`)."""
    response = httpx2.Response(status, request=httpx2.Request("POST", "http://x/v1/chat/completions"))
    kind = {400: openai.BadRequestError, 500: openai.InternalServerError}.get(status, openai.APIStatusError)
    cause = kind(message, response=response, body={"error": {"message": message}})
    with pytest.raises(OpenAIAPIContextOverflowError) as info:
        _handle_openai_api_error(cause)
    assert info.value.__cause__ is cause
    return info.value


def test_a_5xx_cause_is_no_context_limit() -> None:
    assert limit_kind(_overflow(500, ECHO)) is None
    assert limit_kind(_overflow(503, ECHO)) is None


def test_a_4xx_cause_or_none_is_still_the_context_limit() -> None:
    """Near miss: the same error with a 400 (or 422) cause is the server's rejection; with no cause (raised by hand,
    or another chat model's) it is read as before."""
    assert limit_kind(_overflow(400, OVERFLOW)) == "context"
    assert limit_kind(_overflow(422, OVERFLOW)) == "context"
    assert limit_kind(ContextOverflowError("prompt too long")) == "context"


@pytest.mark.parametrize("status, kind", [(500, None), (422, "context")], ids=["echo_500", "rejected_422"])
def test_chat_openai_s_overflow_error_reads_its_cause_s_status(status: int, kind: str | None) -> None:
    """End to end: what ChatOpenAI raises for a stub server's error reply carrying those words."""
    with OpenAIStub([StubReply(status=status, content=ECHO if status == 500 else OVERFLOW)]) as stub:
        chat = ChatOpenAI(base_url=stub.base_url, model="m", api_key=SecretStr("k"), timeout=5.0, max_retries=0)
        with pytest.raises(ModelError) as info:
            chat.invoke("hi")
    assert isinstance(info.value, OpenAIAPIContextOverflowError), type(info.value)
    assert limit_kind(info.value) == kind
