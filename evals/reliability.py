"""Reward-reliability harness: the paper's Table 2 protocol (Sec. 5.2) as a resumable run.

`run_reward_eval` scores every manifest clip with each chosen preset (through a `PresetScorer`, by default
`AgentScorer` = `graph.ascore_videos`, whose stage cache lets presets share identical stage outputs), asks the
judge (`evals.judge.RewardJudge`) whether each output is reasonable, appends one row per (clip, preset) to
`DIR/results.jsonl` as soon as it is done, and finally writes `table.md`, `table.csv` and `summary.json`.

Decisions where the issue was silent:
- Resume key is (absolute clip path, preset). On rerun a finished row is kept as is, unless its clip changed since:
  another instruction in the manifest, or other content at the path (rows record the file's size and SHA-256 as
  `clip_version`, `evals.clip_identity`: a `chmod`, `touch` or copy keeps it; a suite rendered again with another
  seed keeps its file names, not its bytes) -> scored again. The identity is taken just before a chunk is scored:
  taken after, a clip rewritten while scored recorded the new content for the old content's result. Rows that
  recorded the older stat identity are read as that module says (kept while it matches, then upgraded; else scored
  again once). A row whose verdict is `unjudged`, or was given by another judge than this run's (verdicts record
  `judge` = `judge_name`), or is `judged` without a true/false `reasonable` (a hand edit, `evals.table_rows.not_boolean`),
  is re-judged without re-scoring; a judged verdict is never replaced by one that could not
  judge (no judge configured on a rerun, a judge failure), and the R column names the judges whose verdicts it
  counts. `retry_ineligible=True` also re-scores the ineligible rows another run could turn into a reward (the
  paper retries execution errors), decided as `raa score-batch --retry-ineligible` decides
  (`graph.batch_retry.retryable`: a transport fault, a crashed scorer chunk, a clip not reached or read for the
  machine's sake that can be read now); an input fault or an undecodable clip stays final while the clip is
  unchanged (a changed clip is scored again anyway, as `stale`). It re-scored every row whose reward was None.
  The rows the flag would score again at the end of a run are counted (`RewardEvalOutcome.fixable`: those kept
  from earlier runs, those scored in this one, and those the flag scored again that failed again) and the CLI
  says so, in `raa score-batch`'s words on a plain resume: a run scored against a broken setup read as done, and
  one whose endpoint went down while it scored ended without a word of the flag.
  Rows written before these fields existed are taken as current. A row that cannot be counted as it stands
  (`damaged`, `evals.result_rows`: reward and status disagree, a verdict or usage that is not an object, reasons or
  notes that are not lists of strings) is scored again; one of another clip or preset stays in the file.
- results.jsonl is appended during the run (crash-safe): a chunk's scored rows as soon as the scorer returns
  them (unjudged), then each row again as soon as its judge returns (a run stopped mid-way keeps every reward
  and every verdict given; the rerun judges the rest without re-scoring), and it is rewritten compacted
  (last row per key, sorted by preset order then manifest order) at the end; rows of other presets or clips
  already in the file are kept.
  A truncated trailing line (crash mid-write) is ignored.
- With ``scorer_id`` (the CLI passes `graph.batch.scorer_of`: model name, temperature and endpoint) every row records it
  as ``scorer``, and a rerun whose scorer differs from the one that gave existing rewards raises
  `ManifestError` before anything is scored: kept rows would mix two models in one table. Only rows of this
  manifest's clips count (under any preset: the folder's table of this manifest has a column per preset);
  rows of another manifest kept in the folder are in none of this run's tables (they refused the run anyway).
- One run at a time per folder: a run holds DIR/results.jsonl's lock (`graph.batch.lock_output`, as `raa
  score-batch` holds its output) and a second run into the folder is a `ManifestError` before anything is
  scored. Two runs (presets split over two endpoints) each rewrote results.jsonl at the end from the rows it had
  read at its start plus its own, dropping the other's rows, whose later appends went to the replaced file.
- Clips are scored in chunks of `2 * concurrency` so progress is saved regularly; a chunk whose scorer raised
  gives every clip an ineligible row naming the error (`evals.reward_scorer.score_chunk`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.clip_identity import ClipIdentities, is_legacy, legacy_changed, legacy_matches
from evals.judge import JudgeVerdict, RewardJudge, explanation
from evals.result_rows import ManifestError, damaged, result_row, results_rows, stale, stamped
from evals.reward_scorer import EvalClip, PresetScorer, score_chunk
from evals.table import (
    SUMMARY_SCHEMA_VERSION,
    all_metrics,
    metrics_as_dicts,
    ordered_presets,
    render_csv,
    render_markdown,
)
from evals.table_rows import not_boolean
from tools.jsonl import SkippedLine, mend_tail, write_text_atomic

if TYPE_CHECKING:  # pragma: no cover
    from evals.table import PresetMetrics


@dataclass
class RewardEvalOutcome:
    """What a run produced."""

    metrics: list[PresetMetrics]
    """Per-preset metrics (paper order)."""
    rows: list[dict]
    """Result rows of the chosen presets and manifest clips."""
    scored: int
    """Rows scored in this run (not resumed)."""
    rejudged: int
    """Resumed rows judged again in this run (a verdict given: not those a judge could not judge, none when
    no judge is configured)."""
    out_dir: Path
    """Output folder."""
    unreadable: list[SkippedLine] = field(default_factory=list)
    """Lines of the existing results.jsonl that were not result rows (a write cut by a crash, an edit gone
    wrong), each ``PATH:N`` (of the file as the run found it) and why: the rewritten file no longer holds them.
    A clip and preset of this run that they left without a row was scored again, as a missing one is; one that
    holds another row kept it."""
    legacy_rescored: int = 0
    """Rows that recorded their clip's identity in the older stat form and were scored again because the file's
    metadata changed since (`evals.clip_identity`: once; the new rows keep the content identity)."""
    rewritten: int = 0
    """Clips scored in this run whose content changed while they were scored: their rows record the content
    before (what was scored), so the next run scores them again."""
    fixable: int = 0
    """Ineligible rows of the tables (kept from earlier runs or scored in this one) that `--retry-ineligible` would
    score again (`fixable`): the CLI says so, as `raa score-batch` does on a plain resume."""
    rerun: str | None = None
    """This run's command (`evals.eval_runs.finish_command`; None without a manifest), which the notes name."""


def _refuse_folders(out: Path) -> None:
    """ManifestError naming a file of DIR the run writes that is a folder: the run scored every row, then its
    write of the tables ended in an IsADirectoryError traceback. (results.jsonl: `evals.result_rows.results_lines`
    refuses it in its own words, before anything is scored.)"""
    from evals.eval_runs import RUN_FILES

    for name in RUN_FILES:
        if (out / name).is_dir():
            raise ManifestError(f"{out / name} is a folder, where `raa eval reward` writes a file: move or delete it, "
                                "or write to another --out")


async def run_reward_eval(clips: Sequence[EvalClip], presets: Sequence[str], out_dir: str | Path,
                          scorer: PresetScorer, judge: RewardJudge, *, concurrency: int = 16,
                          retry_ineligible: bool = False, judge_name: str = "judge",
                          on_row: Callable[[dict, int], None] | None = None,
                          scorer_id: dict[str, Any] | None = None,
                          manifest: str | None = None) -> RewardEvalOutcome:
    """Score, judge and tabulate; resumable through DIR/results.jsonl (see the module docstring). `on_row` hears each
    row the run finishes and how many of its rows (clips x presets) are done, those kept as they were included
    (a resume numbered only what it scored, so it never reached the total). The run holds
    DIR/results.jsonl's lock (`graph.batch.lock_output`) throughout; `ManifestError` when another run holds it.
    DIR/started.json and summary.json record the run and its `manifest` (`evals.eval_runs`)."""
    from graph.batch import OutputBusy, lock_output

    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    order = ordered_presets(presets)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    _refuse_folders(out)
    try:
        lock = lock_output(results_path)
    except OutputBusy:
        raise ManifestError(f"another `raa eval reward` is writing {results_path}; wait for it, or write to "
                            "another --out (its final rewrite would drop this run's rows)") from None
    try:
        return await _evaluate(clips, order, out, scorer, judge, concurrency=concurrency,
                               retry_ineligible=retry_ineligible, judge_name=judge_name, on_row=on_row,
                               scorer_id=scorer_id, manifest=manifest)
    finally:
        lock.close()


async def _evaluate(clips: Sequence[EvalClip], order: list[str], out: Path, scorer: PresetScorer,
                    judge: RewardJudge, *, concurrency: int, retry_ineligible: bool, judge_name: str,
                    on_row: Callable[[dict, int], None] | None,
                    scorer_id: dict[str, Any] | None, manifest: str | None) -> RewardEvalOutcome:
    """`run_reward_eval`'s work, under its lock."""
    from evals.eval_runs import (
        STARTED,
        SUMMARY,
        TABLE_CSV,
        TABLE_MD,
        finish_command,
        finished_fields,
        started_record,
    )
    from graph.batch import scorer_conflict

    results_path = out / "results.jsonl"
    existing, unreadable = results_rows(results_path)
    paths = {c.path for c in clips}  # rows of other manifests are in no table of this one (module docstring)
    if scorer_id is not None and (problem := scorer_conflict(
            str(results_path), [(f"{Path(p).name} ({k})", r, r.get("scorer"))
                                for (p, k), r in existing.items() if p in paths], scorer_id)):
        raise ManifestError(problem)
    started = started_record(manifest, order, len(clips))  # a run that never finishes is named by `raa eval report`
    write_text_atomic(out / STARTED, json.dumps(started, indent=2))
    sem = asyncio.Semaphore(concurrency)
    counters = {"scored": 0, "rejudged": 0, "legacy_rescored": 0, "rewritten": 0, "done": 0}

    mend_tail(results_path)  # a torn last row: appending after it would glue the first new row onto it
    with results_path.open("a", encoding="utf-8") as sink:
        def save(row: dict) -> None:
            existing[(row["path"], row["preset"])] = row
            sink.write(json.dumps(row) + "\n")
            sink.flush()

        def emit(row: dict) -> None:
            save(row)
            counters["done"] += 1
            if on_row is not None:
                on_row(row, counters["done"])

        async def judged(row: dict) -> dict:
            async with sem:
                try:
                    verdict = await judge.judge(row["path"], row["instruction"], row["reward"], row["status"],
                                                explanation(row.get("reasons") or [], row.get("notes") or []))
                except Exception as exc:  # noqa: BLE001 - defensive: the judge already reports its failures
                    verdict = JudgeVerdict(status="unjudged", rationale=f"judge crashed: {type(exc).__name__}: {exc}")
            return {**row, "judge": verdict.model_copy(update={"judge": judge_name}).model_dump()}

        async def with_old(row: dict) -> tuple[dict, dict]:
            return row, await judged(row)

        def in_order(jobs: Iterable[Coroutine[Any, Any, Any]]) -> list[asyncio.Task]:
            """Tasks started in manifest order (as_completed starts bare coroutines in set order)."""
            return [asyncio.ensure_future(job) for job in jobs]

        identities = ClipIdentities()  # each clip hashed once per run, again only if rewritten meanwhile
        def hashed(part: Sequence[EvalClip]) -> list[dict[str, Any] | None]:
            return [identities(c.path) for c in part]
        versions = await asyncio.to_thread(lambda: {c.path: identities(c.path) for c in clips})
        for preset in order:
            to_score, to_judge = [], []
            for clip in clips:
                row = existing.get((clip.path, preset))
                verdict = (row or {}).get("judge") or {}
                if row is not None and row.get("instruction") == clip.instruction and \
                        legacy_changed(row.get("clip_version"), clip.path):
                    counters["legacy_rescored"] += 1  # its file's metadata changed since: said by the CLI
                if row is None or stale(row, clip, versions[clip.path]) or damaged(row) or \
                        (retry_ineligible and fixable(row, clip.path, scorer_id)):
                    to_score.append(clip)
                    continue
                if verdict.get("status", "unjudged") == "unjudged" or not_boolean(verdict) or \
                        (verdict.get("judge") or judge_name) != judge_name:
                    to_judge.append(row)
            counters["done"] += len(clips) - len(to_score) - len(to_judge)  # kept as they are
            for done in asyncio.as_completed(in_order(with_old(r) for r in to_judge)):  # each saved when judged
                old, row = await done
                if row["judge"]["status"] != "judged" and (old.get("judge") or {}).get("status") == "judged":
                    counters["done"] += 1  # a judge that could not judge (none configured, a failure) keeps another's
                    if on_row is not None:  # verdict, told as any row done (the printed [n/total] skipped it)
                        on_row(old, counters["done"])
                    continue
                emit(row)
                counters["rejudged"] += row["judge"]["status"] == "judged"  # sent again and judged this time
            chunk = 2 * concurrency
            for start in range(0, len(to_score), chunk):
                part = to_score[start:start + chunk]
                before = await asyncio.to_thread(hashed, part)  # what is scored (module docstring)
                results, crashed = await score_chunk(scorer, preset, part)
                after = await asyncio.to_thread(hashed, part)
                counters["rewritten"] += sum(b != a for b, a in zip(before, after, strict=True))
                rows = [stamped(result_row(c, preset, r, v, crashed), scorer_id)
                        for c, r, v in zip(part, results, before, strict=True)]
                for row in rows:  # the rewards are kept, unjudged, if the run stops while the judge works
                    save(row)
                for done in asyncio.as_completed(in_order(judged(r) for r in rows)):
                    emit(await done)
                    counters["scored"] += 1

    by_path = {c.path: c for c in clips}
    for key, row in existing.items():  # reference labels come from the current manifest
        current = by_path.get(row["path"])
        if current is not None:
            old = row.get("clip_version")  # a current row of the older stat form: its content identity now
            upgraded = ({"clip_version": versions[current.path]} if is_legacy(old) and legacy_matches(old, current.path)
                        else {})
            existing[key] = {**row, "label": current.label, "pattern": current.pattern, "task": current.task,
                             **upgraded}
    rank = {p: i for i, p in enumerate(order)}
    clip_rank = {c.path: i for i, c in enumerate(clips)}
    compact = sorted(existing.values(), key=lambda r: (rank.get(r["preset"], len(rank)), r["preset"],
                                                        clip_rank.get(r["path"], len(clip_rank)), r["path"]))
    write_text_atomic(results_path, "".join(json.dumps(r) + "\n" for r in compact))
    wanted = set(clip_rank)
    rows = [r for r in compact if r["preset"] in rank and r["path"] in wanted]
    metrics = all_metrics(rows, order)
    rerun = None if manifest is None else finish_command(manifest, out, order)
    write_text_atomic(out / TABLE_MD, render_markdown(metrics, judge_name=verdicts_by(rows, judge_name), rerun=rerun))
    write_text_atomic(out / TABLE_CSV, render_csv(metrics))
    summary = {"schema_version": SUMMARY_SCHEMA_VERSION, "presets": order, "clips": len(clips),
               "judge": verdicts_by(rows, judge_name), "paths": [c.path for c in clips],
               "metrics": metrics_as_dicts(metrics), **finished_fields(started)}  # fields: evals.table's docstring
    write_text_atomic(out / SUMMARY, json.dumps(summary, indent=2))
    return RewardEvalOutcome(metrics, rows, counters["scored"], counters["rejudged"], out, unreadable,
                             counters["legacy_rescored"], counters["rewritten"],
                             sum(fixable(r, r["path"], scorer_id) for r in rows), rerun)  # said by the CLI


def fixable(row: dict[str, Any], path: str, scorer_id: dict[str, Any] | None = None) -> bool:
    """Whether `--retry-ineligible` scores `row` (of the clip at `path`) again: an ineligible row another run could
    fix (`graph.batch_retry.retryable`, whose clip readability is looked up now; a refusal only when the row's
    recorded scorer differs from this run's `scorer_id`)."""
    from graph import batch_retry
    from graph.batch import scored_by_other

    return batch_retry.retryable(row, path, batch_retry.clip_readable,
                                 scorer_changed=scored_by_other(row, scorer_id))


def verdicts_by(rows: Sequence[dict[str, Any]], judge_name: str) -> str:
    """Who gave the judged verdicts of `rows` (the R column's label): their one judge, several joined, or
    `judge_name` when none is judged."""
    names = dict.fromkeys(str((r.get("judge") or {}).get("judge") or judge_name) for r in rows
                          if (r.get("judge") or {}).get("status") == "judged")
    return ", ".join(names) or judge_name
