"""`raa eval report DIR` says which `raa eval reward` run its table shows (the last finished one: its manifest
and time) and that a newer run started in DIR has not finished (`evals.eval_runs`): after a run that crashed
on a new manifest the page showed the old run's table without a word."""

from __future__ import annotations

import asyncio
import re

import pytest
from typer.testing import CliRunner

import evals.eval_cli as eval_cli
from evals.reliability import run_reward_eval
from evals.report_index import write_eval_index
from tests.test_eval_reliability import FakeScorer, _clips, _judge


class Killed(Exception):
    """Stands in for a crash mid-run (the process dies after the first row)."""


def _kill(row: dict, done: int) -> None:
    raise Killed


def _run(clips, out, manifest: str, on_row=None) -> None:
    asyncio.run(run_reward_eval(clips, ["direct"], out, FakeScorer(), _judge(), manifest=manifest, on_row=on_row))


def _header(html: str) -> str:
    return re.search(r'<div id="eval-run"[^>]*>(.*?)</div>', html, re.S).group(1)


def test_a_crashed_run_on_a_new_manifest_is_named_above_the_old_table(tmp_path):
    clips, out = _clips(tmp_path), tmp_path / "ev"
    _run(clips[:3], out, "m1.jsonl")
    with pytest.raises(Killed):
        _run(clips[3:], out, "m2.jsonl", on_row=_kill)
    heard: list[str] = []
    html = write_eval_index(out, on_unfinished=heard.append).read_text()
    header = _header(html)
    assert "last finished `raa eval reward` run: manifest m1.jsonl" in header and "3 clips × 1 preset" in header
    assert len(heard) == 1 and "manifest m2.jsonl" in heard[0] and "has not finished" in heard[0]
    assert heard[0] in " ".join(html.split())  # the page says what the callback heard
    assert "c4.mp4" not in html  # the table is still the finished run's, as table.md

    res = CliRunner().invoke(eval_cli.eval_app, ["report", str(out), "--traces", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 0 and "warning: " in res.output and "m2.jsonl" in res.output, res.output

    _run(clips[3:], out, "m2.jsonl")  # finished: the page shows it, no warning
    heard.clear()
    html = write_eval_index(out, on_unfinished=heard.append).read_text()
    assert heard == [] and "manifest m2.jsonl" in _header(html) and "has not finished" not in html


def test_a_first_run_that_crashed_shows_every_row_and_says_so(tmp_path):
    clips, out = _clips(tmp_path), tmp_path / "ev"
    with pytest.raises(Killed):
        _run(clips[:3], out, "m1.jsonl", on_row=_kill)
    heard: list[str] = []
    html = write_eval_index(out, on_unfinished=heard.append).read_text()
    assert "no finished `raa eval reward` run" in _header(html)
    assert len(heard) == 1 and "manifest m1.jsonl" in heard[0]


def test_a_summary_from_before_runs_were_recorded_is_shown_as_before(tmp_path):
    """A folder written before started.json existed: no warning, the header names summary.json."""
    clips, out = _clips(tmp_path), tmp_path / "ev"
    _run(clips[:3], out, "m1.jsonl")
    (out / "started.json").unlink()
    heard: list[str] = []
    html = write_eval_index(out, on_unfinished=heard.append).read_text()
    assert heard == [] and "manifest m1.jsonl" in _header(html)


def test_the_command_that_finishes_a_run_names_its_presets_and_quotes_its_paths(tmp_path):
    """The note said `raa eval reward -m M -o DIR`: run as printed, it scored the default preset `full` instead
    of the stopped run's presets (a new run that left them unfinished), and a path with a space split in two."""
    import shlex

    from evals.eval_runs import started_record, unfinished_note

    out = tmp_path / "my evals"
    note = unfinished_note(started_record("suite one/manifest.jsonl", ["direct", "structured"], 6), out)
    command = note.split("rerun `")[1].split("`")[0]
    assert shlex.split(command) == ["raa", "eval", "reward", "-m", "suite one/manifest.jsonl", "-o", str(out),
                                    "--presets", "direct,structured"]


@pytest.mark.parametrize("manifest", [5, ["m2.jsonl"], {"path": "m2.jsonl"}])
def test_a_started_record_whose_manifest_is_not_text_is_named_without_one(tmp_path, manifest):
    """A hand-edited started.json whose manifest is not a string: `raa eval report` died with a TypeError (shlex of
    an int) building the finishing command. The run is named as one whose manifest is not recorded."""
    import json

    clips, out = _clips(tmp_path), tmp_path / "ev"
    _run(clips[:3], out, "m1.jsonl")
    with pytest.raises(Killed):
        _run(clips[3:], out, "m2.jsonl", on_row=_kill)
    started = out / "started.json"
    started.write_text(json.dumps({**json.loads(started.read_text()), "manifest": manifest}))
    heard: list[str] = []
    write_eval_index(out, on_unfinished=heard.append)
    assert len(heard) == 1 and "manifest not recorded" in heard[0] and "`raa eval reward` with its manifest" in heard[0]


@pytest.mark.parametrize("value", [{"a": 1}, 5, ["2026-01-01"], True, ""])
def test_a_run_time_that_is_not_text_reads_not_recorded(tmp_path, value):
    """A hand-edited summary.json's ``"finished": {"a": 1}`` printed "finished {'a': 1}" in the page's header (and
    started.json's a bare "started 5" in the warning): a time that is no string reads "not recorded"."""
    from evals.eval_runs import shown_run, unfinished_note

    header = shown_run({"manifest": "m1.jsonl", "finished": value, "paths": []})
    assert header == "the last finished `raa eval reward` run: manifest m1.jsonl, finished not recorded"
    note = unfinished_note({"run": "r", "manifest": "m1.jsonl", "started": value}, tmp_path)
    assert "(manifest m1.jsonl, started not recorded)" in note, note
    assert ", finished 2026" in shown_run({"finished": "2026-01-01T00:00:00+00:00"})  # the recorded time as it is
    assert shown_run({"manifest": "m1.jsonl"}).endswith("m1.jsonl")  # a summary from before it recorded the time


@pytest.mark.parametrize("clips", [True, False, -3, 2.5, "4"])
def test_a_clip_count_that_is_no_count_reads_not_recorded(clips):
    """``"clips": true`` read "True clip" (a bool is an int in Python), -3 "-3 clips"."""
    from evals.eval_runs import shown_run

    header = shown_run({"manifest": "m1.jsonl", "clips": clips, "presets": ["full"]})
    assert header.endswith(", clips not recorded × 1 preset (full)"), header
    assert shown_run({"clips": 1, "presets": ["full"]}).endswith(", 1 clip × 1 preset (full)")
    assert shown_run({"clips": 0}).endswith(", 0 clips")
