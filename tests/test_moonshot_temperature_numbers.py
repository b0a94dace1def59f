"""Moonshot's "invalid temperature: only N is allowed for this model" (graph/provider_words.py) names its value as a
number, which the fix reads as the number the server means, not as the characters written: "00" was echoed as
RAA_TEMPERATURE=00, a value written ".6" or "1e0" was not read at all (the refusal "refused", every clip's answer), and a
number of 10,000 digits was echoed whole into every fault's message, row and trace. The wordings are Moonshot's (as
its users quote it: "only 1", "only 0.6"; arcsin1/oh-my-ppt#45); only the number's spelling varies here."""

from __future__ import annotations

import pytest

from graph.provider_words import only_temperature, only_temperature_fix
from graph.setup_rejections import unsupported_part
from graph.transport import BACKBONE_NAMES
from tests.test_provider_temperature_and_thinking_words import moonshot
from tests.test_settings_answers import _status


def _words(value: str) -> str:
    return f"invalid temperature: only {value} is allowed for this model"


@pytest.mark.parametrize(("written", "read"), [("1", "1"), ("0.6", "0.6"), ("00", "0"), ("1.0", "1"), (".6", "0.6"),
                                                ("1e0", "1"), ("6E-1", "0.6"), ("0.60", "0.6")])
def test_the_value_is_named_as_the_number_the_server_means(written: str, read: str) -> None:
    value = only_temperature(_words(written).lower())
    assert value is not None, written
    fix = only_temperature_fix(value, BACKBONE_NAMES)
    assert f"RAA_TEMPERATURE={read} " in fix, fix
    assert unsupported_part(_status(400, moonshot(written)), {"messages": [], "temperature": 0.0}) == "temperature"


def test_a_number_the_client_cannot_send_is_named_briefly_and_another_model_asked_for() -> None:
    """A number no float holds (10,000 digits: infinite as a float), or one read as 0 though not written as 0, is no
    temperature the client can be set to: the fix quotes its first digits and their count, and names the model."""
    for written in ("9" * 10_000, "0." + "0" * 400 + "1"):
        value = only_temperature(_words(written))
        assert value is not None
        fix = only_temperature_fix(value, BACKBONE_NAMES)
        assert len(fix) < 400 and "RAA_TEMPERATURE=" not in fix and "RAA_MODEL" in fix, fix
        assert f"{len(written)} characters" in fix, fix


@pytest.mark.parametrize("words", [_words("one"), _words("1.2.3"), _words("-1"), _words("1 or 0.6"),
                                   "invalid temperature: only 1e is allowed for this model"])
def test_words_whose_value_is_no_number_are_not_moonshot_s(words: str) -> None:
    assert only_temperature(words) is None
    assert unsupported_part(_status(400, {"error": {"message": words}}), {"messages": [], "temperature": 0.0}) is None


def test_a_short_number_the_client_cannot_send_is_quoted_whole() -> None:
    fix = only_temperature_fix("1e999", BACKBONE_NAMES)
    assert "but 1e999, " in fix and "characters" not in fix and "RAA_MODEL" in fix, fix
