"""What the `raa eval` commands print for a VQA report, for a results file without rows, and for a single
reward (evals/eval_cli.py calls these; kept apart so that module stays a list of commands).

Decisions where the issues were silent:
- Exit codes: `NO_ANSWER_EXIT` (3) when `raa eval world-model` got no answer at all. It is `raa score`'s code
  for a run that produced no result (an ineligible reward, reasons printed); 1 is `raa report`'s unknown run
  and 2 a configuration or input error, and neither is what happened. vqa.json is still written (domain
  null, every question with its error), so the reasons can be read there too.
- Lines a reader skipped as no usable row (`skipped_lines`, `tools.jsonl.usable_rows`) go to stderr one by one
  as "skipped PATH:N: REASON", then a count; the JSON outputs list them under ``skipped_lines``. The
  commands exit 2 only when lines were skipped and no statistic is left (no pair compared, no clip with two
  eligible draws): the skipped lines may have held them.
- A results file without rows (`no_rows`) is said in one line naming it, exit 0: nothing failed, there is
  nothing to measure (as `raa eval draws` on an empty file).
- A single reward is printed by `graph.reward_format.reward_text` (3 decimals, a positive reward that would read
  0.000 in scientific notation; it is plain text), as the judge and the HTML pages show it: the progress lines
  of `raa eval reward` printed 4 decimals, so a scored 0.00004 read "reward=0.0000", and `raa eval draws`
  printed a clip's draws with 3, so 0.0004 read "0.000". Means (`raa eval compare`) keep 4 decimals, which
  they need to tell two sides apart, so a mean of 0.0004 prints 0.0004; but a positive mean under 0.00005
  read 0.0000, and the mean of one pair or one eligible row is a single reward, so `mean_text` switches
  to scientific notation there as `reward_text` does. Signed differences (A - B, the interval) and spreads
  (`raa eval draws`' std and ranges) are no reward and keep their fixed decimals.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from graph.reward_format import reward_text

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from evals.compare import Comparison
    from evals.reliability import RewardEvalOutcome
    from evals.table import PresetMetrics
    from evals.vqa import VQAReport
    from tools.jsonl import SkippedLine

NO_ANSWER_EXIT = 3
"""Exit code of `raa eval world-model` when no question was answered (module docstring)."""


def percent(value: float | None) -> str:
    """An accuracy in percent with 2 decimals, or a dash when there is none (no answer)."""
    return "-" if value is None else f"{value:.2f}"


def vqa_table(report: VQAReport) -> Table:
    """Questions, correct, unanswered (naming those an outage took, as the reward table's Ineligible cell) and
    accuracy per task and over the Domain."""
    from evals.table import outage_cell

    t = Table(title="World-model VQA (question-level accuracy)")
    for col in ("Task", "Questions", "Correct", "No answer", "Accuracy"):
        t.add_column(col)
    for task, row in report.by_task.items():
        t.add_row(task, str(int(row["questions"] or 0)), str(int(row["correct"] or 0)),
                  outage_cell(int(row["failed"] or 0), int(row.get("outage") or 0)), percent(row["accuracy"]))
    t.add_row("Domain", str(report.questions), str(report.correct), outage_cell(report.failed, report.outage),
              percent(report.domain))
    return t


def outage_lines(report: VQAReport) -> list[str]:
    """What `raa eval world-model` says of the questions an outage took (`evals.vqa`): left out of the accuracy,
    and asked again by a rerun (no line without any)."""
    if not report.outage:
        return []
    return [f"{plural(report.outage, 'question')} lost to an outage (left out of the accuracy): rerun the same "
            f"command to ask {'it' if report.outage == 1 else 'them'} again (the answered questions come from the "
            "stage cache, unless RAA_CACHE_PATH is off)"]


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
        for line in [*failure_lines(report), *outage_lines(report)]:
            console.print(line, highlight=False)
        console.print(f"wrote {path} (domain null, each question's error)")
        return NO_ANSWER_EXIT
    console.print(vqa_table(report))
    for line in outage_lines(report):
        console.print(line, style="yellow", highlight=False)
    if wrong := report.failed - report.outage:
        console.print(f"{plural(wrong, 'question')} had no answer (counted as incorrect); see {path}",
                      highlight=False)
    if report.failed:
        for line in failure_lines(report):
            console.print(line, highlight=False)
    console.print(f"wrote {path}")
    return 0


def plural(n: int, noun: str) -> str:
    """"1 question", "2 questions", "0 questions"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def skipped_lines(skipped: list[SkippedLine]) -> list[str]:
    """The stderr lines of a reader's skipped lines: one "skipped PATH:N: REASON" each, then how many
    (none without skipped lines)."""
    if not skipped:
        return []
    return [*(f"skipped {s}" for s in skipped),
            f"warning: {plural(len(skipped), 'line')} skipped as no usable row (listed above, and under "
            "skipped_lines in the JSON output); the other rows were read"]


def usage_lines(metrics: list[PresetMetrics]) -> list[str]:
    """`raa eval reward`'s usage per clip of each preset, naming the rows the means leave out (`evals.table`): those
    whose usage is unknown (a scorer chunk that crashed) and the outage rows (no output of the preset)."""
    from evals.table_means import USAGE_DIGITS, USAGE_NAMES

    lines = []
    for m in metrics:  # the decimals of table.md (USAGE_DIGITS): calls/clip read 2.25 here and 2.2 there
        line = f"{m.preset}: " + ", ".join(f"{USAGE_NAMES[k]}/clip {m.usage_cell(k, d)}" for k, d, _ in USAGE_DIGITS)
        left = [f"usage unknown for {plural(m.usage_unknown, 'row')}: not recorded, as when a scorer chunk crashed"] \
            if m.usage_unknown else []
        if m.usage_outage:
            one = m.usage_outage == 1
            left.append(f"{plural(m.usage_outage, 'outage row')} left out, as from R: {'its' if one else 'their'} "
                        f"requests were sent, but {'it is' if one else 'they are'} no output of the preset")
        if left:
            line += f" ({'; '.join(left)}; means over the other {m.usage_rows})"
        lines.append(line)
    return lines


def reward_notes(outcome: RewardEvalOutcome) -> list[str]:
    """What `raa eval reward` says after its table: the presets an outage took rows of (`evals.table.incomplete_notes`),
    why outputs could not be judged (here and not only in
    results.jsonl), the ineligible rows `--retry-ineligible` would score again, the results.jsonl lines dropped (named:
    the rewritten file no longer holds them), and the rows scored again because they recorded their clip in the older stat form and its file's metadata
    changed since (`evals.clip_identity`), and the clips that changed while being scored."""
    from evals.table import incomplete_notes
    from graph.batch_resume import fixable_lines  # `raa score-batch`'s words for the same rows
    from tools.jsonl import skipped_listing

    notes = incomplete_notes(outcome.metrics, outcome.rerun)  # presets an outage took rows of: not over every clip
    unjudged = [r for r in outcome.rows if (r.get("judge") or {}).get("status", "unjudged") == "unjudged"]
    if unjudged:
        notes.append(f"{len(unjudged)} output(s) could not be judged; first: "
                     f"{(unjudged[0].get('judge') or {}).get('rationale') or 'no reason recorded'}")
    notes += fixable_lines({"retry": outcome.fixable, "changed": 0}, outcome.out_dir / "results.jsonl", outcome.rerun)
    if bad := outcome.unreadable:  # gone for good (the file is rewritten from its rows): named, to be found again
        what = "line was not a result row and is" if len(bad) == 1 else "lines were not result rows and are"
        notes.append(f"{len(bad)} {what} gone from results.jsonl, which the run rewrote (line numbers as it was "
                     "before); a clip of this run was scored again only where no other row held it under the "
                     f"preset:{skipped_listing(bad)}")
    if outcome.legacy_rescored:
        notes.append(f"{plural(outcome.legacy_rescored, 'row')} recorded the clip's file identity in the older "
                     "form (time stamps and inode) and the file's metadata changed since: scored again, once; "
                     "rows now record the content (size and SHA-256), which a chmod, touch or copy keeps")
    if outcome.rewritten:
        notes.append(f"{plural(outcome.rewritten, 'clip')} changed while being scored: each row records the content "
                     "that was scored, and the next run scores the clip again")
    return notes


def refill_lines(sides: Sequence[tuple[str, str, Sequence[dict[str, Any]]]]) -> list[str]:
    """The commands that score again the rows of score-batch outputs an outage left ineligible, as `raa eval compare`
    and `raa eval draws` print them below their count: per (name, output, batches) of `sides` (name "" for the one
    file of `raa eval draws`, "A" / "B" for a side of `raa eval compare`), a `--retry-ineligible` run of each batch
    ({"preset", "draw"}, `evals.compare.SideSummary.outage_batches`) in the words of score-batch's own hints
    (`graph.batch_resume.rerun_command`), then what the placeholders stand for; nothing without a batch.
    "score-batch --retry-ineligible [--draw K]" named no --preset, and score-batch's default ("full") scored every
    clip of the manifest again into the output for rows of another preset. Rows do not record their manifest, so it
    is MANIFEST (MANIFEST_A, ...), said to be the one the batch was scored from; a row that records no preset is
    PRESET, never score-batch's default."""
    from graph.batch_resume import rerun_command

    commands, manifests, unknown = [], [], False
    for name, out, batches in sides:
        if not batches:
            continue
        manifests.append(manifest := "MANIFEST" + (f"_{name}" if name else ""))
        for batch in batches:
            unknown |= not batch["preset"]
            command = rerun_command(Path(manifest), Path(out), batch["preset"] or "PRESET", batch["draw"])
            commands.append(f"  {command} --retry-ineligible")
    if not commands:
        return []
    one = len(manifests) == 1
    whose = "the output" if not sides[0][0] else " and ".join(name for name, _, batches in sides if batches)
    note = (f"{', '.join(manifests)}: the manifest{'' if one else 's'} {whose} {'was' if one else 'were'} scored "
            f"from (rows do not record {'it' if one else 'them'})")
    if unknown:
        note += "; PRESET: the preset they were scored with (those rows do not record it)"
    return ["--retry-ineligible scores the outage rows again, in a run of the batch that wrote them:", *commands,
            note]


def no_rows(note: str, what: str) -> str:
    """The line for results without rows: "NOTE: nothing to WHAT" (NOTE: "no rows in FILE", ...)."""
    return f"{note}: nothing to {what}"


def empty_sides(result: Comparison) -> list[str]:
    """A "no rows in FILE: nothing to compare" line per side of `raa eval compare` without rows (none: both
    sides have rows)."""
    return [no_rows(f"no rows in {side.path}", "compare") for side in (result.a, result.b) if not side.rows]


def mean_text(value: float | None) -> str:
    """A mean of rewards with 4 decimals, or a dash; a positive one that would read "0.0000" in scientific
    notation (as `reward_text` does with 3): the mean of one tiny reward is that reward."""
    if value is None:
        return "-"
    shown = f"{value:.4f}"
    return f"{value:.2e}" if value > 0 and float(shown) == 0 else shown


def sides_table(result: Comparison) -> Table:
    """`raa eval compare`'s rows, statuses, mean reward and scorers per side."""
    t = Table(title="Rewards per side (mean over eligible rows)")
    for col in ("Side", "Rows", "Scored", "Zero", "Inelig.", "Mean reward", "Scored by"):
        t.add_column(col)
    for name, side in (("A", result.a), ("B", result.b)):
        scorers = "\n".join(label if n == side.rows else f"{label} ({n})" for label, n in side.scorers.items())
        t.add_row(f"{name}: {side.path}", str(side.rows), str(side.scored), str(side.zero),
                  f"{side.ineligible}" + (f" ({side.outage} outage)" if side.outage else ""),
                  mean_text(side.mean_reward), scorers)
    return t


def changed_table(shown: list[dict[str, Any]], total: int) -> Table:
    """`raa eval compare`'s instructions whose mean reward changed most (`evals.compare.most_changed`)."""
    t = Table(title=f"Most changed instructions ({len(shown)} of {total})")
    for col in ("Instruction", "n", "Mean A", "Mean B", "A - B"):
        t.add_column(col, overflow="fold")  # as the console's default: long instructions wrap, never cut
    for r in shown:
        t.add_row(r["instruction"], str(r["n"]), mean_text(r["mean_a"]), mean_text(r["mean_b"]),
                  f"{r['mean_diff']:+.4f}")
    return t


def draw_rewards(rewards: list[float], statuses: list[str], draws: list[int] | None = None,
                 ineligible: Sequence[int] = (), outage: Sequence[int] = ()) -> str:
    """A clip's rewards by draw for `raa eval draws` (`reward_text`), a draw that is not "scored" marked, and a
    draw without a reward (`ineligible`, by draw number; `draws`: the draw of each reward) shown as "⊥" in its
    place, "⊥(outage)" for one an outage of the reward machinery took (`outage`: `--retry-ineligible` fills it, the
    agent's own ineligible draw it does not; the report reads such a cell "outage", `evals.report_index`)."""
    shown = [(d, reward_text(r) + ("" if st == "scored" else f"({st})"))
             for d, r, st in zip(draws if draws is not None else range(len(rewards)), rewards, statuses, strict=True)]
    lost = [(d, "⊥(outage)" if d in outage else "⊥") for d in ineligible]
    return " ".join(text for _, text in sorted([*shown, *lost]))
