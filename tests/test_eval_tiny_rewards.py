"""A tiny positive reward never reads as zero in `raa eval` outputs (`graph.reward_format.reward_text` for a single
reward, `evals.eval_views.mean_text` for a mean): F+ counts it as positive, and "0.0000" / "0.000" beside it
said it was a zero."""

from __future__ import annotations

import re

from graph_scripts import full_script
from typer.testing import CliRunner

import evals.eval_cli as eval_cli
import graph.commands as graph_commands
from graph.cli import app
from graph.testing import ScriptedChatModel
from tests.test_eval_cli import env  # noqa: F401 - the fixture
from tests.test_eval_compare import _scores
from tests.test_eval_draws import _draws

runner = CliRunner()


def test_the_reward_progress_line_shows_a_tiny_reward(env, monkeypatch):  # noqa: F811
    model = ScriptedChatModel(full_script(direct=[{"reward": 0.00004, "rationale": "barely"}]))
    monkeypatch.setattr(graph_commands, "make_chat_model", lambda settings: model)
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct"])
    assert result.exit_code == 0, result.output
    shown = re.findall(r"^\[\d+/\d+\] direct\s+a\.mp4\s+reward=(\S+) judge=", result.output, flags=re.MULTILINE)
    assert shown == ["4.00e-05"], result.output


def test_draws_show_a_tiny_draw(tmp_path):
    out = _draws(tmp_path, {"a": [0.0004, 0.6], "b": [0.2, 0.3]})
    res = runner.invoke(app, ["eval", "draws", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "4.00e-04 0.600" in res.output and "0.000 " not in res.output, res.output


def test_compare_means_show_a_tiny_mean(tmp_path):
    a = _scores(tmp_path, "trained", {"k1": 0.00004}, instruction="stack")
    b = _scores(tmp_path, "base", {"k1": 0.5}, instruction="stack")
    res = runner.invoke(app, ["eval", "compare", str(a), str(b)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "mean A 4.00e-05, mean B 0.5000" in res.output and "0.0000" not in res.output.split("A - B")[0], res.output


def test_mean_text():
    from evals.eval_views import mean_text

    assert [mean_text(v) for v in (None, 0.0, 0.0004, 0.00004, 0.81234, 1.0)] == \
        ["-", "0.0000", "0.0004", "4.00e-05", "0.8123", "1.0000"]
