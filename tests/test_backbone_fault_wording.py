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


def test_the_connection_hint_keeps_the_cut_marker_of_a_long_error() -> None:
    """A connection error whose words are cut at the quote's limit (`graph.server_words.quoted_words`) ends in "...":
    the hint's join stripped every trailing "." and " ", so the cut marker went and the cut words read as whole."""
    long = "Connection error: " + "proxy said no " * 200
    message = _fault(openai.APIConnectionError(message=long, request=REQ), 0).message
    assert "...; the connection to" in message, message
