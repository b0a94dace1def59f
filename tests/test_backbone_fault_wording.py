"""The words of an exhausted transport or timeout fault: "after 1 attempt" (it said "after 1 attempts" with
RAA_MAX_RETRIES=0), and the connection hint follows the error as one sentence (it read "Connection error.; the
connection to ... failed")."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from graph.backbone import BackboneFault, Usage
from tests.test_backbone_scripted import MSGS, REQ, Verdict, _bb


def _fault(exc: BaseException, retries: int) -> BackboneFault:
    bb, _ = _bb([exc] * (retries + 1), max_retries=retries)
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    return info.value


def test_one_attempt_is_singular_and_more_are_plural() -> None:
    assert "after 1 attempt:" in _fault(openai.APIConnectionError(request=REQ), 0).message
    assert "after 1 attempt (" in _fault(httpx.ReadTimeout("t"), 0).message
    assert "after 2 attempts:" in _fault(openai.APIConnectionError(request=REQ), 1).message


def test_the_connection_hint_follows_the_error_without_a_stray_full_stop() -> None:
    message = _fault(openai.APIConnectionError(request=REQ), 0).message
    assert ".;" not in message and "Connection error; the connection to" in message, message
