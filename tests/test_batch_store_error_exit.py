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


def test_the_group_turns_only_a_store_error_into_exit_2_also_in_a_sub_app(capsys):
    """The catch sits in the command group's invoke: a StoreError of a nested group's command (`raa eval ...`) is
    caught there too, and any other exception, a Ctrl-C or an exit of the command's own passes as before."""
    import pytest
    import typer

    from graph.cli import _Commands
    from graph.stores import StoreError

    raised: list[BaseException] = []
    top = typer.Typer(cls=_Commands, add_completion=False)
    sub = typer.Typer()

    @sub.command("boom")
    def boom() -> None:
        raise raised[0]

    @top.command("other")
    def other() -> None:  # two commands: the group dispatches by name
        raise raised[0]

    top.add_typer(sub, name="eval")
    cases = [(StoreError("db gone"), 2), (ValueError("x"), ValueError), (KeyboardInterrupt(), 130),
             (typer.Exit(3), 3)]
    for exc, expected in cases:
        for args in (["eval", "boom"], ["other"]):
            raised[:] = [exc]
            if isinstance(expected, type):
                with pytest.raises(expected):
                    top(args, prog_name="raa")
                continue
            with pytest.raises(SystemExit) as stop:
                top(args, prog_name="raa")
            assert stop.value.code == expected, (exc, args, stop.value.code)
    assert "error: db gone" in capsys.readouterr().err
