"""The `raa eval` console prints paths, instructions and presets as they are: with Rich's emoji codes on, a clip
named "a:cat:b.mp4" (or an instruction saying ":thumbs_up:") was printed with an emoji in place of the text, so
the name in the table matched no file (markup was already off; `raa score-batch`'s console had both off)."""

from __future__ import annotations

from typer.testing import CliRunner

from graph.cli import app
from tests.test_eval_draws import _draws


def test_draws_prints_a_clip_name_holding_an_emoji_code_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    results = _draws(tmp_path, {"a:cat:b": [0.2, 0.9], "c": [0.5, 0.4]})
    res = CliRunner().invoke(app, ["eval", "draws", str(results)])
    assert res.exit_code == 0, res.output
    assert "a:cat:b.mp4" in res.output and "\N{CAT FACE}" not in res.output
