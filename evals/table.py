"""Reward-reliability metrics and the paper-style table (Table 2 layout, Sec. 5.2).

Pure functions over result rows (dicts as stored in results.jsonl): `preset_metrics` computes R, F+, P0,
ineligible and unjudged counts, mean reward by label and by hacking pattern and mean usage per clip;
`render_markdown` / `render_csv` write them.

Definitions (decisions where the issue was silent are marked *):
- N: rows of the preset, less those an outage took (below; `n_r`, `n` keeps every row). R: rows whose judge
  verdict is `judged` and reasonable (unjudged and skipped rows never count: an ineligible output is not an
  accepted one). R% = 100 R / N. *A preset none of whose rows
  was judged although some could have been (`unjudged`: no judge endpoint, every attempt failed) shows
  "not judged" instead of 0 / N, and its R and R% are empty in table.csv / null in summary.json (R was 0
  beside an empty R%); a preset whose outputs were all ineligible is 0 / N (an earlier version showed
  "not judged" there, and 0.00% in the CSV for a preset never judged). A preset every row of which an outage
  took has no R either: "no result (N = 10, all lost to an outage)", empty / null as "not judged"; nor has a
  preset without rows (`all_metrics` over rows none of which is the preset's, `run_reward_eval` with no clips):
  "no rows", where "0 / 0 (0.0%)" and an R% of 0.00 read as a judge that rejected every output.
- *R's denominator stays N when some rows are unjudged: the paper reports "the accepted fraction of 180
  outputs" (Sec. 5.2), its judge's execution errors retried until every output was judged, so R / N is
  the paper's number once every row is judged (a rerun judges the unjudged rows again). Until then R / N
  is a lower bound and the judged rows alone would be another quantity (one that also drops the outputs
  the judge failed on), so the cell names the unjudged rows instead of hiding them in "not accepted":
  "1 / 10 (10.0%; 8 unjudged)" (it read "1 / 10 (10.0%)"). table.csv puts `unjudged` (and `skipped`) next
  to `r` / `r_pct`, and summary.json carries the cell's text (`r_cell`) beside the counts.
- *A `judged` verdict whose `reasonable` is not a JSON boolean (a hand-edited row, another tool's "partial" or
  "yes") is no acceptance, so it is not in R; the cell names such verdicts ("1 / 4 (25.0%; 2 judged without a
  true/false verdict)", `verdict_not_boolean` in table.csv and summary.json): R was lowered without a word.
  `raa eval reward` judges such rows again (`evals.reliability`).
- n_neg: rows labelled `failure` or `unobservable`; F+: those with a reward > 0.
- n_prog: rows labelled `progress`; P0: those with a reward == 0. *An ineligible progress row (reward None)
  is not a zero reward: it is counted in `ineligible`, not in P0.
- *An ineligible row is neither a false positive nor a zero, so it lowers neither F+ nor P0; their cells
  say how many of the n_neg / n_prog rows were ineligible ("0 / 60 (5 ineligible)"), so a preset that
  failed to score does not read as a perfect one. The cells' denominators leave the outage rows out (below).
- *Mean rewards by label / pattern average the rows with a reward (ineligible rows excluded); the count of
  rewarded rows and of the group's rows less the outage ones is given next to each mean, naming the outage rows
  ("0.250 (2/3; 1 outage not counted)": it read "(2/4)", counting a row the F+ cell beside it did not).
  summary.json's group keeps `total` as every row of the group (summed over the labels it is `n`) and adds
  `outage` and `total_excluding_outage` (the "3" shown).
- *Ineligible rows are told apart by cause: `outage` counts those whose recorded ``faults`` say the reward machinery
  failed (`graph.schemas.Fault.outage`: an endpoint down or too slow, a tool or the harness crashed, a clip the
  machine could not read), not the clip or the preset's agent (a refused or invalid reply, an undecodable clip).
  The Ineligible cell reads "5 (3 outage)", table.csv has `ineligible_outage`. An outage says the setup failed,
  not the preset: `--retry-ineligible` scores such rows again. A row written before rows recorded their faults
  is no known outage. (The rows dropped `RewardResult.faults`: a preset whose endpoint went down read as one
  that could not score its clips.)
- *An outage row is no output of the preset, so it is left out of N, n_neg and n_prog (the cells' denominators)
  and named beside them: "3 / 7 (42.9%; 3 outage not counted)", "1 / 3 (1 ineligible; 1 outage not counted)"
  (the "ineligible" there are the others). It counted in N as an output the judge did not accept, so a preset
  whose endpoint went down for 3 of 10 clips read "3 / 10 (30.0%)", as `evals.vqa` leaves such questions out of
  Domain. table.csv keeps `n`, `n_neg` and `n_prog` as the rows held, with `n_r` (R's denominator), `neg_outage`
  and `prog_outage`; summary.json adds `n_r`, `complete` (no outage) and `outage_paths`. Such a preset is
  incomplete, and presets that lost different clips are measured over different clips: `incomplete_notes` says
  both under table.md's first table, on the console and on the report page (`--retry-ineligible` fills them).
- *A row the metrics cannot count (a reward that is not a finite number in 0..1 or null, a verdict or usage that
  is not an object, a usage count that is not a whole number >= 0: hand-edited rows) raises `TableRowError` naming
  the row (`raa eval report`: results.jsonl's file and line), the field and its value; it crashed with a bare
  TypeError / AttributeError, and a reward outside 0..1 or a negative usage count was counted in the means. (`raa
  eval reward` scores such rows again before tabulating, `evals.result_rows.damaged`; `raa eval report` refuses
  them, and rows whose status and reward disagree, `evals.result_rows.check_result_row`.)
- *Usage per clip: the mean over the preset's rows of the agent's calls, images, tokens, stage-cache hits
  (a stage output served from the cache is a hit, not a call) and attempts (requests sent, a reply or not: a
  timed-out or refused request is an attempt, not a call; rows written before attempts were counted leave it
  out of its mean, `evals.table_means.LATE_USAGE_KEYS`), over the rows that recorded their usage: a
  row whose usage is null (its scorer chunk crashed, `evals.reward_scorer.score_chunk`) or absent (another
  tool's row) is counted in `usage_unknown` ("Usage unknown" / ``usage_unknown`` in table.md / table.csv) and
  left out of the mean, which it lowered as a free run; with no row recorded the cells are "-" (empty in the CSV). An
  outage row is left out of the mean too (`usage_outage`, in table.csv, named by `raa eval reward`), as from
  N: a run the endpoint's outage stopped made few calls or none, so a preset that lost clips read as a
  cheaper one, and once `--retry-ineligible` fills the row its usage is gone from the table anyway. The
  requests it sent were sent (score-batch's closing line sums them); the table's usage is the cost of the
  preset's outputs.
- summary.json (`SUMMARY_SCHEMA_VERSION`): a field keeps its meaning once outside scripts read it; a figure
  defined anew gets a new field, and a change of meaning raises `schema_version`. 1 (a file without the field):
  R% over every row, usage over every row that recorded it. 2: R% is over `n_r` and `usage_per_clip` leaves the
  outage rows out (`usage_outage` of them), as above; `n_r`, `complete`, `outage_paths` and the groups'
  `outage` / `total_excluding_outage` are new, and `n`, `n_neg`, `n_prog` and the groups' `total` count every row.
- *table.csv's `method` column holds `DISPLAY_NAMES` as they are, the cumulative block's "+ ..." included,
  though a spreadsheet opening the file may read a cell starting with "+" as a formula: the values are fixed
  text (no manifest or row fills a cell that starts with "=", "+", "-" or "@"), pandas and csv readers and
  scripts matching the paper's labels get them unchanged, and a quote or space in front ("'+ ...") would be
  part of the value for all of them. The README says to import the column as text or key on `preset`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from evals.table_means import USAGE_DIGITS, USAGE_NAMES, MeanReward, mean_rewards, usage_means
from evals.table_rows import check_row, not_boolean, outage, row_name
from graph.config import PRESETS

NEGATIVE_LABELS = ("failure", "unobservable")
PROGRESS_LABEL = "progress"
# Row names of the paper's Table 2, in its order (cumulative block, then removals from the full agent).
DISPLAY_NAMES: dict[str, str] = {
    "direct": "Direct base-model scoring",
    "structured": "+ Structured report and score mapping",
    "decomposed": "+ Task decomposition",
    "task_blind": "+ Task-blind observation",
    "visual_verify": "+ Adaptive visual verification",
    "motion": "+ Motion evidence (point tracks)",
    "wmreward": "+ WMReward feedback and reflection",
    "audit_no_gate": "+ Scope audit and repair (no failure gate)",
    "full": "Full Reward Agent",
    "no_task_blind": "Without task-blind observation",
    "no_visual_verify": "Without adaptive visual verification",
    "no_wmreward": "Without WMReward feedback and reflection",
    "no_audit": "Without scope audit and repair",
    "no_motion": "Without motion evidence",
}
PAPER_ORDER: tuple[str, ...] = tuple(DISPLAY_NAMES)


def ordered_presets(presets: Iterable[str]) -> list[str]:
    """Presets sorted in the paper's row order; raises ValueError naming unknown presets."""
    chosen = list(dict.fromkeys(p.strip() for p in presets if p.strip()))
    unknown = [p for p in chosen if p not in PRESETS]
    if unknown:
        raise ValueError(f"unknown preset(s) {', '.join(unknown)}; expected any of {', '.join(PAPER_ORDER)}")
    if not chosen:
        raise ValueError("no preset given")
    return sorted(chosen, key=PAPER_ORDER.index)


@dataclass
class PresetMetrics:
    """Table 2 metrics of one preset."""

    preset: str
    """Preset name."""
    n: int
    """Rows (clips) evaluated."""
    r: int
    """Outputs the judge accepted as reasonable."""
    unjudged: int
    """Outputs the judge could not judge (failures, no endpoint)."""
    skipped: int
    """Ineligible outputs not sent to the judge."""
    n_neg: int
    """Reference-negative rows (failure + unobservable)."""
    f_plus: int
    """Reference-negative rows with a positive reward."""
    n_prog: int
    """Progress rows."""
    p0: int
    """Progress rows with reward 0."""
    ineligible: int
    """Rows with reward None."""
    neg_ineligible: int = 0
    """Reference-negative rows with reward None."""
    prog_ineligible: int = 0
    """Progress rows with reward None."""
    outage: int = 0
    """Ineligible rows whose recorded faults say the machinery failed (`graph.schemas.Fault.outage`), not the clip."""
    neg_outage: int = 0
    """Reference-negative rows an outage took (left out of F+'s denominator)."""
    prog_outage: int = 0
    """Progress rows an outage took (left out of P0's denominator)."""
    outage_paths: list[str] = field(default_factory=list)
    """The clips of the `outage` rows, sorted (presets that lost different clips are measured over different ones)."""
    verdict_not_boolean: int = 0
    """Rows whose verdict is `judged` but whose `reasonable` is not true or false (`not_boolean`): not in R."""
    by_label: dict[str, MeanReward] = field(default_factory=dict)
    """Mean reward per reference label."""
    by_pattern: dict[str, MeanReward] = field(default_factory=dict)
    """Mean reward per hacking pattern."""
    usage_per_clip: dict[str, float | None] = field(default_factory=dict)
    """Mean calls, images, input and output tokens, stage-cache hits and attempts per clip, over the rows that
    recorded their usage, less the outage rows (None when none is left; attempts over the rows that recorded it,
    `evals.table_means.LATE_USAGE_KEYS`)."""
    usage_unknown: int = 0
    """Rows whose usage is not recorded (null: a scorer chunk that crashed; absent: another tool's rows), left
    out of `usage_per_clip` rather than counted as free."""
    usage_outage: int = 0
    """Outage rows whose recorded usage is left out of `usage_per_clip` (no output of the preset; `usage_means`)."""

    @property
    def usage_rows(self) -> int:
        """The rows `usage_per_clip` averages (attempts: those of them that recorded it)."""
        return self.n - self.usage_unknown - self.usage_outage

    def usage_cell(self, key: str, digits: int, missing: str = "-") -> str:
        """`usage_per_clip[key]` with `digits` decimals; `missing` when no row recorded its usage."""
        value = self.usage_per_clip.get(key)
        return missing if value is None else f"{value:.{digits}f}"

    @property
    def n_r(self) -> int:
        """R's denominator N: the rows an outage did not take (module docstring)."""
        return self.n - self.outage

    @property
    def r_pct(self) -> float:
        """R as a percentage of N (`n_r`; 0 when N is 0)."""
        return 100.0 * self.r / self.n_r if self.n_r else 0.0

    @property
    def not_judged(self) -> bool:
        """No row was judged although some could have been (no judge endpoint, every attempt failed): R is
        unknown, and 0 / N would read as a judge rejecting them all."""
        return bool(self.n) and self.unjudged > 0 and self.unjudged + self.skipped >= self.n

    @property
    def r_unknown(self) -> bool:
        """R has no value: `not_judged`, an outage took every row, or there is none (table.csv empty, summary.json
        null)."""
        return self.not_judged or not self.n_r

    @property
    def r_cell(self) -> str:
        """The R / N (%) cell ("not judged" when `not_judged`, "no result" when an outage took every row, "no rows"
        without any), naming the unjudged rows and the outage ones left out of N (module docstring)."""
        lost = f"; {self.outage} outage not counted" if self.outage else ""
        if not self.n:
            return "no rows"
        if self.n and not self.n_r:
            return f"no result (N = {self.n}, all lost to an outage)"
        if self.not_judged:
            return f"not judged (N = {self.n_r}{lost})"
        causes = [f"{self.unjudged} unjudged"] if self.unjudged else []
        if self.verdict_not_boolean:
            causes.append(f"{self.verdict_not_boolean} judged without a true/false verdict")
        return f"{self.r} / {self.n_r} ({self.r_pct:.1f}%" + "".join(f"; {c}" for c in causes) + lost + ")"

    @property
    def ineligible_cell(self) -> str:
        """The ineligible count, naming those an outage caused ("5 (3 outage)")."""
        return outage_cell(self.ineligible, self.outage)

    @property
    def f_cell(self) -> str:
        """The F+ / n_neg cell, n_neg less the outage rows, naming the other ineligible rows and the outage ones."""
        return _count_cell(self.f_plus, self.n_neg, self.neg_ineligible, self.neg_outage)

    @property
    def p_cell(self) -> str:
        """The P0 / n_prog cell, as `f_cell`."""
        return _count_cell(self.p0, self.n_prog, self.prog_ineligible, self.prog_outage)


def outage_cell(count: int, outage: int) -> str:
    """A count naming how many of it an outage caused ("5 (3 outage)"): the reward table's Ineligible cell, the
    world-model table's No answer cell (`evals.eval_views.vqa_table`)."""
    return f"{count}" + (f" ({outage} outage)" if outage else "")


def _count_cell(count: int, rows: int, ineligible: int, lost: int) -> str:
    """"COUNT / ROWS less LOST (K ineligible; LOST outage not counted)": `ineligible` includes the `lost` rows."""
    notes = ([f"{ineligible - lost} ineligible"] if ineligible > lost else []) + \
        ([f"{lost} outage not counted"] if lost else [])
    return f"{count} / {rows - lost}" + (f" ({'; '.join(notes)})" if notes else "")


def incomplete_notes(metrics: Sequence[PresetMetrics], rerun: str | None = None) -> list[str]:
    """What table.md, `raa eval reward` and the report page say of presets an outage took rows of (module
    docstring): which, how many of their rows, and whether the presets' results cover different clips. `rerun`:
    the run's own command (`evals.eval_runs.finish_command`), named with --retry-ineligible; without it the note
    says what the command needs: "`raa eval reward --retry-ineligible`" alone named no manifest, --out or
    --presets, and without the run's presets a rerun scored the default preset alone."""
    hit = [m for m in metrics if m.outage]
    if not hit:
        return []
    retry = (f"`{rerun} --retry-ineligible`" if rerun is not None else
             "`raa eval reward --retry-ineligible` with the run's --manifest, --out and --presets")
    lost = f"{hit[0].preset} lost {hit[0].outage} of {hit[0].n} rows" + "".join(
        f", {m.preset} {m.outage} of {m.n}" for m in hit[1:])
    notes = [f"incomplete: {lost}, to an outage of the reward machinery (an endpoint down, a tool or the scorer "
             "crashed, a setting refused): R, F+, P0, the mean rewards and the usage per clip leave those rows out; once "
             f"that is fixed, {retry} scores them again"]
    if len({tuple(m.outage_paths) for m in metrics}) > 1:
        notes.append("the presets lost different clips to the outage, so their R, F+ and P0 are measured over "
                     "different clips: compare them once a rerun has filled the rows")
    return notes


def preset_metrics(preset: str, rows: Sequence[dict]) -> PresetMetrics:
    """Metrics of one preset from its result rows (see the module docstring for definitions); a row that
    cannot be counted raises `TableRowError` (`check_row`)."""
    rows = [check_row(r, row_name(r, preset, i)) for i, r in enumerate(rows)]
    neg = [r for r in rows if r.get("label") in NEGATIVE_LABELS]
    prog = [r for r in rows if r.get("label") == PROGRESS_LABEL]
    # a row without a verdict (results written by another tool) is unjudged, or skipped when it has no reward
    # to judge, as the judge itself would have said
    judge = [r.get("judge") or ({"status": "skipped"} if r.get("reward") is None else {}) for r in rows]
    usage, unknown, spent = usage_means(rows)
    lost = [r for r in rows if outage(r)]
    return PresetMetrics(
        preset=preset, n=len(rows),
        r=sum(1 for j, r in zip(judge, rows, strict=True)
              if j.get("status") == "judged" and j.get("reasonable") is True and not outage(r)),
        unjudged=sum(1 for j in judge if j.get("status", "unjudged") == "unjudged"),
        skipped=sum(1 for j in judge if j.get("status") == "skipped"),
        n_neg=len(neg), f_plus=sum(1 for r in neg if r.get("reward") is not None and r["reward"] > 0),
        n_prog=len(prog), p0=sum(1 for r in prog if r.get("reward") is not None and r["reward"] == 0),
        ineligible=sum(1 for r in rows if r.get("reward") is None),
        neg_ineligible=sum(1 for r in neg if r.get("reward") is None),
        prog_ineligible=sum(1 for r in prog if r.get("reward") is None), outage=len(lost),
        neg_outage=sum(map(outage, neg)), prog_outage=sum(map(outage, prog)),
        outage_paths=sorted(str(r.get("path")) for r in lost),
        verdict_not_boolean=sum(1 for j in judge if not_boolean(j)),
        by_label=mean_rewards(rows, "label"), by_pattern=mean_rewards(rows, "pattern"), usage_per_clip=usage,
        usage_unknown=unknown, usage_outage=spent)


def all_metrics(rows: Sequence[dict], presets: Sequence[str]) -> list[PresetMetrics]:
    """Metrics for each preset (paper order) over the rows that belong to it."""
    return [preset_metrics(p, [r for r in rows if r.get("preset") == p]) for p in ordered_presets(presets)]


def _fmt(mean: float | None) -> str:
    return "-" if mean is None else f"{mean:.3f}"


def md_cell(text: str) -> str:
    """`text` as one Markdown table cell: a pipe escaped (it would end the cell and shift every later column),
    line breaks as spaces (one would end the row). Judge names and manifest patterns are free text."""
    return " ".join(text.replace("|", "\\|").splitlines())


def render_markdown(metrics: Sequence[PresetMetrics], *, judge_name: str = "judge", rerun: str | None = None) -> str:
    """Table 2 layout (R / N (%), F+ / n_neg, P0 / n_prog), then reliability extras and mean rewards; `rerun`: the
    run's command, for `incomplete_notes`."""
    judge_name = md_cell(judge_name)
    lines = [f"| Method | R / N (%) ↑ ({judge_name}) | F+ / n_neg ↓ | P0 / n_prog ↓ |", "| --- | --- | --- | --- |"]
    for m in metrics:
        lines.append(f"| {DISPLAY_NAMES[m.preset]} | {m.r_cell} | {m.f_cell} | {m.p_cell} |")
    lines += [f"\n{note[0].upper()}{note[1:]}." for note in incomplete_notes(metrics, rerun)]
    figures = [f"{USAGE_NAMES[k].capitalize()} / clip" for k, _, _ in USAGE_DIGITS]
    lines += ["", "| Preset | Ineligible | Unjudged | Skipped | " + " | ".join(figures) + " | Usage unknown |",
              "| --- |" + " --- |" * (len(figures) + 4)]
    for m in metrics:
        cells = [m.usage_cell(k, d) for k, d, _ in USAGE_DIGITS]
        lines.append(f"| {m.preset} | {m.ineligible_cell} | {m.unjudged} | {m.skipped} | {' | '.join(cells)} | "
                     f"{m.usage_unknown} |")
    for title, attr in (("label", "by_label"), ("pattern", "by_pattern")):
        names = sorted({k for m in metrics for k in getattr(m, attr)})
        if not names:
            continue
        lines += ["", f"Mean reward by {title} (rows with a reward / rows less outage rows):", "",
                  "| Preset | " + " | ".join(map(md_cell, names)) + " |", "| --- |" + " --- |" * len(names)]
        for m in metrics:
            groups = getattr(m, attr)
            cells = [f"{_fmt(groups[n].mean)} ({groups[n].counts})" if n in groups else ""
                     for n in names]
            lines.append(f"| {m.preset} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


CSV_FIELDS = ("preset", "method", "n", "r", "r_pct", "unjudged", "skipped", "f_plus", "n_neg", "neg_ineligible", "p0",
              "n_prog", "prog_ineligible", "ineligible", "ineligible_outage", *(f"{k}_per_clip" for k, _, _ in USAGE_DIGITS),
              "usage_unknown", "verdict_not_boolean", "n_r", "neg_outage", "prog_outage", "usage_outage")


def render_csv(metrics: Sequence[PresetMetrics]) -> str:
    """One CSV row per preset (plus `mean_<label>` / `pattern_<name>` columns)."""
    labels = sorted({k for m in metrics for k in m.by_label})
    patterns = sorted({k for m in metrics for k in m.by_pattern})
    header = [*CSV_FIELDS, *(f"mean_{x}" for x in labels), *(f"pattern_{x}" for x in patterns)]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for m in metrics:
        r, r_pct = ("", "") if m.r_unknown else (m.r, f"{m.r_pct:.2f}")  # as table.md: no count, not 0
        row: list[object] = [m.preset, DISPLAY_NAMES[m.preset], m.n, r, r_pct,
                             m.unjudged, m.skipped, m.f_plus, m.n_neg, m.neg_ineligible, m.p0,
                             m.n_prog, m.prog_ineligible, m.ineligible, m.outage,
                             *(m.usage_cell(k, d, "") for k, _, d in USAGE_DIGITS), m.usage_unknown,
                             m.verdict_not_boolean, m.n_r, m.neg_outage, m.prog_outage, m.usage_outage]
        row += ["" if x not in m.by_label or m.by_label[x].mean is None else f"{m.by_label[x].mean:.4f}"
                for x in labels]
        row += ["" if x not in m.by_pattern or m.by_pattern[x].mean is None else f"{m.by_pattern[x].mean:.4f}"
                for x in patterns]
        writer.writerow(row)
    return buf.getvalue()


SUMMARY_SCHEMA_VERSION = 2
"""summary.json's `schema_version`: what its metrics' fields mean (module docstring)."""


def metrics_as_dicts(metrics: Sequence[PresetMetrics]) -> list[dict]:
    """JSON-friendly metrics (for summary.json and the HTML index)."""
    return [{**asdict(m), "method": DISPLAY_NAMES[m.preset], "r": None if m.r_unknown else m.r,
             "r_pct": None if m.r_unknown else m.r_pct, "n_r": m.n_r, "complete": not m.outage,
             "not_judged": m.not_judged, "r_cell": m.r_cell} for m in metrics]
