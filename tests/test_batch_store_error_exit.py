"""A trace database or stage cache that cannot be used (`graph.stores.StoreError`) before the batch starts ends
`raa score-batch` with one error line and exit 2, through Click's own entry point (what `CliRunner` and `raa` both
call): the app caught it only in `Typer.__call__`, which `CliRunner` does not go through, so under the runner the
command ended with exit 1 and the exception, and the tests of such stops exercised another path than the CLI's."""

from __future__ import annotations

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner


def test_a_trace_path_under_a_file_stops_the_batch_with_exit_2(monkeypatch, tmp_path):
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    (tmp_path / "plain.txt").write_text("x")
    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "plain.txt" / "traces.sqlite"))
    manifest = square_batch(tmp_path, 1, name="m.jsonl")
    out = tmp_path / "o.jsonl"
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "direct"])
    assert res.exit_code == 2, (res.exit_code, res.exception, res.output)
    lines = res.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "RAA_TRACES_PATH" in lines[-1], res.stderr
    assert "Traceback" not in res.stderr and not out.exists()
