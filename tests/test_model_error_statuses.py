"""A LangChain `ModelError` says its HTTP status by its class (`ModelInvalidRequestError` a 400, `ModelAPIError` a 5xx),
and `graph.server_limits.rejected_request` honours it as it honours an openai `APIStatusError`'s status code: a 5xx
is no rejected request. It read every `ModelError` the server answered as one, a 5xx `ModelAPIError` too, so the image
limit's older, unanchored words ("too many images", "at most N image(s) may be provided", the flag's name) in a 500
that echoes the model's own output (llama.cpp's "Failed to parse input at pos N: <output>") were the server's image
limit: `raa doctor` told a server that had failed to raise its --limit-mm-per-prompt. A base `ModelError`, which
carries no status, is read as before."""

from __future__ import annotations

import httpx2
import openai
import pytest
from langchain_core.exceptions import (
    ModelAPIError,
    ModelError,
    ModelInvalidRequestError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
)
from langchain_openai.chat_models.base import OpenAIAPIError

from graph.server_limits import limit_kind, rejected_request
from graph.settings_faults import no_credit, settings_problem
from graph.transport import BACKBONE_NAMES
from tests.openai_stub import OpenAIStub
from tests.test_backbone_server_limits import IMAGES_NEW, IMAGES_OLD, TOO_MANY
from tests.test_doctor_call_hints import _images_check, _scripted

WORDINGS = pytest.mark.parametrize("words", [IMAGES_OLD, IMAGES_NEW, TOO_MANY], ids=["old", "new", "too_many"])


def _echo(words: str) -> str:
    """llama.cpp's 500 for output it could not parse, quoting the model's own text (a clip's screen read out)."""
    return f"Error code: 500 - Failed to parse input at pos 0: the screen reads: {words}"


def _status(code: int, message: str) -> openai.APIStatusError:
    response = httpx2.Response(code, request=httpx2.Request("POST", "http://x/v1/chat/completions"))
    return openai.APIStatusError(message, response=response, body={"error": {"message": message}})


@WORDINGS
def test_a_model_api_error_echoing_the_model_s_output_is_no_image_limit(words: str) -> None:
    assert limit_kind(ModelAPIError(_echo(words))) is None
    assert limit_kind(_status(500, _echo(words))) is None  # as an openai SDK 500's: the same reading


@WORDINGS
def test_the_real_image_limit_wording_in_a_rejected_model_error_is_still_the_limit(words: str) -> None:
    """Near miss: the same words as a 400 (`ModelInvalidRequestError`), or in a base `ModelError`, which carries no
    status (read as the server's answer, unchanged), are the server's image limit."""
    assert limit_kind(ModelInvalidRequestError(words)) == "images"
    assert limit_kind(ModelError(words)) == "images"
    assert limit_kind(_status(400, words)) == "images"


def test_a_model_error_s_class_is_its_status() -> None:
    assert not rejected_request(ModelAPIError("upstream failed"))
    assert not rejected_request(OpenAIAPIError("upstream failed", response=_status(500, "x").response, body=None))
    for exc in (ModelInvalidRequestError("bad"), ModelRateLimitError("slow down"), ModelError("no status")):
        assert rejected_request(exc), exc


def test_the_doctor_blames_no_image_limit_for_a_5xx_echo(tmp_path, monkeypatch) -> None:
    _scripted(monkeypatch, ModelAPIError(_echo(IMAGES_OLD)))
    with OpenAIStub([], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "transport" in detail, detail
    assert "fewer than" not in detail, detail


def test_the_doctor_names_the_image_limit_of_a_rejected_model_error(tmp_path, monkeypatch) -> None:
    """Near miss: the server's own 400 with vLLM's words is its image limit, named as such."""
    _scripted(monkeypatch, ModelInvalidRequestError(IMAGES_OLD))
    with OpenAIStub([], models=["stub-model"]) as stub:
        status, detail = _images_check(stub, tmp_path)
    assert status == "problem" and "settings" in detail and "fewer than 48 images" in detail, detail


KEY_LIMIT = "Key limit exceeded (total limit). Manage it using https://openrouter.ai/settings/keys"
"""OpenRouter's 403 for a key over its own credit limit (tests/test_provider_credit_advice.py)."""
RESPONSES_ONLY = "This model is only supported in v1/responses and not in v1/chat/completions."
"""OpenAI's 404 for a model its chat-completions route does not serve (tests/test_settings_answers.py)."""


def test_a_key_limit_s_words_in_a_5xx_echo_are_no_account_without_credit() -> None:
    assert not no_credit(ModelAPIError(_echo(KEY_LIMIT))) and not no_credit(_status(500, _echo(KEY_LIMIT)))
    assert no_credit(ModelPermissionDeniedError(KEY_LIMIT))  # near miss: OpenRouter's own 403


def test_another_route_s_words_in_a_5xx_echo_name_no_route() -> None:
    assert settings_problem(ModelAPIError(_echo(RESPONSES_ONLY)), BACKBONE_NAMES) is None
    fix = settings_problem(ModelInvalidRequestError(RESPONSES_ONLY), BACKBONE_NAMES)  # near miss: a rejection
    assert fix is not None and "Responses API" in fix, fix
