"""`raa eval reward`'s outage note (table.md, the console, the report page) said "`raa eval reward --retry-ineligible`
scores them again": the command needs the run's manifest and --out, and without the run's --presets it scores the
default preset alone, a run of another scope (its table then shows that preset only, and the other presets' outage
rows stay). The note now names the run's own command (`evals.eval_runs.finish_command`, as the unfinished-run note
does), where the run recorded its manifest."""

from __future__ import annotations

import asyncio
import shlex

from evals.eval_views import reward_notes
from evals.reliability import run_reward_eval
from evals.report_index import write_eval_index
from evals.table import incomplete_notes, preset_metrics
from tests.test_eval_outages import OUTAGE, FaultScorer
from tests.test_eval_reliability import _clips, _judge


def test_the_outage_note_names_the_runs_command(tmp_path):
    manifest, out = tmp_path / "m.jsonl", tmp_path / "ev"
    outcome = asyncio.run(run_reward_eval(_clips(tmp_path), ["full", "direct"], out, FaultScorer(), _judge(),
                                          concurrency=1, manifest=str(manifest)))
    command = shlex.join(["raa", "eval", "reward", "-m", str(manifest), "-o", str(out), "--presets", "direct,full",
                          "--retry-ineligible"])
    assert f"`{command}` scores them again" in (out / "table.md").read_text()
    assert f"`{command}` scores them again" in reward_notes(outcome)[0]
    assert f"`{command}` scores them again" in write_eval_index(out).read_text()


def test_without_a_recorded_manifest_the_note_says_what_the_command_needs():
    m = preset_metrics("full", [{"path": "/c.mp4", "preset": "full", "label": "failure", "reward": None,
                                 "faults": [OUTAGE]}])
    (note,) = incomplete_notes([m])
    assert "`raa eval reward --retry-ineligible` with the run's --manifest, --out and --presets" in note, note


def test_a_summary_whose_manifest_is_empty_names_no_command_with_an_empty_manifest(tmp_path):
    """summary.json's manifest as the page's header reads it (`evals.eval_runs.run_manifest`): a hand-edited "" is no
    manifest there ("(summary.json)"), but the outage note built `raa eval reward -m '' ...` from it, a command that
    fails."""
    import json

    out = tmp_path / "ev"
    asyncio.run(run_reward_eval(_clips(tmp_path), ["full"], out, FaultScorer(), _judge(), concurrency=1,
                                manifest=str(tmp_path / "m.jsonl")))
    summary = out / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "manifest": ""}))
    page = write_eval_index(out).read_text()
    assert "run (summary.json)" in page
    assert "-m &#x27;&#x27;" not in page and "-m ''" not in page
    assert "with the run&#x27;s --manifest" in page or "with the run's --manifest" in page
