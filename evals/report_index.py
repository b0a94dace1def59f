"""Index page over a reward-reliability evaluation (`raa eval report DIR`).

Reads DIR/results.jsonl, recomputes the Table 2 metrics for the presets found there (only the clips and
presets of the last `raa eval reward` run, as its summary.json names them, so the page shows the table.md of
that run; results.jsonl also keeps rows of earlier manifests), and writes
DIR/index.html: the table [table], reliability extras [extras], and one row per clip with one cell per preset
(reward, status, judge verdict: ✓ / ✗ for a `judged` verdict only, as the table counts it; "not true/false"
for a `judged` one without a boolean, as the R cell names it; the verdict's status otherwise; a row an outage of the
reward machinery took reads "outage", its fault as the tooltip, and "not counted", as the table leaves it out of N:
it read as the preset's own ineligible result) linking to that run's report [clips]. Run reports are written to DIR/reports/<run id>.html
from the trace database when the run is found there; a report already there is linked with or without one
(`evals.report_links`).

Decisions where the issue was silent:
- The page shows the last *finished* run's table (the one in table.md / table.csv) and says so: its header
  [eval-run] names that run's manifest, finish time, clips and presets, and warns [eval-unfinished] of a newer
  run started in DIR that has not finished (crashed, stopped, or still running), naming its manifest and the
  command that finishes it; `raa eval report` prints the warning on stderr (`evals.eval_runs` argues why not
  the unfinished run's rows or every row of results.jsonl). The table was the old run's without a word.
- A run missing from the trace database (another machine, deleted runs) gets no link unless its report is
  already in DIR/reports, and the page says how many were missing instead of failing.
- Reports already present in DIR/reports are not rewritten unless `overwrite=True` (rerunning is cheap).
  So every page is written atomically (`tools.jsonl.write_text_atomic`): a report cut by a crash or a full
  disk was kept, cut, by every later run.
- A line of results.jsonl that is not a result row (not JSON, or no path and preset) is skipped, and the
  page's header line says how many were: its clip and preset would otherwise leave N without a word.
- A summary.json that cannot be read (not UTF-8 JSON, not an object, or `paths` / `presets` that are not
  lists of strings: a hand edit, a copy cut short; a folder of that name or a file without read permission) is a `SummaryError` naming the file, and `raa eval
  report` exits 2 before writing anything. It is not skipped with a warning: without it the page would
  count every row results.jsonl keeps, earlier manifests' too, and disagree with the run's table.md.
  Deleting the file (or rerunning `raa eval reward`) is the way to index every row. A summary.json
  without `paths` (written before it named the run's clips) still scopes nothing, as before. One without
  `schema_version` is version 1 (the fields read here kept their meaning); a `schema_version` that is not a
  positive integer is a `SummaryError` too: it was read as if it were of this version. So is one newer than
  `evals.table.SUMMARY_SCHEMA_VERSION` (a newer raa wrote the folder), though the fields read here (paths,
  presets, run, manifest, finished) keep their meaning across versions: the page's table is not read from the
  file but computed again from results.jsonl by this raa's metric definitions, and a newer version says that some of
  them changed (`evals.table`'s docstring: 1 to 2 moved R% to `n_r`), so the page would show other numbers than
  the folder's table.md under a header naming that run, without a word. Decided: refuse, naming the version and
  the raa to use, rather than a page whose table disagrees with its own run.
- A results.jsonl without rows, or none of the clips and presets summary.json names, still gets its page,
  whose header line says so (`empty_note`), and `on_empty` hears it (`raa eval report` prints "no rows in
  FILE: nothing to report", exit 0, as `raa eval draws`): the page had empty tables and "0 clips", and the
  command said only where it wrote it.
- A row `raa eval reward` would score again as it stands (`evals.result_rows.check_result_row`: its status and
  reward disagree, a verdict, usage, faults, reasons or notes of the wrong form) is a `TableRowError` naming the file,
  the line and the field, and `raa eval report` exits 2 before writing anything, as for a reward outside 0..1: an
  ineligible row carrying a reward of 0.7 counted toward F+ on the page, though the next `raa eval reward` threw that
  reward away and scored the clip again. The error ends with the repair (`repair_hint`): the run's own command from
  summary.json, which scores the row again, or deleting its line; it named the line and nothing of what to do.
- A row whose preset the table does not know (a hand edit, a preset since renamed) has no column: it is left
  out of the page and of its clip count, and the header says how many rows of which presets were (its clip
  was counted, a row of empty cells). A row whose ``run_id`` is not a string (a hand edit: 12, a list) is
  shown without a link and counted in the header (`run_id`, `left_out_notes`); it was a traceback.
- Rewards and mean rewards are shown as the judge sees them (`graph.reward_format.reward_text`): with 3
  decimals a scored 0.0004 read "0.000" beside its "scored" badge, though F+ counts it as positive.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from evals.eval_views import plural
from evals.report_html import badge, esc, page, section, table
from evals.report_links import link_reports
from evals.table import DISPLAY_NAMES, PAPER_ORDER, SUMMARY_SCHEMA_VERSION, all_metrics, incomplete_notes
from evals.table_means import USAGE_DIGITS, USAGE_NAMES
from evals.table_rows import outage, row_faults
from graph.reward_format import reward_text
from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S
from tools.jsonl import parsed_file, write_text_atomic

if TYPE_CHECKING:  # pragma: no cover
    from evals.table import PresetMetrics
    from tools.motion import MotionTracker


def _table_html(metrics: list[PresetMetrics], rerun: str | None = None) -> str:
    rows = [[DISPLAY_NAMES[m.preset], m.r_cell, m.f_cell, m.p_cell] for m in metrics]
    extras = [[m.preset, m.ineligible_cell, str(m.unjudged), str(m.skipped),
               *(m.usage_cell(k, d) for k, d, _ in USAGE_DIGITS), str(m.usage_unknown)] for m in metrics]
    return (section("table", "Reward reasonableness and hacking/control errors (Table 2 layout)",
                    table(["Method", "R / N (%) ↑", "F+ / n_neg ↓", "P0 / n_prog ↓"], rows, table_id="table2")
                    + "<p class=\"muted\">R: outputs the judge accepted; F+: failure or unobservable clips "
                      "given a positive reward; P0: zero rewards on progress clips.</p>"
                    + "".join(f"<p class=\"no eval-incomplete\"><b>warning:</b> {esc(note)}</p>"
                              for note in incomplete_notes(metrics, rerun)))
            + section("extras", "Ineligible, unjudged and cost per clip",
                      table(["preset", "ineligible", "unjudged", "skipped",
                             *(f"{USAGE_NAMES[k]}/clip" for k, _, _ in USAGE_DIGITS), "usage unknown"], extras))
            + section("means", "Mean reward by label and by pattern (rows with a reward / rows less outage rows)",
                      _means(metrics, "by_label") + _means(metrics, "by_pattern")))


def _means(metrics: list[PresetMetrics], attr: str) -> str:
    names = sorted({k for m in metrics for k in getattr(m, attr)})
    rows = []
    for m in metrics:
        groups = getattr(m, attr)
        rows.append([m.preset, *(f"{reward_text(groups[n].mean)} ({groups[n].counts})" if n in groups else ""
                                 for n in names)])
    return table(["preset", *names], rows) if names else ""


def _cell(row: dict, link: str | None) -> str:
    text = _cell_text(row)
    return f"<a class=\"run-link\" href=\"{esc(link)}\">{text}</a>" if link else text


def _cell_text(row: dict) -> str:
    """Reward, status badge and verdict of one row; an outage row's "outage" (module docstring)."""
    lost = [f for f in row_faults(row) if f.outage] if outage(row) else []
    if lost:  # no output of the preset (left out of N): not its own ineligible result, which N counts
        return f"{reward_text(None)} {badge('outage', title=lost[0].reason())} <span class=\"muted\">not counted</span>"
    j = row.get("judge") or ({"status": "skipped"} if row.get("reward") is None else {})  # as the table reads it
    status = j.get("status", "unjudged")
    reasonable = j.get("reasonable") if status == "judged" else None  # as the table counts it: a judged verdict,
    # a JSON boolean only ([true] raised, 1 read as ✓; an unjudged verdict's reasonable true read as accepted)
    verdict = ("<span class=\"yes\">✓</span>" if reasonable is True else "<span class=\"no\">✗</span>"
               if reasonable is False else  # a judged verdict without a boolean is no verdict: named as R names it
               f"<span class=\"muted\">{esc('not true/false' if status == 'judged' else status)}</span>")
    return f"{reward_text(row.get('reward'))} {badge(row.get('status'))} {verdict}"


def _thumb(path: str) -> str:
    """The clip's middle frame as a small inline image ('' when it cannot be decoded)."""
    from evals.report_frames import load_frames
    from tools.video import probe

    try:
        n = probe(path).frames
    except Exception:  # noqa: BLE001 - a missing clip just has no thumbnail
        return ""
    url = load_frames(path, [n // 2]).url(n // 2, 120)
    return f"<img src=\"{esc(url)}\" alt=\"clip\" style=\"width:96px;display:block\">" if url else ""


class SummaryError(ValueError):
    """DIR/summary.json cannot be read as the last run's scope (module docstring)."""


def repair_hint(rerun: str | None, out: Path, where: str, preset: str, note: str | None = None) -> str:
    """What to do about the results.jsonl row at `where` (``PATH:N``) of `preset` that `raa eval report` refuses: the
    run's own command `rerun` (None: not recorded) scores it again (`evals.result_rows.damaged`), or its line goes.
    Without a recorded run the hint names the row's preset: `raa eval reward` without --presets scores full alone.
    `note`: what to know of the command's manifest path (`evals.eval_runs.relative_manifest_note`)."""
    again = (f"run `{rerun}` (it scores that row again{f'; {note}' if note else ''})" if rerun else
             f"rerun `raa eval reward` with its manifest and -o {shlex.quote(str(out))} (it scores that row again with "
             f"--presets naming {preset})")
    path, _, line = where.rpartition(":")
    return f"to repair it, {again}, or delete line {line} of {path} (its clip and preset then read as not scored)"


def input_errors() -> tuple[type[Exception], ...]:
    """What `write_eval_index` raises for inputs it cannot use, each with a message naming the file (`raa eval
    report` prints it as one error line, exit 2): no results.jsonl; a results.jsonl that is not UTF-8
    (`evals.result_rows.ManifestError`) or holds a row the metrics cannot count (`TableRowError`); a
    summary.json it cannot read (`SummaryError`); a started.json it cannot open (`evals.eval_runs.RunRecordError`);
    a trace database that is not one (`StoreError`: it was a traceback)."""
    from evals.eval_runs import RunRecordError
    from evals.result_rows import ManifestError
    from evals.table_rows import TableRowError
    from graph.stores import StoreError

    return FileNotFoundError, TableRowError, SummaryError, RunRecordError, ManifestError, StoreError


class Scope(NamedTuple):
    """The last `raa eval reward` run as its summary.json names it: its clip paths and presets, and the whole
    summary (its manifest names the command that finishes the table's rows)."""

    paths: set[str]
    presets: set[str]
    summary: dict[str, Any]


def read_summary(summary: Path) -> dict[str, Any] | None:
    """summary.json's object, read once; None without the file. `SummaryError` naming the file when it cannot be read
    (a folder of that name, a FIFO, no read permission, not UTF-8 JSON, no object) or its ``schema_version`` is not
    one this raa reads (module docstring). `raa eval report` reads it here only: its scope (`scope_of`) and whether a
    newer run has not finished (`evals.eval_runs.unfinished`) both come from this object."""
    try:
        scope = parsed_file(summary)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a folder of that name, no read permission: it was a traceback, or (a folder) no scope
        raise SummaryError(f"{summary} cannot be read ({exc.strerror or exc}); rerun `raa eval reward`, or delete it "
                           f"to index every row of results.jsonl") from None
    except json.JSONDecodeError as exc:
        raise SummaryError(f"{summary} is not valid JSON ({exc}); rerun `raa eval reward`, or delete it to "
                           f"index every row of results.jsonl") from exc
    if not isinstance(scope, dict):
        raise SummaryError(f"{summary} must hold a JSON object, got {type(scope).__name__}")
    version = scope.get("schema_version", 1)  # 1: written before the field (`evals.table`'s docstring)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SummaryError(f"{summary}: schema_version must be an integer from 1, got {version!r:.40}; rerun "
                           "`raa eval reward`, or delete it to index every row of results.jsonl")
    if version > SUMMARY_SCHEMA_VERSION:
        raise SummaryError(f"{summary} has schema_version {version}, newer than this raa reads (up to "
                           f"{SUMMARY_SCHEMA_VERSION}): it was written by a newer raa, whose metrics this one would "
                           "compute otherwise (the page's table would disagree with the folder's table.md); report "
                           "the folder with that one")
    return scope


def scope_of(scope: dict[str, Any] | None, summary: Path) -> Scope | None:
    """The `Scope` that summary.json's object `scope` (`read_summary`; None: no file) names; None when it names no
    clips (a summary written before it named them). `SummaryError` naming `summary` for fields of the wrong type."""
    if scope is None or "paths" not in scope:
        return None
    fields = {}
    for name in ("paths", "presets"):
        value = scope.get(name)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SummaryError(f"{summary}: field {name!r} must be a list of strings, got {value!r:.80}")
        fields[name] = set(value)
    return Scope(fields["paths"], fields["presets"], scope)


def empty_note(results: Path, summary: Path | None, *, known: bool = False) -> str:
    """Why an index has no row: "no rows in RESULTS" (`summary` None), or none of the clips and presets
    SUMMARY names; with `known`, RESULTS had rows, of unknown presets only ("no rows of a known preset")."""
    return (f"no rows{' of a known preset' if known else ''} in {results}"
            + ("" if summary is None else f" of the clips and presets {summary} names"))


def run_id(row: dict) -> str:
    """The row's run id when it is a string, else "" (no link): a hand-edited ``"run_id": 12`` crashed the
    index in `evals.report.safe_name`, and a list one as a dict key."""
    value = row.get("run_id")
    return value if isinstance(value, str) else ""


def left_out_notes(rows: list[dict], unknown: list[dict]) -> list[str]:
    """The header's account of rows shown without a link for a run id that is not a string (null or "" is
    no run, not counted), and of `unknown` rows left out: their preset has no column in the table."""
    notes = []
    if bad := sum(r.get("run_id") is not None and not isinstance(r.get("run_id"), str) for r in rows):
        notes.append(f"{plural(bad, 'row')} {'has' if bad == 1 else 'have'} a run id that is not a string (not linked)")
    if unknown:
        names = ", ".join(sorted({r["preset"] for r in unknown}))
        notes.append(f"{len(unknown)} row{' of an unknown preset' if len(unknown) == 1 else 's of unknown presets'} "
                     f"({names}) left out")
    return notes


def write_eval_index(out_dir: str | Path, *, traces_path: str | Path | None = None,
                     tracker: MotionTracker | None = None, overwrite: bool = False,
                     on_report: Callable[[Path], None] | None = None,
                     on_empty: Callable[[str], None] | None = None,
                     on_unfinished: Callable[[str], None] | None = None,
                     claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> Path:
    """Write DIR/index.html (and DIR/reports/*.html for runs found in `traces_path`); returns the index path.
    Without a row to show, `on_empty` gets `empty_note` (full paths) before anything is written; a newer run
    that has not finished, `on_unfinished` its `evals.eval_runs.unfinished_note` (the page says both).
    `claim_max_age_s`: when another host's claim is stale, as `raa trace` reads a run (`link_reports`)."""
    from evals.eval_runs import (
        SUMMARY,
        finish_command,
        relative_manifest_note,
        run_manifest,
        shown_run,
        started_run,
        unfinished,
        unfinished_note,
    )
    from evals.result_rows import REPORT_ADVICE, check_result_row, results_found
    from evals.table_rows import TableRowError, check_label

    out = Path(out_dir)
    results = out / "results.jsonl"
    if out.is_file():  # DIR/results.jsonl given for DIR: "expected DIR/results.jsonl/results.jsonl" said little
        raise FileNotFoundError(f"{out} is a file: `raa eval report` takes the folder `raa eval reward --out` wrote "
                                f"(raa eval report {shlex.quote(str(out.parent))})")
    read = results_found(results, REPORT_ADVICE)  # one look (a FIFO, a folder: refused, named)
    if read is None:
        raise FileNotFoundError(f"no evaluation results in {out} (expected {results})")
    lines, skipped = read
    rows = [row for _, row in lines.values()]
    summary = read_summary(out / SUMMARY)  # read once (its scope, and the newer run's note)
    scope = scope_of(summary, out / SUMMARY)
    last = scope.summary if scope is not None else None
    run_line = shown_run(last, out)
    manifest = run_manifest(last, out) if last is not None else None
    relative = relative_manifest_note(last, out) if last is not None else None
    rerun = finish_command(manifest, out, last.get("presets")) \
        if last is not None and manifest is not None else None  # the table's run, to fill its rows
    unfinished_record = unfinished(started_run(out), summary)
    warning = "" if unfinished_record is None else unfinished_note(unfinished_record, out)
    if warning and on_unfinished is not None:
        on_unfinished(warning)
    if scope is not None:  # the last run's table
        paths, chosen = scope.paths, scope.presets
        rows = [r for r in rows if r["path"] in paths and r["preset"] in chosen]
    unknown = [r for r in rows if r["preset"] not in DISPLAY_NAMES]  # no column of the table: not shown
    rows = [r for r in rows if r["preset"] in DISPLAY_NAMES]
    scoped_out = Path(SUMMARY) if lines and scope is not None else None  # rows, but none of the last run's
    if not rows and on_empty is not None:
        on_empty(empty_note(results, out / scoped_out if scoped_out else None, known=bool(unknown)))
    presets = [p for p in PAPER_ORDER if any(r["preset"] == p for r in rows)]
    for row in rows:  # `raa eval reward`'s check (the table's and more), naming the file and line (module docstring)
        try:
            check_label(check_result_row(row, where := lines[(row["path"], row["preset"])][0]), where)
        except TableRowError as exc:
            raise TableRowError(f"{exc}; {repair_hint(rerun, out, where, row['preset'], relative)}") from None
    metrics = all_metrics(rows, presets) if presets else []

    found = link_reports((run_id(row) for row in rows), out, traces_path, tracker=tracker,
                         overwrite=overwrite, on_report=on_report, claim_max_age_s=claim_max_age_s)
    links = found.links

    clips: dict[str, dict[str, dict]] = {}
    for row in rows:
        clips.setdefault(row["path"], {})[row["preset"]] = row
    clip_rows = []
    for path, by_preset in clips.items():
        first = next(iter(by_preset.values()))
        cells = [_cell(by_preset[p], links.get(run_id(by_preset[p]))) if p in by_preset else "" for p in presets]
        clip_rows.append([f"{_thumb(path)}<span title=\"{esc(path)}\">{esc(Path(path).name)}</span>", esc(first.get("label")),
                          esc(first.get("pattern")), esc(first.get("instruction")), *cells])
    note = "; ".join([found.note(), *left_out_notes(rows, unknown)])
    if skipped:  # their clips and presets are not in the table: say so rather than shrink N silently
        note += f"; {plural(len(skipped), 'line')} of results.jsonl {'are' if len(skipped) > 1 else 'is'} not " \
                f"{'result rows' if len(skipped) > 1 else 'a result row'} (skipped)"
    if not rows:
        note = f"{empty_note(Path(results.name), scoped_out, known=bool(unknown))}; {note}"
    name = out.resolve().name  # "." (run inside the folder) has no name of its own
    body = (f"<h1 id=\"eval-header\">Reward reliability: {esc(name)}</h1>"
            f"<div id=\"eval-run\">Shows {esc(run_line)}"
            + (f"<p id=\"eval-unfinished\" class=\"no\"><b>warning:</b> {esc(warning)}</p>" if warning else "")
            + "</div>"
            f"<div class=\"muted\">{plural(len(clips), 'clip')} × {plural(len(presets), 'preset')} · {esc(note)}</div>"
            + _table_html(metrics, rerun)
            + section("clips", "Clips (reward, status, judge verdict; click for the run report)",
                      table(["clip", "label", "pattern", "instruction", *presets], clip_rows, table_id="clip-table",
                            raw=True)))
    index = out / "index.html"
    write_text_atomic(index, page(f"Evaluation {name}", body))
    return index
