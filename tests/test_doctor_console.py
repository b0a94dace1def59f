"""`raa doctor`'s table shows its details as data: a model name, a server's words or a path holding an emoji code
(":smile:") was printed as the emoji, and a control character in them reached the terminal (an escape sequence that
retitles or clears it), as the eval and trace consoles once did (graph/commands.py)."""

from __future__ import annotations

from typer.testing import CliRunner

from graph.cli import app
from tests.openai_stub import OpenAIStub


def test_an_emoji_code_in_a_model_name_is_printed_as_written(tmp_path, monkeypatch) -> None:
    env = {"RAA_TRACES_PATH": str(tmp_path / "t.sqlite"), "RAA_CACHE_PATH": "off", "COLUMNS": "250",
           "RAA_VJEPA_MODEL": str(tmp_path), "RAA_MODEL": ":smile:\x1b]0;t\x07", "RAA_API_KEY": "EMPTY"}
    with OpenAIStub([], models=[":smile:\x1b]0;t\x07"]) as stub:
        res = CliRunner().invoke(app, ["doctor"], env={**env, "RAA_BASE_URL": stub.base_url})
    assert "serves :smile:\\x1b]0;t\\x07" in res.output and "\U0001f604" not in res.output, res.output
    assert "\x1b" not in res.output and "\x07" not in res.output, res.output
