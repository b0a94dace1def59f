"""``raa serve-tools``: run the evidence-tool service with uvicorn (registered in graph/cli.py).

The environment is read here, at the edge: ``ToolSettings.from_env()`` for model settings, and
``RAA_TOOLS_TOKEN`` as the token default (printable ASCII, ``tools.settings.check_token_text``, or the command
stops naming it). Command-line flags override the environment. The service
binds 127.0.0.1 unless ``--host`` says otherwise; binding elsewhere without a token prints a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import typer

from tools.service_budget import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BUFFERED_MB, DEFAULT_TOOL_BUSY_WAIT_S

BusyWaitOption = Annotated[float, typer.Option(
    min=0.0, max=86400.0, help="Seconds a request whose body does not fit --max-buffered-mb waits in line for room "
                               "before its 503 (0: at once).")]
"""`--busy-wait-s` of `raa serve-tools` and `raa serve-reward` (each with its own default)."""
BodyTimeoutOption = Annotated[float, typer.Option(
    min=0.001, max=86400.0,
    help="Seconds a request body may take to arrive once its room is granted; then 408.")]
"""`--body-timeout-s` of `raa serve-tools` and `raa serve-reward`."""


def token_option(envvar: str) -> Callable[[str | None], str | None]:
    """The typer callback of a service's --token option (its environment variable ``envvar``): the token when
    it is printable ASCII (``check_token_text``), else a usage error naming the option; ``raa serve-tools``
    and ``raa serve-reward`` share it."""
    def check(value: str | None) -> str | None:
        from tools.settings import check_token_text

        try:
            return None if value is None else check_token_text(value, f"--token / {envvar}")
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc

    return check


def serve_tools_command(
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    device: Annotated[Literal["cpu", "cuda"] | None,
                      typer.Option(help="Device of the tool models (default: RAA_TOOLS_DEVICE, else cpu).")] = None,
    motion: Annotated[Literal["lk", "cotracker3"] | None,
                      typer.Option(help="Motion backend (default: RAA_MOTION_BACKEND, else lk).")] = None,
    allowed_root: Annotated[Path, typer.Option(help="Videos requested by path must lie under this directory.")]
    = Path("."),
    token: Annotated[str | None, typer.Option(envvar="RAA_TOOLS_TOKEN", show_envvar=True, callback=token_option("RAA_TOOLS_TOKEN"),
                                              help="Bearer token required on /v1/* (none = open).")] = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Requests computed at once.")] = 2,
    max_upload_mb: Annotated[float, typer.Option(min=0.001, help="Largest request body (MiB).")] = 256.0,
    max_buffered_mb: Annotated[float | None, typer.Option(
        min=0.001, help=f"Request bodies held at once, waiting or computing (MiB; default {DEFAULT_MAX_BUFFERED_MB:g}, "
                        "or --max-upload-mb if larger); a request over it waits --busy-wait-s for room, then gets "
                        "503 busy.")] = None,
    busy_wait_s: BusyWaitOption = DEFAULT_TOOL_BUSY_WAIT_S,
    body_timeout_s: BodyTimeoutOption = DEFAULT_BODY_TIMEOUT_S,
    cotracker_checkpoint: Annotated[Path | None, typer.Option(help="CoTracker3 offline checkpoint.")] = None,
    cotracker_hub_dir: Annotated[Path | None, typer.Option(help="Local co-tracker repo for torch.hub.")] = None,
    vjepa_model: Annotated[str | None, typer.Option(help="V-JEPA 2 hub id or local dir.")] = None,
    surprise: Annotated[bool, typer.Option(help="Load V-JEPA 2 and serve /v1/surprise.")] = True,
) -> None:
    """Serve /v1/track, /v1/surprise, /v1/info and /healthz."""
    import uvicorn

    from tools.errors import ToolFault
    from tools.service import create_app, load_service_tools, open_bind_warning
    from tools.service_budget import buffered_limit_bytes
    from tools.service_http import SERVER_KEEPALIVE_S
    from tools.settings import ToolSettings

    try:
        settings = ToolSettings.from_env()
    except ValueError as exc:  # a RAA_* value that cannot be used: one line naming it, not a traceback
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    overrides = {"device": device, "motion_backend": motion, "cotracker_checkpoint": cotracker_checkpoint,
                 "cotracker_hub_dir": cotracker_hub_dir, "vjepa_model": vjepa_model}
    settings = settings.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    settings = ToolSettings.model_validate(settings.model_dump())
    if not allowed_root.is_dir():
        raise typer.BadParameter(f"--allowed-root {allowed_root} is not a directory")
    try:  # before the models load (minutes for CoTracker3 / V-JEPA 2 on a GPU node)
        buffered_limit_bytes(max_buffered_mb, int(max_upload_mb * 2**20))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if (warning := open_bind_warning(host, token, "RAA_TOOLS_TOKEN")) is not None:
        typer.echo(warning, err=True)
    try:  # before uvicorn starts: missing weights are one error line, not a failed lifespan's traceback
        tracker, scorer = load_service_tools(settings, enable_surprise=surprise)
    except ToolFault as exc:
        no_weights = settings.cotracker_checkpoint is None and settings.cotracker_hub_dir is None
        hint = ("; start with --no-surprise to serve tracks only" if exc.tool == "surprise" else
                "; on this command: --cotracker-checkpoint PATH or --cotracker-hub-dir DIR"  # the fault names the env
                if exc.tool == "motion" and no_weights else "")
        typer.echo(f"error: {exc}{hint}", err=True)
        raise typer.Exit(2) from exc
    app = create_app(settings, allowed_root, token=token, workers=workers, max_upload_mb=max_upload_mb,
                     enable_surprise=surprise, tracker=tracker, scorer=scorer, max_buffered_mb=max_buffered_mb,
                     busy_wait_s=busy_wait_s,
                     body_timeout_s=body_timeout_s)
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_keep_alive=SERVER_KEEPALIVE_S)
