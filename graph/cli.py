"""The `raa` command line (typer). Each command lives beside the code it drives; this module
only assembles them into one app. Settings are read from the environment here, at the edge.
A trace database or stage cache that cannot be used (`graph.stores.StoreError`, from any command) is
printed as one error line with exit status 2, like a bad setting."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from evals.cli import make_clips_command
from evals.eval_cli import eval_app, report_command
from graph.batch_command import score_batch_command
from graph.commands import score_command
from graph.demo import demo_command
from graph.doctor import doctor_command
from graph.prune_command import prune_command
from graph.serve_command import serve_reward_command
from graph.trace_commands import runs_command, trace_command
from tools.cli import serve_tools_command


class _Commands(TyperGroup):
    """The app's command group: a StoreError ends the command with its message instead of a traceback, caught in
    Click's own invocation (what `raa` and Click's CliRunner both go through: caught in `Typer.__call__`, which
    the runner does not call, the tests saw exit 1 and the exception where the CLI gives exit 2)."""

    def invoke(self, ctx: Any) -> Any:  # Any: typer's own click Context (typer vendors click)
        from graph.stores import StoreError

        try:
            return super().invoke(ctx)
        except StoreError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(cls=_Commands, no_args_is_help=True, add_completion=False,
                  help="Reward as an Agent: score robot videos with an evidence-grounded reward agent.")
app.command("demo", help="Render the sample clip suite, check it without a model (quality, motion tracks) and, "
                  "with an endpoint configured, score it with the reward agent.")(demo_command)
app.command("doctor", help="Check the endpoint, model, trace/cache files, video I/O and tools before scoring.")(
    doctor_command)
app.command("make-clips", help="Render the labelled MuJoCo clip suite and its manifest.")(make_clips_command)
app.command("score", help="Score one video against an instruction.")(score_command)
app.command("score-batch", help="Score a manifest of videos (resumable).")(score_batch_command)
app.command("runs", help="List traced agent runs.")(runs_command)
app.command("trace", help="Print every step of one agent run.")(trace_command)
app.command("prune", help="Delete traced runs (and the stage cache's entries) no longer needed.")(prune_command)
app.command("serve-tools", help="Serve the evidence tools over HTTP.")(serve_tools_command)
app.command("serve-reward", help="Serve the reward agent over HTTP (training's reward: http).")(serve_reward_command)
app.command("report", help="Write a self-contained HTML report of one agent run.")(report_command)
app.add_typer(eval_app, name="eval")


if __name__ == "__main__":  # pragma: no cover
    app()
