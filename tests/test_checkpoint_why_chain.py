"""`policy.checkpoint._why` (the reason in `CheckpointFileUnreadable`'s message) followed ``__context__`` through a
``raise ... from None``: the error an except block replaced on purpose, not the one raised. A local config.json that
is not UTF-8 read "(UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9 ...)" instead of
`tools.jsonl.NotUtf8Error`'s place and advice, and one holding a number too long for Python's int read as Python's
own "use sys.set_int_max_str_digits()" advice (`tools.jsonl.parsed_line` raises both from None). It follows
``__cause__`` and respects ``__suppress_context__``, as Python's traceback does."""

from __future__ import annotations

import sys

import pytest

from policy.checkpoint import CheckpointFileUnreadable, _why, load_checkpoint_json


def _no_hub(*_args, **_kwargs):
    raise AssertionError("a local folder is read from disk")


def test_a_config_that_is_not_utf8_names_the_byte_and_the_fix(tmp_path):
    (tmp_path / "config.json").write_bytes(b'{"a": "caf\xe9"}')
    with pytest.raises(CheckpointFileUnreadable) as raised:
        load_checkpoint_json(tmp_path, None, "config.json", None, _no_hub)
    text = str(raised.value)
    assert "(NotUtf8Error: not UTF-8 text (byte 0xe9 at line 1 column 11): save the file as UTF-8)" in text, text
    assert "UnicodeDecodeError" not in text


def test_a_config_with_a_too_long_number_says_so_not_pythons_advice(tmp_path):
    (tmp_path / "config.json").write_text('{"a": ' + "9" * (sys.get_int_max_str_digits() + 1) + "}")
    with pytest.raises(CheckpointFileUnreadable) as raised:
        load_checkpoint_json(tmp_path, None, "config.json", None, _no_hub)
    text = str(raised.value)
    assert "JSONDecodeError: a number of more than" in text and "set_int_max_str_digits" not in text, text


def _raised(make):
    try:
        make()
    except Exception as exc:  # noqa: BLE001 - the chain under test
        return exc
    raise AssertionError("nothing raised")


def test_the_chain_follows_a_cause_and_an_unsuppressed_context():
    def from_none():
        try:
            raise KeyError("hidden")
        except KeyError:
            raise ValueError("shown") from None

    def implicit():
        try:
            raise KeyError("handled")
        except KeyError:
            raise OSError("while handling")  # noqa: B904 - an implicit context, as diffusers' load_config raises

    def caused():
        try:
            raise KeyError("context")
        except KeyError:
            raise OSError("outer") from TimeoutError("the cause")

    assert _why(_raised(from_none)) == "ValueError: shown"
    assert _why(_raised(implicit)) == "KeyError: 'handled'"
    assert _why(_raised(caused)) == "TimeoutError: the cause"
