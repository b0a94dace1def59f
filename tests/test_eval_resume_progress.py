"""`raa eval reward`'s progress after a resume: each row the run finishes is numbered among all the run's rows,
the rows kept from an earlier run counted as done. The kept rows were skipped by the count, so a resume that
had 2 rows of 4 left printed "[1]" and "[2]" under "4 rows", reading as a run only half done when it ended."""

from __future__ import annotations

import asyncio
import re

from typer.testing import CliRunner

import evals.eval_cli as eval_cli
from evals.judge import RewardJudge
from evals.reliability import run_reward_eval
from graph.testing import ScriptedChatModel
from tests.test_eval_cli import env  # noqa: F401 - the CLI fixture
from tests.test_eval_reliability import FakeScorer, _clips, _judge


def test_rows_are_numbered_after_the_rows_kept(tmp_path):
    clips = _clips(tmp_path)
    asyncio.run(run_reward_eval(clips[:3], ["direct"], tmp_path / "ev", FakeScorer(), _judge()))
    seen: list[tuple[str, int]] = []
    asyncio.run(run_reward_eval(clips, ["direct", "full"], tmp_path / "ev", FakeScorer(), _judge(),
                                on_row=lambda row, done: seen.append((row["preset"], done))))
    # direct: 3 rows kept, 3 scored; full: 6 scored -> 4..12 of 12
    assert [d for _, d in seen] == list(range(4, 13)) and [p for p, _ in seen] == ["direct"] * 3 + ["full"] * 6


def test_a_verdict_kept_over_a_failed_judge_counts_as_done(tmp_path):
    clips = _clips(tmp_path)[:2]
    asyncio.run(run_reward_eval(clips, ["direct", "full"], tmp_path / "ev", FakeScorer(), _judge()))
    seen: list[int] = []  # another judge's name: every row is judged again, and this judge fails on c1
    asyncio.run(run_reward_eval(clips, ["direct", "full"], tmp_path / "ev", FakeScorer(), _judge(fail={"c1"}),
                                judge_name="other", on_row=lambda row, done: seen.append(done)))
    assert seen == [1, 2, 3, 4]  # c1's two old verdicts stay, counted and printed (a row each, kept verdict)


def test_the_console_numbers_rows_of_all_the_run(env, monkeypatch):  # noqa: F811
    judge_model = ScriptedChatModel({"judge": [{"reasonable": True, "rationale": "ok"}] * 4})
    monkeypatch.setattr(eval_cli, "make_judge", lambda s: RewardJudge.from_settings(s, model=judge_model))
    runner = CliRunner()
    first = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct"])
    assert first.exit_code == 0, first.output
    again = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct,full"])
    assert again.exit_code == 0, again.output
    assert re.findall(r"^\[(\d+/\d+)\] full ", again.output, flags=re.MULTILINE) == ["3/4", "4/4"], again.output
