"""`raa runs` / `raa trace` / `raa report` in a folder where nothing was scored say where they looked.

The default trace database, `runs/traces.sqlite`, is relative to the current directory. A newcomer who
scored clips in the repository and then ran `raa runs` from another folder was told "no trace database
at runs/traces.sqlite (no runs yet)", which reads as if the runs were lost. The message now names the
folder it looked in and how to read another database (`--traces PATH`, `RAA_TRACES_PATH`); so does `raa prune`.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from graph.cli import app


@pytest.mark.parametrize("command", [["runs"], ["trace", "run-0123456789ab"], ["report", "run-0123456789ab"],
                                     ["prune", "--keep", "0", "--yes"], ["prune", "--vacuum"]])
def test_a_missing_relative_database_names_the_folder_and_the_option(command, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAA_TRACES_PATH", raising=False)
    res = CliRunner().invoke(app, command)
    assert "runs/traces.sqlite" in res.output and str(tmp_path) in res.output, res.output
    assert "--traces" in res.output and "RAA_TRACES_PATH" in res.output, res.output


@pytest.mark.parametrize("command", [["runs"], ["trace", "run-0123456789ab"], ["report", "run-0123456789ab"],
                                     ["prune", "--keep", "0", "--yes"], ["prune", "--vacuum"]])
def test_an_in_memory_trace_database_is_named_as_such_not_looked_for_in_the_folder(command, monkeypatch, tmp_path):
    """RAA_TRACES_PATH=:memory: (the README's way to keep traces only while a process runs) left nothing for a
    later command to read; they said "no trace database at :memory: (no runs yet in FOLDER ...)", as if a file
    named ':memory:' were missing from the current folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAA_TRACES_PATH", ":memory:")
    res = CliRunner().invoke(app, command)
    assert "in memory" in res.output and "process" in res.output, res.output
    assert str(tmp_path) not in res.output, res.output
    assert "--traces" in res.output, res.output
