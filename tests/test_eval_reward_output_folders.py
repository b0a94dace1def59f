"""`raa eval reward -o DIR` where a file it writes is a folder (DIR/summary.json a folder: a copy gone wrong, a
hand-made layout) scored every row and then ended in an IsADirectoryError traceback when it wrote the tables; it is
refused before anything is scored, naming the file (exit 2)."""

from __future__ import annotations

import pytest

from tests.test_eval_cli import env, eval_cli, runner  # noqa: F401 - the fixture


@pytest.mark.parametrize("name", ["summary.json", "table.md", "started.json"])
def test_a_folder_where_the_run_writes_a_file_is_refused_before_scoring(env, name):  # noqa: F811
    root, model = env
    (root / "ev" / name).mkdir(parents=True)
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert f"error: ev/{name} is a folder, where `raa eval reward` writes a file" in result.output, result.output
    assert not (root / "ev" / "results.jsonl").exists() and model.calls == []


def test_every_file_a_run_writes_is_refused_as_a_folder(env, tmp_path_factory):  # noqa: F811
    """The names refused (`evals.reliability._refuse_folders`) are the names a run writes: a finished run's files are
    listed, and each made a folder in a fresh --out is refused before scoring (a name written but not checked, or
    spelled otherwise, would end in the IsADirectoryError traceback after every row was scored)."""
    root, model = env
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct"])
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (root / "ev").iterdir() if p.is_file() and not p.name.startswith("."))
    assert {"results.jsonl", "summary.json", "table.md", "table.csv", "started.json"} <= set(written), written
    calls = len(model.calls)
    for name in written:
        out = root / f"ev-{name}"
        (out / name).mkdir(parents=True)
        result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", out.name, "--presets", "direct"])
        assert result.exit_code == 2, (name, result.output, result.exception)
        assert f"{out.name}/{name} is " in result.output and "folder" in result.output or \
            f"{out.name}/{name} is not a file" in result.output, (name, result.output)
        assert len(model.calls) == calls, name  # nothing scored
