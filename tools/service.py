"""HTTP tool service (FastAPI): motion tracks and prediction surprise with models loaded once.

Endpoints: ``POST /v1/track``, ``POST /v1/surprise``, ``GET /healthz`` (open), ``GET /v1/info``.
A request names its video either as a JSON body ``{"path": ...}`` (relative to, or inside, the
allowed root; anything resolving outside it is refused with 403), as a multipart upload (field
``video``: an encoded video or a ``.npy`` array), or as a raw ``application/x-npy`` body holding
uint8 ``[T,H,W,3]`` frames (what the client sends, so remote and in-process results are identical).
Parameters (``grid_size``, ``grid_frames`` = first|window, ``queries``, ``frame_indices``, ``regions``,
``summary``, ``tracks_encoding`` = list|base64) travel as JSON fields, form fields or, with a raw body, query
parameters (lists as JSON strings in forms and query strings). ``grid_size`` alone is the tracker protocol's
grid on frame 0, as in-process; ``grid_frames: "window"`` is the agent's grid (`tools.motion.grid`: also on
the middle and last frames where needed), which tracks an object entering later (tools/service_params.py).

Every option is checked before any frame is decoded (tools/service_params.py): ``grid_size`` is at most
``MAX_GRID_SIZE`` (64) and ``queries`` at most ``MAX_QUERIES`` (4096) rows.

Status codes: 400 bad parameters (bad queries, grid_size over 64, frame index beyond the clip,
frame_indices that go backwards, regions
that are not an object of boxes, malformed or too deeply nested JSON; frames too small to track, query rows
outside the frames: checked before the tracker runs, tools/service_jobs.py), 401
missing or wrong bearer token, 403 path outside the allowed root, 404 missing file (tools/service_request.py), 413 body over
the size limit (``max_upload_mb``; a JSON body: ``MAX_JSON_BODY_MB``, 8 MiB, tools/service_params.py) or frames too large
for the device (its tracker or scorer ran out of memory even run again alone: ``fault`` kind "too_large",
tools/service_memory.py; out of memory beside other requests, it is run again alone and answered), 408 a body that did not arrive within ``body_timeout_s`` (tools/service_http.py), a clip longer than ``settings.max_frames`` (pass ``frame_indices``) or whose frames would
decode to more than ``settings.max_decode_mb`` (checked before decoding: a long 4K clip is tens of GB; for a video, the clip's VideoTooLargeError in ``video_error``, as below, tools/service_frames.py), 422 undecodable video, or "unreadable video" for one the service may not read (the reason is in ``detail``, the VideoError in ``video_error``: its ``type`` and ``message``, which the client raises again), 500 a tool fault (``fault``
holds tool/kind/message; any other exception of a request's work is one too, kind "run" of the endpoint's
tool, since a bare 500 "Internal Server Error" kept the reason in the server's log and the client called it
a transport fault; so are the tracker's and the summary's own errors (a ValueError or TypeError of their code is not the request's
fault), and tracks that break the tracker contract, `tools.motion.base.require_tracks`: not
MotionTracks, wrong frame or query-point count, a query frame outside the frames, a non-finite position or one
far outside the frame), and
so is surprise evidence breaking the scorer contract (`tools.surprise.evidence_problem`, a NaN included), 501 surprise not enabled on this service (``--no-surprise``), 503 a clip whose read the machine failed (an I/O
error, too many open files, out of memory: ``fault`` kind "machine", with ``Retry-After``; not the clip's fault,
tools/service_frames.py), or too many requests
in progress or too many request bytes held (``max_buffered_mb``, after waiting ``busy_wait_s`` in line for room,
tools/service_budget.py) (499, never read, for a request skipped because its client disconnected while it waited).
Decisions where the issue was silent: "surprise not enabled" is a 501, not a 503: the client
retries 503 as "busy", so a permanent answer was sent three times and reported as a transport fault. The work
of each request (decode + model, and rendering its JSON answer) runs in a thread under an
``anyio.CapacityLimiter`` of ``workers`` slots, so excess requests wait in line, and a request whose client disconnected while it waited (its
timeout, Ctrl-C) is skipped when its slot comes instead of computed for nobody (a computation already
running cannot be stopped: it is a thread); ``/healthz`` needs no token; with a token, ``/docs`` and ``/redoc``
are off and ``/openapi.json`` needs it (tools/service_http.py); an error about an uploaded clip names it as
``uploaded clip '<filename>'``, never the server's temporary file, and one about a clip requested by path
names it relative to the allowed root, its absolute path only in the server's log (tools/service_frames.py); JSON ``queries`` are
``[[t, x, y], ...]`` with ``t`` indexing the decoded (or selected) frames; ``frame_indices`` are taken as
listed, repeats included (not deduplicated: the answer keeps one entry per listed frame, so it lines up with
the request; a repeat is a caller's choice, e.g. padding a short clip to a surprise window, and its results
name the frame as given, a window of one repeated frame reads "0-0"; a tracker sees the frame twice, a step of
zero pixels), and they must not go backwards (a 400 naming the first step back, before decoding,
`tools.sampling.order_problem`): surprise windows are named by clip frame, and out of order one started after
it ended; a tracker follows the frames in the order listed, and out of order each step of a track jumped back
and forth in the clip. Neither endpoint sorts them (that would score other frames than asked, and would
misalign a track's answer and ``queries``' ``t`` with the listed frames), nor answers 422, which the client
reads as the clip's fault; a C-order uint8 ``.npy``
body is used as a read-only zero-copy view of the request bytes (other ``.npy`` go through ``np.load``).
Serve it with ``uvicorn.run(app, host, port)`` (as ``raa serve-tools`` does) or on a socket created with
``proto=IPPROTO_TCP``: asyncio sets TCP_NODELAY only then, and without it answers stall ~40 ms.
A video sent to ``/v1/surprise`` is decoded with its short side at most ``short_side`` (a request
parameter: pixels or "full"; by default ``settings.surprise_short_side``, ``RAA_SURPRISE_SHORT_SIDE``,
448) by the agent's rule (``tools.frames.tool_size``: only when that at least halves the pixels); ``/v1/track`` decodes at full size.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tools.client import SERVED_HEADER
from tools.errors import ToolFault, out_of_memory
from tools.motion import CoTracker3Tracker, MotionTracker, build_tracker
from tools.service_budget import (
    DEFAULT_MAX_BUFFERED_MB,
    DEFAULT_TOOL_BUSY_WAIT_S,
    BodyBudget,
    buffered_limit_bytes,
    busy,
)
from tools.service_frames import HTTPProblem, Upload, shown_to_client
from tools.service_http import (
    DEFAULT_BODY_TIMEOUT_S,
    add_openapi_route,
    check_bearer,
    check_body_timeout,
    docs_options,
    problem_response,
)
from tools.service_jobs import as_tool_fault, surprise_job, track_job
from tools.service_memory import all_slots, release_memory, too_large
from tools.service_params import MAX_JSON_BODY_MB
from tools.service_request import parse_request
from tools.settings import ToolSettings, check_token_text
from tools.surprise import SurpriseScorer, VJEPA2SurpriseScorer
from tools.toolbox import served_identity


@dataclass
class ServiceState:
    """Everything the request handlers share (built once in the lifespan)."""

    settings: ToolSettings
    allowed_root: Path
    token: str | None
    workers: int
    max_upload_bytes: int
    max_json_bytes: int = int(MAX_JSON_BODY_MB * 2**20)
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    tracker: MotionTracker | None = None
    scorer: SurpriseScorer | None = None
    max_pending: int = 64
    pending: int = 0
    bodies: BodyBudget = field(default_factory=lambda: BodyBudget(int(DEFAULT_MAX_BUFFERED_MB * 2**20)))
    limiter: anyio.CapacityLimiter | None = None
    threads: anyio.CapacityLimiter | None = None
    alone: anyio.Lock | None = None
    """Taken to hold every worker slot: a request run again alone after it ran out of memory."""
    info: dict = field(default_factory=dict)
    identity: str = ""
    """What the service serves (`tools.toolbox.served_identity`), named in every tool answer and in /v1/info."""
    started: bool = False
    """Set when the lifespan has loaded the models; until then every route but /docs answers 503."""


def not_started() -> HTTPProblem:
    """The 503 of every route before the lifespan loaded the models (an app served without it: TestClient outside
    `with`, a server with its lifespan off)."""
    return HTTPProblem(503, "the tool service has not started: its models load in the ASGI lifespan startup, "
                            "which did not run (is the server's lifespan off?)")


def worker_slots(state: ServiceState) -> anyio.CapacityLimiter:
    """The worker slots a request waits for; 503 before the lifespan made them (`not_started`)."""
    if state.limiter is None:
        raise not_started()
    return state.limiter


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def open_bind_warning(host: str, token: str | None, token_var: str) -> str | None:
    """The warning for serving beyond this machine without a token (None when bound to loopback or
    guarded), for the `raa serve-*` commands."""
    if host in LOOPBACK_HOSTS or token:
        return None
    return f"warning: serving on {host} without a token (set --token or {token_var})"


def create_app(settings: ToolSettings, allowed_root: str | Path, *, token: str | None = None, workers: int = 2,
               max_upload_mb: float = 256.0, enable_surprise: bool = True, tracker: MotionTracker | None = None,
               scorer: SurpriseScorer | None = None, max_pending: int | None = None,
               max_buffered_mb: float | None = None, busy_wait_s: float = DEFAULT_TOOL_BUSY_WAIT_S,
               body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> FastAPI:
    """Build the service. Models (``tracker``/``scorer`` if given, else from ``settings``) load at start-up.

    ``workers`` requests compute at once; up to ``max_pending`` (default ``max(64, 8 * workers)``) may be
    in progress (reading, waiting or computing), holding request bodies of at most ``max_buffered_mb`` in
    all (default 2048 or ``max_upload_mb`` if larger; `tools.service_budget`): a body that does not fit waits
    in line up to ``busy_wait_s`` (default 60 s) for room. More requests, or a body still not fitting, get 503
    with ``Retry-After`` (`tools.service_budget.busy`), which the client waits before it tries again. A body
    not received ``body_timeout_s`` after its room was granted is a 408 (tools/service_http.py).
    """
    if workers < 1:
        raise ValueError("workers must be >= 1")
    if token:
        check_token_text(token, "the service token")
    state = ServiceState(settings=settings, allowed_root=Path(allowed_root).resolve(), token=token or None,
                         workers=workers, max_upload_bytes=int(max_upload_mb * 1024 * 1024),
                         max_json_bytes=int(min(MAX_JSON_BODY_MB, max_upload_mb) * 1024 * 1024),
                         max_pending=max_pending or max(64, 8 * workers),
                         body_timeout_s=check_body_timeout(body_timeout_s))
    state.bodies = BodyBudget(buffered_limit_bytes(max_buffered_mb, state.max_upload_bytes), busy_wait_s)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.tracker = tracker or _build_tracker(settings)
        if enable_surprise:
            state.scorer = scorer or load_surprise(settings)
        state.limiter = anyio.CapacityLimiter(workers)  # the worker slots a request waits for
        state.threads = anyio.CapacityLimiter(workers)  # their threads (a slot holder cannot borrow it twice)
        state.alone = anyio.Lock()  # one request at a time holds them all (tools/service_memory.py)
        state.identity = served_identity(state.tracker, state.scorer)
        state.info = _info(state)
        state.started = True
        yield

    app = FastAPI(title="raa evidence tools", lifespan=lifespan, **docs_options(state.token))
    add_openapi_route(app, state.token)
    app.state.tools = state

    @app.exception_handler(HTTPProblem)
    async def _problem(_: Request, exc: HTTPProblem) -> JSONResponse:
        return problem_response(exc)

    def check_token(request: Request) -> None:
        if not state.started:
            raise not_started()
        check_bearer(request, state.token)

    async def compute(job: Callable[[ServiceState, Path | bytes | Upload, dict], bytes], request: Request,
                      src: Path | bytes | Upload, params: dict) -> bytes:
        """``job``'s answer, computed in a worker slot; out of memory there, once more alone
        (tools/service_memory.py)."""
        async with worker_slots(state):
            await skip_if_gone(request)
            try:
                return await anyio.to_thread.run_sync(job, state, src, params, limiter=state.threads)
            except ToolFault as exc:
                if not out_of_memory(exc):
                    raise
        await anyio.to_thread.run_sync(release_memory)  # the failed run's tensors, before waiting for the others
        async with all_slots(worker_slots(state), state.alone or anyio.Lock()):
            await skip_if_gone(request)
            await anyio.to_thread.run_sync(release_memory)  # and what the others held (off the event loop: gc)
            return await anyio.to_thread.run_sync(job, state, src, params, limiter=state.threads)

    async def skip_if_gone(request: Request) -> None:
        if await request.is_disconnected():  # gave up while queued: nobody would read the answer
            raise HTTPProblem(499, "the client disconnected before a worker was free; request skipped")

    async def run(job: Callable[[ServiceState, Path | bytes | Upload, dict], bytes], request: Request) -> Response:
        check_token(request)
        if state.pending >= state.max_pending:
            raise busy(f"busy: {state.pending} requests in progress (limit {state.max_pending})")
        state.pending += 1  # the event loop is single-threaded: no await between check and increment
        src: Path | bytes | Upload | None = None
        try:
            with state.bodies.reserve() as room:  # the body is held until the answer is ready
                src, params = await parse_request(request, state, room)
                answer = await compute(job, request, src, params)
        except ToolFault as exc:  # run alone, it ran out of memory again: too large (tools/service_memory.py)
            problem = (too_large(exc) if out_of_memory(exc) else
                       HTTPProblem(500, str(exc), fault={"tool": exc.tool, "kind": exc.kind, "message": exc.message}))
            raise shown_to_client(problem, src, state.allowed_root) from exc
        except HTTPProblem as exc:
            if (shown := shown_to_client(exc, src, state.allowed_root)) is exc:
                raise
            raise shown from exc
        finally:
            state.pending -= 1
        return Response(answer, media_type="application/json",  # rendered by the job (tools/service_jobs.py)
                        headers={SERVED_HEADER: state.identity})  # what answered (tools/client.py)

    @app.get("/healthz")
    async def healthz() -> dict:
        if not state.started:
            raise not_started()
        return {"status": "ok"}

    @app.get("/v1/info")
    async def info(request: Request, response: Response) -> dict:
        check_token(request)
        response.headers[SERVED_HEADER] = state.identity  # a client pins it at start (tools/client.py)
        return state.info

    @app.post("/v1/track")
    async def track(request: Request) -> Response:
        return await run(as_tool_fault("motion", track_job), request)

    @app.post("/v1/surprise")
    async def surprise(request: Request) -> Response:
        check_token(request)
        if state.scorer is None:  # before the body is read: a permanent answer, not "busy" (module docstring)
            raise HTTPProblem(501, "surprise is not enabled on this service (started with --no-surprise)")
        return await run(as_tool_fault("surprise", surprise_job), request)

    return app


def load_service_tools(settings: ToolSettings, *, enable_surprise: bool = True
                       ) -> tuple[MotionTracker, SurpriseScorer | None]:
    """The tracker and (when enabled) the surprise scorer the service would load at start-up, loaded now:
    ``raa serve-tools`` calls it before starting the server, so missing weights are one error line (a
    ToolFault) instead of a failed uvicorn lifespan's traceback."""
    return _build_tracker(settings), (load_surprise(settings) if enable_surprise else None)


def load_surprise(settings: ToolSettings) -> VJEPA2SurpriseScorer:
    """V-JEPA 2 as ``settings`` name it, loaded (ToolFault when it cannot load)."""
    scorer = VJEPA2SurpriseScorer.from_pretrained(settings.vjepa_model, device=settings.device,
                                                  dtype=settings.vjepa_dtype, batch_size=settings.surprise_batch_size,
                                                  top_k=settings.surprise_top_k)
    scorer.load()
    return scorer


def _build_tracker(settings: ToolSettings) -> MotionTracker:
    if settings.motion_backend == "cotracker3":
        return CoTracker3Tracker(checkpoint=settings.cotracker_checkpoint, hub_dir=settings.cotracker_hub_dir,
                                 device=settings.device).load()
    return build_tracker("lk")


def _info(state: ServiceState) -> dict:
    import platform

    import cv2
    import torch
    import transformers

    from tools.motion import LKTracker

    backend = ("cotracker3" if isinstance(state.tracker, CoTracker3Tracker) else
               "lk" if isinstance(state.tracker, LKTracker) else type(state.tracker).__name__)
    return {"service": "raa-tools", "motion_backend": backend, "served": state.identity,
            "surprise_model": (state.scorer.model_id if isinstance(state.scorer, VJEPA2SurpriseScorer)
                               else type(state.scorer).__name__ if state.scorer is not None else None),
            "device": state.settings.device, "workers": state.workers,
            "max_upload_bytes": state.max_upload_bytes, "max_json_bytes": state.max_json_bytes,
            "max_buffered_bytes": state.bodies.limit, "allowed_root": str(state.allowed_root),
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "opencv": cv2.__version__,
                         "numpy": np.__version__}}
