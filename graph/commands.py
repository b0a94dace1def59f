"""Agent CLI commands (`raa score`; `raa score-batch` is in graph/batch_command.py, `raa serve-reward` in
graph/serve_command.py, `raa runs` and `raa trace` in graph/trace_commands.py) and the edge helpers those share
(settings, chat model, tools, endpoint pre-flight); registered in graph/cli.py.

This is the edge: settings come from `BackboneSettings.from_env()` here and nowhere deeper. Without a
configured endpoint the score commands exit with status 2 and say how to connect one; they never
produce a reward without a model.

Decisions where the issue was silent:
- Exit codes: 0 = a result was produced (scored or zero); 3 = `raa score` produced an ineligible
  result (reward None, reasons printed); 2 = configuration / input error; 1 = unknown run id. A result
  whose trace could not be saved (`graph.run_results.unsaved_trace`, `trace_saved` false) is still a result: exit 0 (3 when
  ineligible), its last reason says why, and stderr says "trace not saved" instead of the `raa trace` hint.
- `raa score --json` prints only the RewardResult JSON on stdout (the trace hint goes to stderr).
- `raa score` checks the endpoint first, as score-batch does (graph/endpoint.py): exit 2, not 3 after the retries;
  before it, its clip path and instruction (graph/score_inputs.py): a bad one is its ineligible result (3) at once.
- `score-batch` (graph/batch_command.py): rows, resume keys and bad manifest lines are described in `graph.batch`.
- The agent's nodes are async, so `--stream` streams the node updates (`graph.api.arun_agent`'s `on_update`)
  and prints one line per node update on stderr. It is the same run as without `--stream` (trace look-up,
  run-id claim in the trace database, release): it ran `agent.astream` itself and claimed nothing.
- The CLI builds the Backbone itself (`Backbone.from_settings`) so the on-disk stage cache
  (`RAA_CACHE_PATH`) is used and keyed by `RAA_MODEL`.
- `make_chat_model` is the seam tests monkeypatch to inject a scripted model.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from langchain_core.language_models import BaseChatModel
from rich import box
from rich.console import Console
from rich.table import Table

from graph.backbone import default_chat_model
from graph.endpoint import preflight
from graph.reward_format import reward_text
from graph.score_inputs import input_problem
from graph.settings import BackboneSettings, SettingsError
from graph.trace_text import describe_update, printable
from graph.tracing import open_async_saver

if TYPE_CHECKING:  # pragma: no cover
    from tools.settings import ToolSettings

# markup and emoji codes off: reasons ("[assess] timeout: ..."), decisions, paths are data; rich would read
# "[assess]" as a style and ":x:" as an emoji (their control characters: graph.trace_text.printable)
_out = Console(markup=False, emoji=False)
RUNS_FULL_WIDTH = 110
"""Run tables (`raa runs`, the demo's, eval's Table 2) print every column with full timestamps on consoles
at least this wide; narrower ones get a compact table (no step count, month-day hour:minute, no vertical
rules) with only the video folding."""


def run_table(title: str, width: int) -> tuple[Table, bool]:
    """(table, full) for a list of runs (`raa runs`, the demo's scores): the ruled layout on consoles at least
    RUNS_FULL_WIDTH wide (full=True), else a compact one without vertical rules or edge padding."""
    full = width >= RUNS_FULL_WIDTH
    table = Table(title=title, box=box.HEAVY_HEAD if full else box.SIMPLE_HEAD, pad_edge=full,
                  collapse_padding=not full)
    return table, full


def make_chat_model(settings: BackboneSettings) -> BaseChatModel:
    """The chat model the CLI scores with (tests replace this function)."""
    return default_chat_model(settings)


def settings_or_exit(require_endpoint: bool) -> BackboneSettings:
    try:
        settings = BackboneSettings.from_env()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if require_endpoint and not settings.configured:
        typer.echo(f"error: {settings.describe_missing()}", err=True)  # unwrapped: commands stay copyable
        raise typer.Exit(2)
    return settings


def check_preset(preset: str) -> None:
    from graph import AgentConfig  # deferred: the agent graph is heavy to import

    try:
        AgentConfig(preset=preset)  # type: ignore[arg-type]
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _result_table(result: Any) -> Table:
    table = Table(title=f"run {result.run_id}", show_header=False)
    reward = "⊥ (ineligible)" if result.reward is None else reward_text(result.reward)
    rows = [("reward", reward), ("status", result.status), ("preset", result.preset)]
    rows += [(k, "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)))
             for k, v in (("T", result.T), ("P", result.P), ("V", result.V), ("failure", result.failure),
                          ("unverifiable", result.unverifiable))]
    rows += [("reasons", printable("\n".join(result.reasons)) or "-"),
             ("usage", " ".join(f"{k}={v}" for k, v in result.usage.items()))]
    for k, v in rows:
        table.add_row(k, v)
    return table


def score_command(
    video: Path = typer.Argument(..., help="Video file to score."),
    instruction: str = typer.Option(..., "--instruction", "-i", help="Task instruction the robot was given."),
    preset: str = typer.Option("full", "--preset", help="Agent preset (paper Table 2), e.g. full, direct."),
    json_out: bool = typer.Option(False, "--json", help="Print the RewardResult as JSON only."),
    stream: bool = typer.Option(False, "--stream", help="Print each node's update as it happens."),
    draw: int = typer.Option(0, "--draw", min=0, help="Stage-cache draw: another number samples the "
                             "backbone's answers anew (RAA_TEMPERATURE > 0) instead of reusing cached ones."),
) -> None:
    """Score one video against an instruction with the reward agent."""
    from graph.api import clip_path, new_run_id  # deferred: the agent graph is heavy to import
    from graph.run_results import trace_saved

    settings = settings_or_exit(require_endpoint=True)
    settings.ensure_parent_dirs()
    check_preset(preset)
    clip = clip_path(video)  # as the run gets and names it (a symlink loop: made absolute only, no traceback)
    if problem := input_problem(clip, instruction, settings.agent_config(preset).max_instruction_chars):
        typer.echo(f"error: {problem}", err=True)  # at once, no wait first: the run ends ineligible at it
    else:  # a wrong endpoint: exit 2 with the problem, not exit 3 after every retry
        preflight_or_exit(settings)
    tools = None if problem else loaded_tools(settings, preset)  # a tool that cannot load: exit 2, no model call
    run_id = new_run_id()
    result = asyncio.run(_score_one(settings, preset, clip, instruction, run_id, stream, draw, tools))
    if json_out:
        typer.echo(result.model_dump_json())
    else:
        _out.print(_result_table(result))
    typer.echo(_trace_hint(result.run_id or run_id, trace_saved(result), settings.traces_path), err=True)
    if result.status == "ineligible":
        raise typer.Exit(3)


def _trace_hint(run_id: str, saved: bool, traces_path: str) -> str:
    """Where `raa score` says the run's trace is: the `raa trace` command, or why there is none to read (not
    saved; kept in memory only, gone with this process, where `raa trace` would find no database)."""
    if not saved:
        return "trace not saved: see the last reason"
    if traces_path == ":memory:":
        return "trace kept in memory only (RAA_TRACES_PATH=:memory:): `raa trace` cannot read it"
    return f"trace: raa trace {run_id}"


async def _score_one(settings: BackboneSettings, preset: str, video: str, instruction: str, run_id: str,
                     stream: bool, draw: int = 0, tools: Any = None) -> Any:
    from graph.api import arun_agent
    from graph.batch import build_batch_agent

    async with open_async_saver(settings.traces_path) as saver:
        agent = build_batch_agent(settings, preset, saver, make_chat_model(settings), tools, draw=draw)
        return await arun_agent(agent, video, instruction, run_id, preset, durability=settings.trace_durability,
                                on_update=(lambda node, update: typer.echo(describe_update(node, update), err=True))
                                if stream else None,
                                claim_max_age_s=settings.foreign_claim_max_age_s)


def preflight_or_exit(settings: BackboneSettings) -> None:
    """The endpoint pre-flight (graph/endpoint.py); its problem is one error line and exit 2."""
    if problem := preflight(settings):
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)


def loaded_tools(settings: BackboneSettings, preset: str, tool_settings: ToolSettings | None = None) -> Any:
    """A Toolbox from `tool_settings` (None: the `RAA_*` tool settings, read here) with the preset's models
    loaded (exit 2 naming the tool that cannot load): for commands that would otherwise find out in every run,
    each one ineligible."""
    from graph.context import loaded_toolbox
    from tools.errors import ToolFault
    from tools.settings import ToolSettings

    try:
        tools = ToolSettings.from_env() if tool_settings is None else tool_settings
        return loaded_toolbox(tools, settings.agent_config(preset))
    except ToolFault as exc:
        avoid = {"surprise": "no_wmreward (no V-JEPA 2)", "motion": "no_motion (no CoTracker3)"}.get(exc.tool)
        typer.echo(f"error: {exc}" + (f"\nscore with a preset without that tool, e.g. --preset {avoid}; "
                                      "`raa doctor` checks the tool settings" if avoid else ""), err=True)
        raise typer.Exit(2) from exc
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
