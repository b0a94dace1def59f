"""What the `raa eval` commands print for a VQA report, for a results file without rows, and for a single
reward (evals/eval_cli.py calls these; kept apart so that module stays a list of commands).

Decisions where the issues were silent:
- Exit codes: `NO_ANSWER_EXIT` (3) when `raa eval world-model` got no answer at all. It is `raa score`'s code
  for a run that produced no result (an ineligible reward, reasons printed); 1 is `raa report`'s unknown run
  and 2 a configuration or input error, and neither is what happened. vqa.json is still written (domain
  null, every question with its error), so the reasons can be read there too.
- A results file without rows (`no_rows`) is said in one line naming it, exit 0: nothing failed, there is
  nothing to measure (as `raa eval draws` on an empty file).
- A single reward is printed by `evals.report_html.reward_text` (3 decimals, a positive reward that would read
  0.000 in scientific notation; it is plain text): the progress lines of `raa eval reward` printed 4 decimals,
  so a scored 0.00004 read "reward=0.0000", and `raa eval draws` printed a clip's draws with 3. Means keep
  their fixed 4 decimals: a mean is no reward F+ counts, and one that small (under 0.00005) is a set of
  zeros with a crumb of reward, which 0.0000 beside its row counts describes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from evals.compare import Comparison
    from evals.vqa import VQAReport

NO_ANSWER_EXIT = 3
"""Exit code of `raa eval world-model` when no question was answered (module docstring)."""


def percent(value: float | None) -> str:
    """An accuracy in percent with 2 decimals, or a dash when there is none (no answer)."""
    return "-" if value is None else f"{value:.2f}"


def vqa_table(report: VQAReport) -> Table:
    """Questions, correct, unanswered and accuracy per task and over the Domain."""
    t = Table(title="World-model VQA (question-level accuracy)")
    for col in ("Task", "Questions", "Correct", "No answer", "Accuracy"):
        t.add_column(col)
    for task, row in report.by_task.items():
        t.add_row(task, str(int(row["questions"] or 0)), str(int(row["correct"] or 0)), str(int(row["failed"] or 0)),
                  percent(row["accuracy"]))
    t.add_row("Domain", str(report.questions), str(report.correct), str(report.failed), percent(report.domain))
    return t


def failure_lines(report: VQAReport) -> list[str]:
    """One line per reason questions had no answer: "  REASON: N questions, first: ERROR"."""
    return [f"  {r['reason']}: {r['questions']} question{'s' if r['questions'] != 1 else ''}, first: "
            f"{str(r['first'])[:300]}" for r in report.failure_reasons]


def show_vqa(report: VQAReport, path: Path, console: Console) -> int:
    """Print the VQA outcome; returns the exit code (0, or `NO_ANSWER_EXIT` when nothing was answered: then no
    table and no accuracy, only the reasons)."""
    if report.domain is None:
        console.print(f"error: no question was answered ({report.failed} of {report.questions} had no answer): "
                      "no Domain accuracy", style="red", highlight=False)
        for line in failure_lines(report):
            console.print(line, highlight=False)
        console.print(f"wrote {path} (domain null, each question's error)")
        return NO_ANSWER_EXIT
    console.print(vqa_table(report))
    if report.failed:
        console.print(f"{report.failed} questions had no answer (counted as incorrect); see {path}", highlight=False)
        for line in failure_lines(report):
            console.print(line, highlight=False)
    console.print(f"wrote {path}")
    return 0


def no_rows(note: str, what: str) -> str:
    """The line for results without rows: "NOTE: nothing to WHAT" (NOTE: "no rows in FILE", ...)."""
    return f"{note}: nothing to {what}"


def empty_sides(result: Comparison) -> list[str]:
    """A "no rows in FILE: nothing to compare" line per side of `raa eval compare` without rows (none: both
    sides have rows)."""
    return [no_rows(f"no rows in {side.path}", "compare") for side in (result.a, result.b) if not side.rows]
