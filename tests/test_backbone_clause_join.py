"""How a fault's fix follows the server's words it quotes (graph.server_words.clause_joined): as clean sentences
whatever their final punctuation; a "!" or "?" read "!;" and "?;" joined, where only a final "." was dropped."""

from __future__ import annotations

import pytest

from graph.server_words import clause_joined
from tests.test_gateway_budget_and_caps import _call
from tests.test_settings_answers import NOT_A_CHAT_MODEL


@pytest.mark.parametrize(("words", "joined"), [
    ("Budget has been exceeded!", "Budget has been exceeded! HTTP 429: fix it"),
    ("Did you mean to use v1/completions?", "Did you mean to use v1/completions? HTTP 429: fix it"),
    ("Max budget limit reached.", "Max budget limit reached; HTTP 429: fix it"),
    ("Failed to parse:", "Failed to parse; HTTP 429: fix it"),
    ("cut short...", "cut short...; HTTP 429: fix it"),
    ("Really?.", "Really? HTTP 429: fix it"),
    ("Really?。", "Really? HTTP 429: fix it"),
    ("Budget has been exceeded!.", "Budget has been exceeded! HTTP 429: fix it"),
    ("cut...。", "cut...; HTTP 429: fix it"),
    ("cut... 。", "cut...; HTTP 429: fix it"),
    ("cut….", "cut…; HTTP 429: fix it"),
    ("Max budget limit reached..", "Max budget limit reached; HTTP 429: fix it")],
    ids=["exclamation", "question", "full_stop", "colon", "ellipsis", "question_then_stop",
         "question_then_full_width_stop", "exclamation_then_stop", "ellipsis_then_full_width_stop",
         "ellipsis_space_full_width_stop", "ellipsis_char_then_stop", "double_stop"])
def test_a_clause_follows_any_final_punctuation_as_clean_sentences(words: str, joined: str) -> None:
    assert clause_joined(words, "HTTP 429: fix it") == joined


def test_a_clause_after_an_exclamation_opens_a_sentence() -> None:
    assert clause_joined("Budget has been exceeded!", "the server ...") == "Budget has been exceeded! The server ..."


def test_a_404_question_and_its_fix_read_as_two_sentences() -> None:
    """OpenAI's "... Did you mean to use v1/completions?" and its fix read "?;" joined."""
    fault, _ = _call(404, NOT_A_CHAT_MODEL, replies=1)
    assert fault is not None and fault.kind == "settings", fault
    assert "?;" not in fault.message and "v1/completions? HTTP 404: " in fault.message, fault.message


@pytest.mark.parametrize("words", ["", " ", ".", ":", "!", "?", "！", "...", "?.", " ! "])
def test_no_words_to_quote_leave_the_clause_alone(words: str) -> None:
    """An error without words (a chat model's error raised with no message, or only a stop) read "; HTTP 401: ..."."""
    assert clause_joined(words, "HTTP 401: fix it") == "HTTP 401: fix it"


@pytest.mark.parametrize(("words", "joined"), [
    ("余额不足！", "余额不足！ HTTP 402: fix it"),
    ("模型不存在？", "模型不存在？ HTTP 402: fix it"),
    ("余额不足。", "余额不足; HTTP 402: fix it")])
def test_full_width_sentence_ends_are_read_as_their_ascii_kin(words: str, joined: str) -> None:
    """A Chinese provider's words (DashScope's, Moonshot's) end in "！", "。" or "？": they read "！; HTTP ..."."""
    assert clause_joined(words, "HTTP 402: fix it") == joined


@pytest.mark.parametrize("words", ["cut short...,", "cut short...;", "cut short... :"])
def test_an_ellipsis_before_a_final_stop_is_kept(words: str) -> None:
    """Words ending in "...," lost the ellipsis with the comma, reading as whole words: "cut short; ..."."""
    assert clause_joined(words, "HTTP 402: fix it") == "cut short...; HTTP 402: fix it"


@pytest.mark.parametrize(("words", "joined"), [
    ("cut short..., ", "cut short...; HTTP 402: fix it"),
    ("Budget has been exceeded!, ", "Budget has been exceeded! HTTP 402: fix it"),
    ("余额不足！， ", "余额不足！ HTTP 402: fix it")])
def test_a_final_stop_before_trailing_space_is_read_as_without_it(words: str, joined: str) -> None:
    """The stop after an ellipsis or a "!" was looked for before the trailing space was dropped: "cut..., " lost its
    ellipsis ("cut; ...") and "exceeded!, " read "!;"."""
    assert clause_joined(words, "HTTP 402: fix it") == joined
