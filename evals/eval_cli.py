"""`raa eval reward|report|world-model|compare|draws` and `raa report RUN_ID` (typer; registered in graph/cli.py;
compare and draws live in `evals.eval_stats_cli`, shared helpers in `evals.eval_cli_common`).

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
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from evals.eval_cli_common import console as _console
from evals.eval_cli_common import fail as _fail
from evals.eval_cli_common import out_dir as _out_dir
from evals.eval_cli_common import report_skipped as _report_skipped
from evals.eval_stats_cli import register
from evals.judge import JudgeSettings, RewardJudge

eval_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Evaluate rewards (Table 2 protocol) and world models (PAI-Bench-style VQA).")



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
        t.add_row(DISPLAY_NAMES[m.preset] if full else m.preset, m.r_cell, m.f_cell, m.p_cell, m.ineligible_cell,
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
    from evals.reliability import ManifestError, run_reward_eval
    from evals.reward_scorer import AgentScorer, load_eval_manifest
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

    def on_row(row: dict, done: int) -> None:  # done: of all `total` rows, those kept from earlier runs included
        verdict = (row.get("judge") or {}).get("status")
        reward = reward_text(row["reward"])  # a tiny positive one never reads 0 (evals.eval_views); rows keep it whole
        _console().print(f"[{done}/{total}] {row['preset']:<16} {Path(row['path']).name:<32} reward={reward} "
                         f"judge={verdict}", highlight=False)

    _console().print(f"{plural(len(clips), 'clip')} x {plural(len(chosen), 'preset')} = {plural(total, 'row')} -> {out}")
    try:
        outcome = asyncio.run(run_reward_eval(clips, chosen, out, scorer, judge, concurrency=concurrency,
                                              retry_ineligible=retry_ineligible, judge_name=judge_settings.model
                                              or "judge", on_row=on_row, scorer_id=scorer_of(settings),
                                              manifest=str(manifest.resolve())))  # `raa eval report` may run elsewhere
    except ManifestError as exc:  # results from another model in DIR
        raise _fail(str(exc)) from exc
    _print_table(outcome.metrics)
    for note in reward_notes(outcome):  # unjudged rows, dropped lines, rows of the older clip identity
        _console().print(note, style="yellow", highlight=False)
    _console().print(f"scored {outcome.scored}, re-judged {outcome.rejudged}; wrote {out / 'table.md'}, "
               f"{out / 'table.csv'}, {out / 'results.jsonl'}; HTML: raa eval report {shlex.quote(str(out))}")


@eval_app.command("report", help="Write DIR/index.html (table + a link per clip) and the run reports.")
def eval_report_command(
    directory: Annotated[Path, typer.Argument(help="Folder written by `raa eval reward`.")],
    traces: Annotated[Path | None, typer.Option("--traces", "--db",
                                                help="Trace database (default RAA_TRACES_PATH).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Rewrite existing run reports.")] = False,
) -> None:
    from evals.eval_views import no_rows
    from evals.report_index import input_errors, write_eval_index
    from graph.trace_commands import claim_age_option, traces_path_option

    traces_path = traces_path_option(traces)
    try:  # no row: say so, exit 0, as `raa eval draws` (the page says it too)
        index = write_eval_index(directory, traces_path=traces_path, overwrite=overwrite,
                                 claim_max_age_s=claim_age_option(),
                                 on_empty=lambda note: _console().print(no_rows(note, "report"), highlight=False),
                                 on_unfinished=lambda note: typer.echo(f"warning: {note}", err=True))
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
    from evals.vqa import VQAManifestError, read_vqa_manifest, run_vqa, vqa_setting_names, write_vqa_report
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
    backbone = Backbone.from_settings(settings, model=make_chat_model(settings), cache=StageCache(settings.cache_path),
                                      setting_names=vqa_setting_names())
    report = asyncio.run(run_vqa(items, backbone, concurrency=concurrency, long_side=settings.image_long_side,
                                 quality=settings.jpeg_quality))
    report.skipped_lines = skipped
    path = write_vqa_report(report, out)
    if code := show_vqa(report, path, _console()):  # no answer at all: no accuracy, the reasons (evals.eval_views)
        raise typer.Exit(code)


register(eval_app)  # `raa eval compare` and `raa eval draws` (evals/eval_stats_cli.py), after these in --help


def report_command(
    run_id: Annotated[str, typer.Argument(help="Run id (checkpoint thread id), see `raa runs`.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="HTML file (default runs/reports/<id>.html).")] = None,
    traces: Annotated[Path | None, typer.Option("--traces", "--db",
                                                help="Trace database (default RAA_TRACES_PATH).")] = None,
) -> None:
    """Write one self-contained HTML page for an agent run."""
    from evals.report import write_run_report
    from graph.stores import StoreError
    from graph.trace_commands import claim_age_option, traces_path_option
    from graph.tracing import RunNotFoundError

    traces_path = traces_path_option(traces)
    try:
        path = write_run_report(run_id, out, traces_path=traces_path, claim_max_age_s=claim_age_option())
    except RunNotFoundError as exc:
        raise _fail(str(exc), 1) from exc
    except StoreError as exc:  # the file or the run's checkpoint cannot be read (graph.tracing.UnreadableRunError)
        raise _fail(str(exc)) from exc
    except OSError as exc:  # --out a folder, or a place that cannot be written: one line, not a traceback
        raise _fail(f"cannot write {exc.filename or out}: {exc.strerror or exc} (--out names the HTML file)") from exc
    _console().print(f"wrote {path}")
