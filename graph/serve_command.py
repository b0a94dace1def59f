"""`raa serve-reward`: the reward agent over HTTP for training's ``reward: http`` (graph/reward_service.py);
registered in graph/cli.py. The edge, as graph/commands.py: settings are read there (`settings_or_exit`), and the
chat model, tools and pre-flight come from that module (`make_chat_model` is the seam tests monkeypatch), looked
up when the command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from graph import commands
from graph.reward_limits import DEFAULT_MAX_BODY_MB, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_ITEMS
from tools.cli import BodyTimeoutOption, BusyWaitOption, token_option
from tools.service_budget import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BUFFERED_MB, DEFAULT_REWARD_BUSY_WAIT_S


def serve_reward_command(
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8766,
    preset: Annotated[str, typer.Option(help="Agent preset (paper Table 2).")] = "full",
    concurrency: Annotated[int, typer.Option(min=1, max=1024, help="Agent runs in flight over all requests.")] = DEFAULT_MAX_CONCURRENCY,
    token: Annotated[str | None, typer.Option(envvar="RAA_REWARD_TOKEN", show_envvar=True, callback=token_option("RAA_REWARD_TOKEN"),
                                              help="Bearer token required on /v1/* (none = open).")] = None,
    max_items: Annotated[int, typer.Option(min=1, help="Most clips in one request.")] = DEFAULT_MAX_ITEMS,
    max_body_mb: Annotated[float, typer.Option(min=0.001, help="Largest request body (MiB).")] = DEFAULT_MAX_BODY_MB,
    max_buffered_mb: Annotated[float | None, typer.Option(
        min=0.001, help=f"Request bodies held at once, until answered (MiB; default {DEFAULT_MAX_BUFFERED_MB:g}, or "
                        "--max-body-mb if larger); a request over it waits --busy-wait-s for room, then gets 503 "
                        "busy.")] = None,
    busy_wait_s: BusyWaitOption = DEFAULT_REWARD_BUSY_WAIT_S,
    body_timeout_s: BodyTimeoutOption = DEFAULT_BODY_TIMEOUT_S,
    keep_videos: Annotated[Path | None, typer.Option(help="Keep every request's clips here (for raa report "
                                                          "of training rewards); default: deleted.")] = None,
) -> None:
    """Serve the reward agent on /v1/score for training's `reward: http` (and /v1/info, /healthz)."""
    import uvicorn

    from graph.batch import build_batch_agent
    from graph.builder import default_checkpointer, frame_store_for
    from graph.reward_service import create_reward_app
    from tools.service import open_bind_warning
    from tools.service_budget import buffered_limit_bytes
    from tools.service_http import SERVER_KEEPALIVE_S

    settings = commands.settings_or_exit(require_endpoint=True)
    commands.check_preset(preset)
    try:  # before the endpoint check and the tool models
        buffered_limit_bytes(max_buffered_mb, int(max_body_mb * 1024 * 1024), "max_body_mb")
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if (warning := open_bind_warning(host, token, "RAA_REWARD_TOKEN")) is not None:
        typer.echo(warning, err=True)
    commands.preflight_or_exit(settings)  # a service that cannot reach its model answers every request ineligible
    tools = commands.loaded_tools(settings, preset)
    frames = frame_store_for(settings)  # the service drops each request's deleted clips from it
    agent = build_batch_agent(settings, preset, default_checkpointer(settings.traces_path),
                              commands.make_chat_model(settings), tools, frames)
    app = create_reward_app(agent, preset, token=token, max_concurrency=concurrency, max_items=max_items,
                            max_body_mb=max_body_mb, durability=settings.trace_durability, keep_videos=keep_videos,
                            claim_max_age_s=settings.foreign_claim_max_age_s,
                            frames=frames, max_buffered_mb=max_buffered_mb, busy_wait_s=busy_wait_s,
                            body_timeout_s=body_timeout_s,
                            info={"model": settings.model, "inspect_mode": settings.inspect_mode,
                                  "traces": settings.traces_path, "scoring": settings.scoring()})
    typer.echo(f"reward service: preset {preset}, traces in {settings.traces_path}; "
               f"trainer url http://{host}:{port}/v1/score", err=True)
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_keep_alive=SERVER_KEEPALIVE_S)
