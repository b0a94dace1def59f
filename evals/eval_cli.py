"""`raa eval reward|report|world-model|compare|draws` and `raa report RUN_ID` (typer; registered in graph/cli.py).

This is the edge: the agent's endpoint comes from `BackboneSettings.from_env()` (RAA_*), the judge's from
`JudgeSettings.from_env()` (RAA_JUDGE_*), the tools from `ToolSettings.from_env()`.

Decisions where the issue was silent:
- Exit codes: 0 done; 2 configuration or input error (unset endpoint, bad manifest, unknown preset); 1 run not
  found; 3 `raa eval world-model` got no answer to any question (no accuracy; `evals.eval_views`). `raa eval reward` without a judge endpoint still scores and tabulates, with every row unjudged (a
  later rerun with RAA_JUDGE_* set judges them without rescoring).
- `raa eval reward` shares one backbone (one stage cache), one toolbox and one trace database across presets.
- Run reports draw track overlays with the Lucas-Kanade tracker (no weights to load for a picture).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from evals.judge import JudgeSettings, RewardJudge
from tools.jsonl import write_text_atomic

eval_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Evaluate rewards (Table 2 protocol) and world models (PAI-Bench-style VQA).")


def _console() -> Console:
    return Console(soft_wrap=True, markup=False)  # presets, paths and reasons are data, never style tags


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _write_json(path: Path | None, data: dict[str, Any], console: Console) -> None:
    """`--json PATH`: write `data` there (folders created) and say so; nothing without a path."""
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, json.dumps(data, indent=2))
        except OSError as exc:  # a folder, an unwritable place: one error line, not a traceback
            raise _fail(f"cannot write --json {path}: {exc.strerror or exc}") from exc
        console.print(f"wrote {path}")


def _out_dir(out: Path) -> None:
    """Create the `--out` folder before any model is called: a path that is a file (or under one), or a place
    that cannot be written, was a traceback, and for `world-model` only after every question was asked."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _fail(f"cannot use --out {out}: {exc.strerror or exc} (it must be a folder)") from exc


def _report_skipped(skipped: list) -> None:
    """Each line a reader skipped, on stderr (`evals.eval_views.skipped_lines`)."""
    from evals.eval_views import skipped_lines

    for line in skipped_lines(skipped):
        typer.echo(line, err=True)


def make_judge(settings: JudgeSettings) -> RewardJudge:
    """The judge the CLI uses (tests replace this function to inject a scripted model)."""
    return RewardJudge.from_settings(settings)


def make_tools() -> Any:
    """The evidence tools the agent uses (configured from RAA_* tool settings; tests replace this)."""
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    return Toolbox(ToolSettings.from_env())


def _backbone_settings(require_endpoint: bool = True):
    from graph.settings import BackboneSettings, SettingsError

    try:
        settings = BackboneSettings.from_env()
    except SettingsError as exc:
        raise _fail(str(exc)) from exc
    if require_endpoint:
        if not settings.configured:
            raise _fail(settings.describe_missing())
        from graph.endpoint import preflight

        problem = preflight(settings)  # every preset on every clip, or every question: long, so ask first
        if problem:
            raise _fail(problem)
        settings.ensure_parent_dirs()  # only commands that write the cache / traces create their folders
    return settings


def _load_tools(settings: Any, presets: list[str], tools: Any) -> None:
    """Load the evidence models the chosen presets use now (as `raa score-batch`, `raa serve-reward` and
    training do): a tool that cannot load would otherwise make every row of those presets an ineligible
    row, after every clip's run. Exit 2 naming the tool and the presets that use it."""
    from graph.context import preload_tools
    from tools.errors import ToolFault

    for preset in presets:
        try:
            preload_tools(settings.agent_config(preset), tools)
        except (ToolFault, ValueError) as exc:
            tool = exc.tool if isinstance(exc, ToolFault) else "evidence"
            switch = {"motion": "motion", "surprise": "wmreward"}.get(tool)
            users = [p for p in presets if switch is None or settings.agent_config(p).switches()[switch]]
            raise _fail(f"the {tool} tool cannot load ({exc}); presets {', '.join(users)} use it: fix its "
                        "RAA_* tool setting (see `raa doctor`) or leave them out of --presets") from exc


def _print_table(metrics: list) -> None:
    """The Table 2 layout; on consoles narrower than RUNS_FULL_WIDTH the rows are labelled by preset id
    (the paper's labels run to 42 characters and would fold over several lines) and rules are dropped."""
    from evals.eval_views import usage_lines
    from evals.table import DISPLAY_NAMES
    from graph.commands import run_table

    console = _console()
    t, full = run_table("Reward reliability (Table 2 layout)", console.width)
    t.add_column("Method" if full else "Preset", no_wrap=True)
    for col in ("R / N (%)", "F+ / n_neg", "P0 / n_prog", "Inelig.", "Unjudged"):
        t.add_column(col)
    for m in metrics:
        t.add_row(DISPLAY_NAMES[m.preset] if full else m.preset, m.r_cell, m.f_cell, m.p_cell, str(m.ineligible),
                  str(m.unjudged))
    console.print(t)
    if not full:
        console.print("(rows by preset id; the paper's method labels appear from a 110-column console up, "
                      "and are in table.md)")
    for line in usage_lines(metrics):
        console.print(line, highlight=False)


@eval_app.command("reward", help="Run presets over a manifest; judge, tabulate (table.md/csv), resumable.")
def reward_command(
    manifest: Annotated[Path, typer.Option("--manifest", "-m", help="Clip manifest (JSONL).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    presets: Annotated[str, typer.Option(help="Comma-separated presets, e.g. full,direct; 'all' = all 14.")] = "full",
    concurrency: Annotated[int, typer.Option(min=1, help="Clips scored / judged at once.")] = 16,
    retry_ineligible: Annotated[bool, typer.Option(
        help="Re-score rows ineligible for a reason a rerun can fix (a transport fault, a crashed scorer, a clip "
             "that could not be read and can be now); an undecodable clip or a bad instruction stays.")] = False,
) -> None:
    from evals.eval_views import plural, reward_notes
    from evals.judge import JudgeSettings
    from evals.reliability import AgentScorer, ManifestError, load_eval_manifest, run_reward_eval
    from evals.table import PAPER_ORDER, ordered_presets
    from graph.backbone import Backbone
    from graph.batch import scorer_of
    from graph.builder import default_checkpointer
    from graph.cache import StageCache
    from graph.commands import make_chat_model
    from graph.reward_format import reward_text

    try:
        chosen = ordered_presets(PAPER_ORDER if presets.strip() == "all" else presets.split(","))
        clips = load_eval_manifest(manifest)
        judge_settings = JudgeSettings.from_env()
    except (ManifestError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    settings = _backbone_settings()
    _out_dir(out)
    judge = make_judge(judge_settings)
    if judge.backbone is None:
        typer.echo(f"warning: {judge.unconfigured_reason}; rows stay unjudged (R not measured)", err=True)
    elif judge_settings.base_url and settings.endpoint_wait_s > 0:  # as the agent's: a judge that never
        from graph.endpoint import check_server  # answers cost every row its retries, then left it unjudged

        problem = check_server(judge_settings.base_url, judge_settings.model or "", judge_settings.api_key,
                               wait_s=settings.endpoint_wait_s, timeout_s=judge_settings.timeout_s,
                               env="RAA_JUDGE", role="judge")
        if problem:
            raise _fail(f"{problem} (unset RAA_JUDGE_BASE_URL to score without judging, and judge the rows on a "
                        "later rerun; RAA_ENDPOINT_WAIT_S=0 skips this check)")
    try:
        tools = make_tools()
    except ValueError as exc:  # a bad RAA_* tool setting (ToolSettingsError), as `raa score-batch` reports it
        raise _fail(str(exc)) from exc
    _load_tools(settings, chosen, tools)
    backbone = Backbone.from_settings(settings, model=make_chat_model(settings), cache=StageCache(settings.cache_path))
    scorer = AgentScorer(backbone=backbone, tools=tools, settings=settings,
                         checkpointer=default_checkpointer(settings.traces_path), max_concurrency=concurrency)
    total = len(clips) * len(chosen)
    done = [0]

    def on_row(row: dict) -> None:
        done[0] += 1
        verdict = (row.get("judge") or {}).get("status")
        reward = reward_text(row["reward"])  # a tiny positive one never reads 0 (evals.eval_views); rows keep it whole
        _console().print(f"[{done[0]}] {row['preset']:<16} {Path(row['path']).name:<32} reward={reward} "
                         f"judge={verdict}", highlight=False)

    _console().print(f"{plural(len(clips), 'clip')} x {plural(len(chosen), 'preset')} = {plural(total, 'row')} -> {out}")
    try:
        outcome = asyncio.run(run_reward_eval(clips, chosen, out, scorer, judge, concurrency=concurrency,
                                              retry_ineligible=retry_ineligible, judge_name=judge_settings.model
                                              or "judge", on_row=on_row, scorer_id=scorer_of(settings)))
    except ManifestError as exc:  # results from another model in DIR
        raise _fail(str(exc)) from exc
    _print_table(outcome.metrics)
    for note in reward_notes(outcome):  # unjudged rows, dropped lines, rows of the older clip identity
        _console().print(note, style="yellow", highlight=False)
    _console().print(f"scored {outcome.scored}, re-judged {outcome.rejudged}; wrote {out / 'table.md'}, "
               f"{out / 'table.csv'}, {out / 'results.jsonl'}; HTML: raa eval report {out}")


@eval_app.command("report", help="Write DIR/index.html (table + a link per clip) and the run reports.")
def eval_report_command(
    directory: Annotated[Path, typer.Argument(help="Folder written by `raa eval reward`.")],
    traces: Annotated[Path | None, typer.Option("--traces", "--db",
                                                help="Trace database (default RAA_TRACES_PATH).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Rewrite existing run reports.")] = False,
) -> None:
    from evals.eval_views import no_rows
    from evals.report_index import input_errors, write_eval_index

    traces_path = traces or Path(_backbone_settings(require_endpoint=False).traces_path)
    try:  # no row: say so, exit 0, as `raa eval draws` (the page says it too)
        index = write_eval_index(directory, traces_path=traces_path, overwrite=overwrite,
                                 on_empty=lambda note: _console().print(no_rows(note, "report"), highlight=False))
    except input_errors() as exc:
        raise _fail(str(exc)) from exc
    except OSError as exc:  # DIR/reports or a page that cannot be written: one line, not a traceback
        raise _fail(f"cannot write the report pages in {directory}: {exc.strerror or exc}"
                    + (f" ({exc.filename})" if exc.filename else "")) from exc
    _console().print(f"wrote {index}")


@eval_app.command("world-model", help="PAI-Bench-style VQA: 8 frames, binary questions, Domain accuracy.")
def world_model_command(
    manifest: Annotated[Path, typer.Option("--manifest", "-m", help="VQA manifest (JSONL with questions).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (vqa.json).")],
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight.")] = 8,
) -> None:
    from evals.eval_views import show_vqa
    from evals.vqa import VQAManifestError, read_vqa_manifest, run_vqa, write_vqa_report
    from graph.backbone import Backbone
    from graph.cache import StageCache
    from graph.commands import make_chat_model

    try:
        items, skipped = read_vqa_manifest(manifest)
    except VQAManifestError as exc:
        raise _fail(str(exc)) from exc
    _report_skipped(skipped)
    settings = _backbone_settings().with_overrides(temperature=0.0)  # greedy decoding, whatever RAA_TEMPERATURE says
    _out_dir(out)
    backbone = Backbone.from_settings(settings, model=make_chat_model(settings), cache=StageCache(settings.cache_path))
    report = asyncio.run(run_vqa(items, backbone, concurrency=concurrency, long_side=settings.image_long_side,
                                 quality=settings.jpeg_quality))
    report.skipped_lines = skipped
    path = write_vqa_report(report, out)
    if code := show_vqa(report, path, _console()):  # no answer at all: no accuracy, the reasons (evals.eval_views)
        raise typer.Exit(code)


@eval_app.command("compare", help="Pair two score-batch outputs (e.g. trained vs base policy) and compare rewards.")
def compare_command(
    a: Annotated[Path, typer.Argument(help="Results of side A (raa score-batch output), e.g. the trained policy's.")],
    b: Annotated[Path, typer.Argument(help="Results of side B, e.g. the base model's from the same noise.")],
    pair_by: Annotated[str, typer.Option(help="Manifest field pairing the rows (training.generate writes 'key').")] = "key",
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap interval.")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the comparison as JSON.")] = None,
    instructions: Annotated[int, typer.Option(min=0, help="Show the N instructions whose mean reward changed "
                                              "most (0: none; --json has all).")] = 10,
    draw: Annotated[int | None, typer.Option(min=0, help="Compare only draw K of files holding several draws "
                                             "(score-batch --draw K into one output).")] = None,
) -> None:
    from evals.compare import CompareError, compare, most_changed
    from evals.eval_views import changed_table, empty_sides, mean_text, sides_table

    try:
        result = compare(a, b, pair_by=pair_by, seed=seed, draw=draw)
    except CompareError as exc:
        raise _fail(str(exc)) from exc
    skipped = [*result.a.skipped_lines, *result.b.skipped_lines]
    _report_skipped(skipped)
    console = _console()
    if empty := empty_sides(result):  # exit 0 as `raa eval draws`: a table of zeros said nothing of why
        for line in empty:
            console.print(line, highlight=False)
        return _write_json(json_out, result.as_dict(), console)
    console.print(sides_table(result))
    if result.pairs_scored_differently:
        console.print(f"warning: {result.pairs_scored_differently} of the {result.n} compared pairs were "
                      "scored by another preset, model or temperature on each side: their difference measures the "
                      "scorers as well as the videos (re-score one side to compare like with like)", style="yellow")
    if result.pairs_instruction_differs:
        console.print(f"warning: {result.pairs_instruction_differs} of the {result.n} compared pairs name different "
                      f"instructions on each side (first: {pair_by} {result.first_instruction_mismatch!r}): they "
                      "are not the same task, so the sides were not generated from the same prompt list or "
                      "order; pair them by another field (--pair-by)", style="yellow")
    if result.pairs_scorer_unrecorded:
        console.print(f"note: {result.pairs_scorer_unrecorded} of the {result.n} compared pairs have a row "
                      "whose scoring model is not recorded (written before score-batch recorded it)", style="yellow")
    for name, side in (("A", result.a), ("B", result.b)):
        if side.bad_lines:
            console.print(f"note: {side.bad_lines} row(s) of {name} are manifest lines that named no clip "
                          "(ineligible, not paired)", style="yellow")
    if draw is not None:
        console.print(f"draw {draw} of each file")
    console.print(f"pairs by {pair_by!r}: {result.pairs} ({result.pairs_ineligible} left out: an ineligible "
                  f"reward; unpaired: {result.unpaired_a} in A, {result.unpaired_b} in B)")
    if result.n:
        ci = "-" if result.ci95 is None else f"[{result.ci95[0]:+.4f}, {result.ci95[1]:+.4f}]"
        p = "-" if result.p_sign is None else f"{result.p_sign:.3g}"
        console.print(f"n = {result.n}: mean A {mean_text(result.mean_a)}, mean B {mean_text(result.mean_b)}, "
                      f"A - B {result.mean_diff:+.4f}, 95% bootstrap CI {ci}; "
                      f"wins/ties/losses {result.wins}/{result.ties}/{result.losses}, sign test p = {p}")
        shown = most_changed(result.by_instruction, instructions) if len(result.by_instruction) > 1 else []
        if shown:
            console.print(changed_table(shown, len(result.by_instruction)))
    else:
        console.print("no pair with two eligible rewards: nothing to compare")
        if result.hint:
            console.print(result.hint, style="yellow")
    _write_json(json_out, result.as_dict(), console)
    if skipped and not result.n:  # the skipped lines may have held the pairs: no "nothing to compare" exit 0
        raise _fail(f"no pair to compare, and {len(skipped)} line(s) were skipped as no usable row (listed above)")


@eval_app.command("draws", help="How much rewards move across draws (score-batch --draw k into one output).")
def draws_command(
    results: Annotated[Path, typer.Argument(help="A raa score-batch output holding draws 0..N-1 of a manifest.")],
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the summary as JSON.")] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="The preset to summarise (needed when the file "
                                               "holds several).")] = None,
) -> None:
    from evals.draws import DrawsError, clip_labels, shown_preset, summarize_draws
    from evals.eval_views import draw_rewards, plural

    try:
        s = summarize_draws(results, preset)
    except DrawsError as exc:
        raise _fail(str(exc)) from exc
    _report_skipped(s.skipped_lines)
    console = _console()
    if not s.rows:  # exit 0, as `raa eval compare` and `raa eval report` on empty results
        console.print(f"no rows in {results}: nothing to measure")
        _write_json(json_out, s.as_dict(), console)
        return
    console.print(f"preset {shown_preset(s.preset)}: {plural(s.rows, 'row')}, {plural(s.clips, 'clip')}, "
                  f"{s.draws_min}-{s.draws_max} draws per clip; {plural(s.ineligible_rows, 'ineligible row')} left "
                  f"out; {plural(s.clips_single, 'clip')} with < 2 eligible draws")
    if s.bad_lines:
        console.print(f"note: {s.bad_lines} of those rows are manifest lines that named no clip (no clip of theirs "
                      "is counted)", style="yellow")
    if s.n:
        share = "-" if s.noise_share is None else f"{s.noise_share:.3f}"
        between = "- (one clip)" if s.between_std is None else f"{s.between_std:.4f}"
        console.print(f"n = {plural(s.n, 'clip')}: within-clip std {s.within_std:.4f}, between-clip std {between}, "
                      f"noise share {share}; range mean {s.mean_range:.4f}, max {s.max_range:.4f}; "
                      f"status flips (scored vs zero) {s.status_flips}")
        t = Table(title="Most variable clips")
        for col in ("Clip", "Rewards by draw", "Range"):
            t.add_column(col)
        for c, label in zip(s.most_variable, clip_labels(s.most_variable), strict=True):
            t.add_row(label, draw_rewards(c["rewards"], c["statuses"], c["draws"], c["ineligible_draws"]),
                      f"{c['range']:.4f}")
        console.print(t)
    else:
        console.print("no clip with two eligible draws: nothing to measure")
    _write_json(json_out, s.as_dict(), console)
    if s.skipped_lines and not s.n:  # the skipped lines may have held the draws that were missing
        raise _fail(f"no clip with two eligible draws, and {len(s.skipped_lines)} line(s) were skipped as no "
                    "usable row (listed above)")


def report_command(
    run_id: Annotated[str, typer.Argument(help="Run id (checkpoint thread id), see `raa runs`.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="HTML file (default runs/reports/<id>.html).")] = None,
    traces: Annotated[Path | None, typer.Option("--traces", "--db",
                                                help="Trace database (default RAA_TRACES_PATH).")] = None,
) -> None:
    """Write one self-contained HTML page for an agent run."""
    from evals.report import write_run_report
    from graph.stores import StoreError
    from graph.tracing import RunNotFoundError

    traces_path = traces or Path(_backbone_settings(require_endpoint=False).traces_path)
    try:
        path = write_run_report(run_id, out, traces_path=traces_path)
    except RunNotFoundError as exc:
        raise _fail(str(exc), 1) from exc
    except StoreError as exc:  # the file or the run's checkpoint cannot be read (graph.tracing.UnreadableRunError)
        raise _fail(str(exc)) from exc
    except OSError as exc:  # --out a folder, or a place that cannot be written: one line, not a traceback
        raise _fail(f"cannot write {exc.filename or out}: {exc.strerror or exc} (--out names the HTML file)") from exc
    _console().print(f"wrote {path}")
