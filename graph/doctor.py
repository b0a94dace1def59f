"""`raa doctor`: check a setup before scoring with it, one line per part, each with what to change.

Checks, in order: the backbone endpoint (configured; `GET /models` answers and lists `RAA_MODEL`,
graph/endpoint.py; an answer that is no model list, such as a 404 or a 500, is a warning naming it); with
`--call`, one structured request carrying as many images as the agent's largest request
(`max_images_per_call`, 48, at `RAA_IMAGE_LONG_SIDE` and `RAA_JPEG_QUALITY`, textured as real frames so the
body is a real request's size (`probe_frame`); the configured `RAA_STRUCTURED_METHOD`; the model should name
their colour, red: the server's per-request image and body limits show here, not in the first run) and,
under `RAA_INSPECT_MODE=tools`, one tool-calling request (the model should call `view_frames`); the trace
database and the stage cache (usable SQLite files, or creatable; a warning when on a network filesystem, where
SQLite's WAL mode is unsafe); video I/O (an mp4 written and read back); the motion tracker and
the V-JEPA 2 weights (present where the settings point, or in the Hugging Face cache, and every weight of the
model by name: graph/model_files.py); the tool
service (`GET /healthz`, then `/v1/info`) when `RAA_TOOLS_URL` is set: an info request it refuses (a wrong or
missing `RAA_TOOLS_TOKEN`) is a problem, as every preset with a tool then stops at start; a service without
surprise (`--no-surprise`) is a warning, as only the WMReward presets stop.

Decisions where the issues were silent:
- Statuses are "ok", "warning" (works, but probably not as meant: an image answer that misses the
  colour, a model that answers without calling the tool, weights that would be downloaded on first
  use from a hub that answers), "problem" (a run would be ineligible or fail) and "skipped". The command exits 1 when any
  check has a problem, 0 otherwise, 2 when a setting does not parse.
- Weights not in the local cache are asked for once (`tools.hub.hub_reachable`, 3 s, the loader's probe):
  a hub that answers is a warning (downloaded on first use), none (or HF_HUB_OFFLINE for V-JEPA 2) a problem.
- A stage cache at the trace database's path is a problem: one of the two stores refuses a file that
  holds the other's tables, so every run would stop at start.
- A `--call` request answered with a 200 that is no chat completion (RAA_BASE_URL at a web page) shows the
  fault (it names RAA_BASE_URL) and the URL requested, not the "is the server up" hint: the server answered.
  That hint is only for a request no reply came back to, for want of a connection or of time
  (`graph.transport.no_answer`); any other "transport" fault (an error status after the retries, a request
  never sent: one LangChain could not build, a chat model's own ValueError, a non-ASCII API key) shows only
  its own message, which says what happened. So does a "settings" fault (a 401, 403 or 404: the API key,
  the model name or the base URL, `graph.transport.settings_problem`; a chat model that cannot give structured
  output): it names its setting, where the "refused" hint it had blamed the server's image limit. A request over
  a limit of the server's setup (its body size, a reverse proxy's included, a 413; its images per request; the
  model's context: `graph.transport.limit_kind`) is such a fault naming what to change; the check adds what it
  sent (how many images, of what size; for a 413 how many MiB). Any other
  request the server rejects (a "refused" 400 / 422, in words `graph.setup_rejections` does not read) is sent
  again without images (`_rejected_part`): answered, the hint names the images (a vision model); rejected again,
  the structured method (or the parameter the server's words name); a setup fault, that fault with its fix. It guessed the image limit, which the
  server's words name when it is that, then asked about both the model and the method.
- Nothing loads model weights and nothing is written except what a first run would create anyway
  (no trace or cache file is created: a missing one is reported as created on first use). `--call`
  sends two requests (the first a real request's size), a third after such a rejection; without it no model is
  called.
- A path the OS refuses to look at (e.g. a name longer than the filesystem allows) is a problem line naming
  its setting, not a crash; `:memory:` stores are reported as in memory, not as files a first run creates.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer
from pydantic import BaseModel, Field

from graph.doctor_check import Check
from graph.doctor_tools import service_check, tracker_check, vjepa_check
from graph.settings import BackboneSettings, SettingsError
from graph.trace_text import printable

if TYPE_CHECKING:  # pragma: no cover
    from graph.backbone import Backbone
    from tools.settings import ToolSettings



class ColourProbe(BaseModel):
    """The `--call` structured request's answer."""

    colour: str = Field(max_length=40, description="The dominant colour of the images, in one word.")


def probe_frame(side: int, seed: int = 0) -> np.ndarray:
    """A `side` x `side` red frame textured like a real one: seeded noise with a natural image's falling
    (1/f^1.4) amplitude spectrum, red (about 180, 40, 40 RGB) throughout, so the model can still name the colour.
    48 of its JPEGs make a real request's body (~3 MiB of base64 at 512 px, quality 85: a little more than 16:9
    frames, as the square is the largest frame at that long side); flat red frames compress ~10x smaller (48
    made 0.29 MiB, under nginx's default 1 MiB, while real requests were over it: doctor said ok, runs got 413s)."""
    rng = np.random.default_rng(seed)
    f = np.hypot(np.fft.fftfreq(side)[:, None], np.fft.rfftfreq(side)[None, :])
    f[0, 0] = 1.0

    def texture() -> np.ndarray:
        spectrum = (rng.standard_normal(f.shape) + 1j * rng.standard_normal(f.shape)) / f**1.4
        spectrum[0, 0] = 0.0
        out = np.fft.irfft2(spectrum, s=(side, side))
        return out / (out.std() or 1.0)

    light = texture()
    rgb = np.stack([180 + 35 * light, 40 + 20 * light, 40 + 20 * texture()], axis=-1)
    return np.clip(rgb, 0, 255).astype(np.uint8)


async def run_checks(settings: BackboneSettings, tools: ToolSettings, *, call: bool, wait_s: float) -> list[Check]:
    """Every check (see the module docstring); `--call` talks to the endpoint through ChatOpenAI, as runs do."""
    checks = [_endpoint(settings, wait_s)]
    if not call:
        sends = ("one image request and one tool request" if settings.inspect_mode == "tools" else
                 "one image request (RAA_INSPECT_MODE=plan: inspection needs no tool calls)")  # as `_calls`
        checks.append(Check("model calls", "skipped", f"add --call to send {sends}"))
    elif checks[0].status == "problem":
        checks.append(Check("model calls", "skipped", "the endpoint check failed"))
    else:
        checks += await _calls(settings)
    checks += [_guarded("trace database", "RAA_TRACES_PATH", lambda: _traces(settings)),
               _guarded("stage cache", "RAA_CACHE_PATH", lambda: _cache(settings)), _video(),
               _guarded("motion tracker", "RAA_COTRACKER_CHECKPOINT or RAA_COTRACKER_HUB_DIR",
                        lambda: tracker_check(tools)),
               _guarded("V-JEPA 2 weights", "RAA_VJEPA_MODEL", lambda: vjepa_check(tools)), service_check(tools)]
    return checks


def _guarded(name: str, setting: str, check: Callable[[], Check]) -> Check:
    """`check()`, or a problem line when the OS refuses to look at a path `setting` names (OSError, e.g. a
    name longer than the filesystem allows, which `Path.is_dir()` raises): doctor reports, never crashes."""
    try:
        return check()
    except OSError as exc:
        shown = str(exc.filename or "")
        where = f" ({shown[:80]}...)" if len(shown) > 80 else f" ({shown})" if shown else ""
        return Check(name, "problem", f"{exc.strerror or exc}{where}: set {setting} to a usable path")


def _endpoint(settings: BackboneSettings, wait_s: float) -> Check:
    from graph.endpoint import probe_endpoint

    if not settings.configured:
        return Check("endpoint", "problem", f"unset: {', '.join(settings.missing())} (an OpenAI-compatible server, "
                                            "e.g. vLLM: README, 'Connecting a model')")
    seen = probe_endpoint(settings, wait_s)
    if seen.status == "problem":
        return Check("endpoint", "problem", seen.message)
    if seen.status == "unverifiable":  # runs go ahead (the pre-run check passes it); doctor says it could not tell
        return Check("endpoint", "warning", f"{seen.message} (raa doctor --call tries real requests)")
    return Check("endpoint", "ok", f"{settings.base_url} answers and serves {settings.model}")


async def _calls(settings: BackboneSettings) -> list[Check]:
    from langchain_core.messages import HumanMessage, SystemMessage

    from graph.backbone import Backbone, BackboneFault, Usage
    from graph.config import AgentConfig
    from graph.nodes.evidence import tool_specs
    from graph.transport import BACKBONE_NAMES, limit_kind, no_answer, not_a_completion, rejected_request
    from tools.frames import encode_jpeg_data_url

    backbone = Backbone.from_settings(settings)
    side = settings.image_long_side  # the size the agent sends: the request's length in tokens is a real one's
    url = encode_jpeg_data_url(probe_frame(side), quality=settings.jpeg_quality)  # and its body size too
    n = AgentConfig().max_images_per_call  # as many as the agent's largest request: the server's limit shows
    images: list[str | dict] = [{"type": "text", "text": f"What is the dominant colour of these {n} images?"}]
    images += [{"type": "image_url", "image_url": {"url": url}} for _ in range(n)]
    name = f"{n} images + structured output"
    out: list[Check] = []
    try:
        reply = await backbone.astructured("doctor", ColourProbe, [
            SystemMessage(content="# stage: doctor\nAnswer about the images with the requested JSON."),
            HumanMessage(content=images)], Usage())
        seen = "red" in reply.colour.lower()
        out.append(Check(name, "ok" if seen else "warning",
                         f"{settings.method}, {side}x{side} px images: answered {reply.colour!r}" + ("" if seen else
                         " for red images: do images reach the model (a vision model, a server that keeps them)?")))
    except BackboneFault as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else None
        if cause is not None and not_a_completion(cause, BACKBONE_NAMES) is not None:
            hint = f"requests go to {(settings.base_url or '').rstrip('/')}/chat/completions"  # it answered: no "is it up"
        elif exc.kind == "timeout" or (cause is not None and no_answer(cause)):
            hint = (f"the endpoint did not answer a request with {n} images: is the server up and reachable "
                    "(RAA_BASE_URL), and does it answer within RAA_TIMEOUT_S?")
        elif (limit := limit_kind(cause) if cause is not None else None) is not None:  # the fault names the fix
            hint = {"context": f"{n} images of {side}x{side} px are longer than the model's context",
                    "body": f"{n} images of {side}x{side} px, {n * len(url) / 2**20:.2f} MiB of base64 JPEG (textured "
                            "as real frames), were too large, as the agent's largest request would be",
                    "images": f"the server takes fewer than {n} images per request, as many as the agent's largest "
                              "request",
                    "max_tokens": "the server takes a lower completion token cap than RAA_MAX_TOKENS"}[limit]
        elif exc.kind in ("transport", "settings"):  # the fault says what happened (settings: which one to fix)
            hint = ""
        elif exc.kind != "refused":
            hint = "RAA_STRUCTURED_METHOD: json_schema, function_calling or json_mode"
        elif cause is not None and rejected_request(cause):  # a limit would have been named above (limit_kind)
            hint = await _rejected_part(backbone, settings.method, n)
        else:  # the model declined: its refusal is the message
            hint = ""
        out.append(Check(name, "problem", f"{exc} ({hint})" if hint else str(exc)))
    if settings.inspect_mode != "tools":
        out.append(Check("tool calling", "skipped", "RAA_INSPECT_MODE=plan: inspection needs no tool calls"))
        return out
    try:
        called = await backbone.atool_round("doctor", [
            SystemMessage(content="# stage: doctor\nYou can look at video frames with the view_frames tool."),
            HumanMessage(content="Call view_frames for frame 0 now.")], tool_specs(False), Usage())
        if called.tool_calls:
            out.append(Check("tool calling", "ok", f"called {called.tool_calls[0]['name']}"))
        else:
            out.append(Check("tool calling", "warning", "the model answered without calling view_frames: it may not "
                             "see the tools (Qwen2.5-VL's chat template drops them); RAA_INSPECT_MODE=plan"))
    except BackboneFault as exc:
        out.append(Check("tool calling", "problem", str(exc)))
    return out


async def _rejected_part(backbone: Backbone, method: str, n: int) -> str:
    """What the server rejected in the image request it refused in words no fault reads (`graph.setup_rejections`
    names a model without images and an unserved method by the servers' own words): the structured request is sent
    again without images, and what it meets says which part to change."""
    from langchain_core.messages import HumanMessage

    from graph.backbone import BackboneFault, Usage
    from graph.server_limits import rejected_request
    from graph.setup_rejections import other_methods

    try:
        await backbone.astructured("doctor", ColourProbe, [HumanMessage(
            content="Answer with the requested JSON: the colour of a ripe tomato, in one word.")], Usage())
    except BackboneFault as exc:
        if exc.kind == "settings":  # its words name the part (the method, a temperature...) and the fix
            return f"the same structured request without images met a setup fault: {exc}"
        if exc.kind != "refused" or not rejected_request(exc.__cause__ or exc):  # no rejection to compare
            # (a transport fault, or the model's own refusal): both parts stay in question
            return (f"is RAA_MODEL a vision model, and does the server take RAA_STRUCTURED_METHOD={method}? The "
                    f"same request without images could not tell: {exc}")
        return (f"the same structured request without images was rejected too: the server's words say which "
                f"parameter it refuses; set RAA_STRUCTURED_METHOD={other_methods(method)} (it is {method})")
    return (f"the same structured request without images was answered: the server rejects the {n} images; is "
            "RAA_MODEL a vision model served with image input (vLLM: a multimodal model, --limit-mm-per-prompt; "
            "llama.cpp: --mmproj), and do the server's words name the images' size or format?")


def _traces(settings: BackboneSettings) -> Check:
    from graph.tracing import open_saver

    if settings.traces_path == ":memory:":  # no file: a first run creates nothing
        return Check("trace database", "ok", ":memory: (in memory only: raa trace / raa report cannot read it)")
    path = Path(settings.traces_path)

    def opens() -> str:
        open_saver(path).conn.close()
        return ""

    return _store_check("trace database", "RAA_TRACES_PATH", path, opens)


def _cache(settings: BackboneSettings) -> Check:
    from graph.cache import StageCache

    if settings.cache_path in (None, ":memory:"):  # (two in-memory stores share no file)
        return Check("stage cache", "ok", "off (in memory)")
    path = Path(settings.cache_path)
    if path.resolve() == Path(settings.traces_path).resolve():  # the second opened refuses the first's tables
        return Check("stage cache", "problem", f"{path} is also the trace database (RAA_TRACES_PATH): the two "
                                               "cannot share a file; set RAA_CACHE_PATH to another path, or off")

    def entries() -> str:
        cache = StageCache(path)
        count = len(cache)
        cache.close()
        return f" ({count} stage outputs)"

    return _store_check("stage cache", "RAA_CACHE_PATH, or off", path, entries)


def _store_check(name: str, setting: str, path: Path, open_it: Callable[[], str]) -> Check:
    """Open the existing file at `path` (`open_it` returns a detail to add); a file that cannot be used is
    a problem, one on a network filesystem (`graph.stores.network_fs_warning`) a warning."""
    import warnings

    from graph.stores import StoreError, StoreWarning, network_fs_warning

    detail = f"{path} (created by the first run)"
    if not path.exists() and (why := _uncreatable(path)) is not None:
        return Check(name, "problem", f"{path} cannot be created ({why}); set {setting} to a writable path")
    if path.exists():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StoreWarning)  # said below, as this check's own line
                detail = str(path) + open_it()
        except StoreError as exc:
            return Check(name, "problem", str(exc))
    if (warning := network_fs_warning(path, name, setting)) is not None:
        return Check(name, "warning", warning)
    return Check(name, "ok", detail)


def _uncreatable(path: Path) -> str | None:
    """Why a first run could not create the file at `path` (its nearest existing ancestor is not a folder, or
    not writable: tried with a temporary file, which also holds for root), or None."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a folder"
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".raa-doctor-"):
            pass
    except OSError as exc:
        return f"{parent} is not writable: {exc.strerror or exc}"
    return None


def _video() -> Check:
    import av

    from tools.video import read_frames, write_video

    clip = np.zeros((9, 64, 64, 3), np.uint8)
    clip[:, 16:48, :, 0] = np.linspace(0, 255, 9, dtype=np.uint8)[:, None, None]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            back = read_frames(write_video(Path(tmp) / "probe.mp4", clip, fps=8.0), [0, 8])
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return Check("video I/O", "problem", f"writing or reading an mp4 failed: {type(exc).__name__}: {exc}")
    if back.shape != (2, 64, 64, 3):
        return Check("video I/O", "problem", f"read back {back.shape}, expected (2, 64, 64, 3)")
    return Check("video I/O", "ok", f"PyAV {av.__version__} (FFmpeg libavcodec {av.library_versions['libavcodec']})")


def doctor_command(
    call: bool = typer.Option(False, "--call", help="Also send one structured request with 48 images and, "
                              "under RAA_INSPECT_MODE=tools, one tool-calling request."),
    wait: float = typer.Option(10.0, "--wait", min=0.0, help="Seconds to wait for the endpoint to answer."),
) -> None:
    """Check the endpoint, the model, the trace and cache files, video I/O and the evidence tools."""
    from rich.console import Console
    from rich.table import Table

    from tools.settings import ToolSettings

    try:
        settings = BackboneSettings.from_env()
        tools = ToolSettings.from_env()
    except (SettingsError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    checks = asyncio.run(run_checks(settings, tools, call=call, wait_s=wait))
    table = Table(title="raa doctor")
    for col in ("check", "status", "detail"):
        table.add_column(col, overflow="fold")
    for c in checks:  # details are data (a model name, a server's words, paths): control characters written out
        table.add_row(c.name, c.status, printable(c.detail))
    Console(markup=False, emoji=False).print(table)  # emoji codes off too, as graph/commands.py's console
    if any(c.status == "problem" for c in checks):
        raise typer.Exit(1)
