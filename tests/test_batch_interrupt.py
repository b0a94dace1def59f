"""`raa score-batch` stopped with Ctrl-C still prints its closing line.

The closing line is what the batch cost (rows by status, model usage: calls, tokens, attempts a paid API bills).
A batch interrupted by Ctrl-C ended with the progress bar and nothing else (exit 130): the rows it had written
and the calls it had paid for were not said, nor that the same command resumes it.
"""

from __future__ import annotations

import json

import pytest

from graph.cli import app
from tests.cli_agent_helpers import _env, runner


def test_an_interrupted_batch_prints_what_it_wrote_and_cost_and_how_to_resume(monkeypatch, tmp_path) -> None:
    pytest.importorskip("graph.builder")
    from graph import commands
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import OBSERVATION, full_script, square_batch

    def observe(messages, k):  # noqa: ANN001, ANN202 - the second clip's observe call is where Ctrl-C comes
        if k == 1:
            raise KeyboardInterrupt
        return OBSERVATION

    model = ScriptedChatModel(full_script(observe=observe))
    monkeypatch.setattr(commands, "make_chat_model", lambda settings: model)
    _env(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    manifest = square_batch(tmp_path, 2)
    out = tmp_path / "results.jsonl"
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--concurrency", "1",
                              "--preset", "no_wmreward"])
    assert res.exit_code == 130, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["result"]["status"] for r in rows] == ["scored"]
    assert "scored=1 zero=0 ineligible=0  usage: calls=" in res.stderr, res.stderr
    assert "interrupted" in res.stderr and "resume" in res.stderr, res.stderr
    assert "1 run(s) ended without a result" in res.stderr, res.stderr  # the second clip's: its calls not counted


@pytest.mark.parametrize("step", ["preflight_or_exit", "loaded_tools"])
def test_a_ctrl_c_while_the_endpoint_or_tools_are_checked_says_the_output_is_as_it_was(monkeypatch, tmp_path,
                                                                                       step) -> None:
    """The endpoint wait (`RAA_ENDPOINT_WAIT_S`, a minute) and the tool models' load come before any row is written or
    removed; a Ctrl-C there ended the command with nothing said (exit 130 only as this typer turns the
    KeyboardInterrupt into it; Click's own is "Aborted!" and exit 1)."""
    from graph import commands
    from tests.cli_agent_helpers import _scripted
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)

    def interrupted(*args):  # noqa: ANN002, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, step, interrupted)
    manifest = square_batch(tmp_path, 2)
    out = tmp_path / "results.jsonl"
    out.write_text('{"key": "other", "result": {"status": "ineligible", "reasons": ["observe: transport: x"]}}\n')
    before = out.read_text()
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed",
                              "--retry-ineligible"])
    assert res.exit_code == 130 and out.read_text() == before, res.output
    assert res.stderr.strip().splitlines()[-1].startswith("interrupted before any clip was scored"), res.stderr
