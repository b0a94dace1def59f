"""A batch that stops before scoring (exit 2: the endpoint does not answer, a tool cannot load) says nothing of rows
it did not write. Its first line said "1 bad manifest line(s) (their rows written again)" before those checks ran,
and then the batch stopped with the output as it was."""

from __future__ import annotations

from typer.testing import CliRunner

from graph.cli import app
from tests.test_batch_resume import BAD_LINE, _hand_rows
from tests.test_cli_agent import _scripted

runner = CliRunner()
DEAD = {"status": "ineligible", "reward": None, "reasons": ["observe: transport: APIConnectionError"]}


def test_a_tool_that_cannot_load_claims_no_rows_written(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    out, args = _hand_rows(tmp_path, {1: DEAD, 2: BAD_LINE})
    before = out.read_text()
    monkeypatch.setenv("RAA_VJEPA_MODEL", str(tmp_path / "no-such-vjepa"))
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 2 and out.read_text() == before, res.output
    assert "1 bad manifest line(s)" in res.output and "written again" not in res.output, res.output


def test_an_endpoint_that_does_not_answer_claims_no_rows_written(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    out, args = _hand_rows(tmp_path, {1: DEAD, 2: BAD_LINE}, preset="decomposed")
    before = out.read_text()
    monkeypatch.setenv("RAA_ENDPOINT_WAIT_S", "0.5")
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 2 and out.read_text() == before, res.output
    assert "written again" not in res.output, res.output


def test_a_batch_that_runs_still_says_the_bad_lines_rows_are_written_again(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    out, args = _hand_rows(tmp_path, {2: BAD_LINE}, preset="decomposed")
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "1 bad manifest line(s): their rows written again" in res.output, res.output
