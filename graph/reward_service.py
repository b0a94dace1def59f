"""HTTP reward service: the reward agent behind the JSON API of training's `reward: http` (`raa serve-reward`,
in graph/serve_command.py; needs the `service` extra).

    POST /v1/score   Authorization: Bearer <token> (when the service has one)
    {"items": [{"video_b64": "<base64 mp4>", "instruction": "...", "fps": 16.0}, ...],
     "meta": {"iteration": 3, "phase": "train"}}
    -> 200 {"results": [RewardResult as JSON: reward (float | null), status, T, P, V, reasons, run_id,
                         faults ([{stage, kind, message}]), ..., "kind": null | "error"]}
    GET /healthz (open), GET /v1/info (preset, inspect mode, backbone model, limits; from `raa serve-reward`
    also "scoring": `BackboneSettings.scoring`, which a trainer with `reward: http` records as the run's
    reward backbone, training/provenance.py)

One result per item, in order. `training.rewards.HttpAgentReward` is the client; the trainer config is
`reward: http` with `reward_options: {url: http://HOST:PORT/v1/score, token_env: ...}`.

Decisions where the issues were silent:
- One agent serves every request (built once by the caller; `raa serve-reward` builds it from the
  `RAA_*` settings with the on-disk stage cache and trace database), so tool models load once and
  `raa trace RUN_ID` on the service host explains any reward a trainer received (`run_id` is in each
  result); one whose trace could not be saved says so in its last reason (`graph.run_results.unsaved_trace`).
- At most `max_concurrency` agent runs are in flight over all requests together (one semaphore), so
  several trainer ranks posting at once share the backbone instead of multiplying its load. The semaphore is
  made on the first request, for the event loop serving it (an asyncio semaphore belongs to one loop), not at
  startup: without the lifespan (`TestClient(app)` outside `with`, an ASGI server with lifespan off) every item
  failed with "KeyError: 'runs'". A server runs one loop, so the bound holds over all its requests; a new loop
  (each request of a TestClient outside `with`) gets new slots.
- A bad item (missing or invalid base64, empty video, instruction not a string) gets its own
  ineligible result naming the item and the problem; the other items are scored. Such a result, made by the
  service without the agent's verdict (a bad item, a clip it cannot write, a run that raised), carries
  `"kind": "error"`, so the trainer counts it as an outage (`ineligible_error`), not the agent's ⊥; so does an
  agent's result made ineligible by an outage of its machinery (`RewardResult.outage`: a transport, timeout,
  settings, tool or internal fault, or a clip the machine failed to read; `graph.schemas.OUTAGE_FAULTS`): every
  result had `"kind": null`, so ten minutes of a dead LLM endpoint read in the trainer's metrics as ten minutes
  of clips the agent could not judge. Every other result (a verdict, or the agent's ⊥ for the clip itself: an
  undecodable video, a bad instruction, a model that refused it or never answered it validly) has `"kind": null`
  (a client that does not know the field ignores it). Each result also carries its `faults` (stage, kind,
  message), the structured form of its reasons, and `"kind"` is read from them alone (`RewardResult.outage`), so
  the two never disagree. A result the service made has its fault too (`graph.run_results.fault_result`): a bad item
  or a clip it cannot write is an "internal" fault of stage "service" (the client's request or the service host
  failed, never the clip: the item reached no agent), a run that raised `graph.run_results.machinery_failed`'s
  ("agent: internal"); they had a reason and `"kind": "error"` but no fault, so a client reading faults saw
  the agent's ⊥ for the clip. An undecodable
  video is the agent's own ineligible result (video fault), and a clip the service cannot write (a full
  disk) an ineligible result naming the error: it was a 500 for the whole batch. So is any other error
  escaping one item's run (`arun_agent` should never raise): the batch was a 500 and the other items'
  results were dropped while their runs went on. A malformed request (not JSON, JSON nested
  deeper than the parser goes, no `items`
  list, more than `max_items` items) is a 400 for the whole batch, which the client turns into an
  ineligible batch; a body over `max_body_mb` is a 413, and so is one whose JSON holds more values than
  `max_items` items need (`JSON_VALUES_PER_ITEM` each, counted by its strings and its ',', ':', '[' and '{' outside strings before it is parsed):
  the body is parsed whole before its `items` are counted, and small values parse to many times their size (a
  body of `[],` to ~22x: 2 GiB, the default `max_body_mb`, would be ~45 GB of lists, which the body budget,
  counting raw bytes, never saw), as the tool service caps its JSON bodies (`MAX_JSON_BODY_MB`); a missing or wrong token is a 401; a body not received
  within `body_timeout_s` (`raa serve-reward --body-timeout-s`, default 300 s) once its room is granted is a
  408 (tools/service_http.py). With a token, /docs and /redoc are off and /openapi.json needs it.
- The request bodies held at once are bounded by `max_buffered_mb` (`raa serve-reward --max-buffered-mb`;
  default 2048 MiB, or `max_body_mb` when larger), as in the tool service (tools/service_budget.py): a
  body is held (with its parsed items) until its request is answered, so many trainer ranks posting
  large batches could hold far more memory than the host has. A body that does not fit (a declared
  Content-Length, before any byte is read) waits in line for room up to `busy_wait_s`
  (`raa serve-reward --busy-wait-s`, default 300 s: the trainer waits minutes for an answer anyway, and its
  retries, `reward_options.retries`/`backoff_s`, last seconds while a request holds its body for minutes);
  only then is it a 503 "busy" with `Retry-After` (`tools.service_budget.busy`), which the client waits and
  retries; a batch still refused when those run out is ineligible, counted as an outage
  (`ineligible_error`), so size the bound for the batches all ranks post at once, and keep `busy_wait_s` below the client's `timeout_s`. Only the raw bodies are counted: the parsed
  JSON holds about as much again.
- Clips are written to a temporary folder for the runs and deleted when the request is answered (and
  dropped from the agent's frame cache, `FrameStore.forget`), unless the service keeps them
  (`keep_videos`, `raa serve-reward --keep-videos DIR`): then each request's clips stay in
  `DIR/itNNNNNN-XXXXXXXX/` (the iteration from `meta`; `evalNNNNNN-` for the trainer's held-out
  samples, `meta.phase = "eval"`), where the traces point, so `raa report RUN_ID` on the service
  host shows a training reward's frames. `fps` is
  accepted and not used: the mp4 carries its frame rate.
- A client that disconnects before its answer (its timeout, Ctrl-C) has its runs cancelled (checked every
  `DISCONNECT_POLL_S`): they held the shared slots, so later requests waited behind work nobody would read,
  and a client retrying on timeout multiplied it (4 clips, 3 attempts: 12 runs). So does a request whose
  handler is cancelled (the server shutting down past its grace period): its runs went on to the end, model
  calls and CPU for results nobody would read. The handler waits for its runs to finish cancelling before
  it deletes their clips and returns.
- What a result tells the client never names the service's temporary clip folder (`client_text`): a clip the
  service cannot write, a run that raised, and the agent's own reasons, notes and faults (an undecodable video's
  reason names the file it read) named `/tmp/raa-reward-k2j4/00001.mp4`. The clip is `item 1's clip`
  instead, or, with `keep_videos` (the service's configured folder), its path relative to it
  (`it000003-k2j4/00001.mp4`, which `raa report` on the service host finds); a folder that cannot be made
  is a 507 naming the OS error only. The absolute paths stay on the server: in its log (logger
  `graph.reward_service`) for the write and run failures, and in the run's trace.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from graph.api import arun_agent, new_run_id
from graph.frame_store import FrameStore
from graph.reward_limits import DEFAULT_MAX_BODY_MB, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_ITEMS
from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S
from graph.run_results import fault_result, machinery_failed
from graph.schemas import Fault, RewardResult
from graph.settings import TraceDurability
from tools.service_budget import DEFAULT_REWARD_BUSY_WAIT_S, BodyBudget, Reservation, buffered_limit_bytes
from tools.service_frames import HTTPProblem
from tools.service_http import (
    DEFAULT_BODY_TIMEOUT_S,
    add_openapi_route,
    check_bearer,
    check_body_timeout,
    docs_options,
    problem_response,
    read_body_limited,
)

_log = logging.getLogger(__name__)

DISCONNECT_POLL_S = 1.0
"""How often a request in progress checks that its client is still connected."""


JSON_VALUES_PER_ITEM = 256
"""JSON values a request may hold per item of `max_items` (module docstring): an item is an object of three
fields; the rest is room (its instruction's punctuation is not counted: `json_values_bound`)."""
JSON_VALUES_SLACK = 4096
"""JSON values a request may hold beyond its items' (the wrapper and `meta`)."""

MAX_ITERATION = 10**9
"""A `meta.iteration` from 0 up to this (exclusive) names a kept request's folder; others are "request"."""


def _request_folder(keep: str | Path | None, iteration: Any, phase: Any = None) -> str:
    """A new folder for one request's clips: temporary, or `keep/itNNNNNN-<8 hex>` when clips are kept
    (the iteration from the request's meta when it is an integer in [0, `MAX_ITERATION`), `evalNNNNNN` for
    the trainer's held-out samples; several trainer ranks post per iteration, so each request gets its own;
    any other meta gives `request-<8 hex>`: a huge integer made a file name too long for the filesystem,
    a 500 for the whole batch, and a negative one odd names like `it-00005`)."""
    if keep is None:
        return tempfile.mkdtemp(prefix="raa-reward-")
    prefix = "eval" if phase == "eval" else "it"
    counted = isinstance(iteration, int) and not isinstance(iteration, bool) and 0 <= iteration < MAX_ITERATION
    label = f"{prefix}{iteration:06d}" if counted else "request"
    Path(keep).mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{label}-", dir=str(keep))


def json_values_limit(max_items: int) -> int:
    """The most JSON values (bound by `json_values_bound`) a request of at most `max_items` items may hold."""
    return JSON_VALUES_PER_ITEM * max_items + JSON_VALUES_SLACK


_STRUCTURE = (b",", b":", b"[", b"{")


def json_values_bound(body: bytes, stop: int | None = None) -> int:
    """An upper bound on the number of values of the JSON `body`: every value but the first follows a ',', ':',
    '[' or '{' outside a string, and each string and each escaped quote in one counts once more (an
    instruction's punctuation is text, not values). An unterminated string's rest counts as outside. The count
    stops past `stop` (as does a run of more than `stop` '\\' before a quote), so a body of many small values,
    quotes or backslashes costs at most `stop` steps; the scan itself is
    `bytes.find` / `bytes.count` (a base64 clip of 100 MB in well under a second)."""
    count, pos, n = 1, 0, len(body)
    while pos < n and (stop is None or count <= stop):
        quote = body.find(b'"', pos)
        end = n if quote < 0 else quote
        count += sum(body.count(c, pos, end) for c in _STRUCTURE)
        if quote < 0:
            break
        pos = quote + 1
        while stop is None or count <= stop:  # to the closing quote: one not escaped by an odd run of '\\'
            close = body.find(b'"', pos)
            if close < 0:  # unterminated: its rest is scanned as outside (a bound still)
                break
            run = 0
            while body[close - 1 - run] == 0x5C:  # stops at the opening quote at the latest
                run += 1
                if stop is not None and run > stop:  # a run of '\\' no request holds: past the limit
                    return stop + 1
            pos = close + 1
            count += 1
            if run % 2 == 0:
                break
    return count


def _parse_body(body: bytes, max_items: int) -> Any:
    """`json.loads(body)`, or 413 first when its JSON holds more values than a request of `max_items` items
    needs (module docstring)."""
    limit = json_values_limit(max_items)
    if json_values_bound(body, stop=limit) > limit:
        raise HTTPProblem(413, "the body's JSON holds more values (its strings, and its ',', ':', '[' and '{' outside "
                               f"strings) than the limit of {limit} for {max_items} items: a request is at most "
                               f"{max_items} items, each an object of video_b64 (the clip as one base64 string), "
                               "instruction and fps")
    return json.loads(body)


def _item(index: int, item: Any, folder: str) -> tuple[str, str] | str:
    """(video path written, instruction), or the reason the item cannot be scored."""
    if not isinstance(item, dict):
        return f"item {index}: expected an object with video_b64 and instruction, got {type(item).__name__}"
    data, instruction = item.get("video_b64"), item.get("instruction")
    if not isinstance(instruction, str):
        return f"item {index}: instruction must be a string, got {type(instruction).__name__}"
    if not isinstance(data, str) or not data:
        return f"item {index}: video_b64 is missing or empty"
    try:
        video = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        return f"item {index}: video_b64 is not valid base64: {exc}"
    if not video:
        return f"item {index}: the decoded video is empty"
    path = Path(folder) / f"{index:05d}.mp4"
    try:
        path.write_bytes(video)
    except OSError as exc:  # a full disk: this item's reason, not a 500 for the batch (module docstring)
        _log.warning("item %d: cannot write %s: %s", index, path, exc)
        return f"item {index}: the clip cannot be written on the service host: {exc}"
    return str(path), instruction


def client_text(text: str, folder: str, index: int, keep: Path | None) -> str:
    """``text`` about item ``index`` of the request whose clips are in ``folder``, as the client is told it: its
    clip named ``item N's clip`` (a temporary folder) or relative to ``keep``, the folder likewise (module
    docstring)."""
    clip = str(Path(folder) / f"{index:05d}.mp4")
    if keep is None:
        return text.replace(clip, f"item {index}'s clip").replace(folder, "the request's clip folder")
    shown = Path(folder).relative_to(keep).as_posix()
    return text.replace(clip, f"{shown}/{index:05d}.mp4").replace(folder, shown)


def _discard(folder: str, frames: FrameStore | None) -> None:
    """Delete a request's temporary folder and drop its clips from the agent's frame cache."""
    if frames is not None:
        frames.forget(str(p) for p in Path(folder).glob("*.mp4"))
    shutil.rmtree(folder, True)


def create_reward_app(agent: Any, preset: str, *, token: str | None = None, max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
                      max_items: int = DEFAULT_MAX_ITEMS, max_body_mb: float = DEFAULT_MAX_BODY_MB, durability: TraceDurability = "exit",
                      info: dict[str, Any] | None = None, keep_videos: str | Path | None = None,
                      frames: FrameStore | None = None, max_buffered_mb: float | None = None,
                      busy_wait_s: float = DEFAULT_REWARD_BUSY_WAIT_S,
                      claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S,
                      body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> FastAPI:
    """FastAPI app serving `agent` (a compiled reward agent for `preset`) on /v1/score (module docstring);
    `keep_videos`: a folder that keeps every request's clips (see the module docstring); `frames`: the
    agent's frame cache, from which a request's deleted clips are dropped; `max_buffered_mb`: the request
    bodies held at once (None: 2048 MiB or `max_body_mb` if larger; ValueError below `max_body_mb`), for room
    in which a body waits up to `busy_wait_s` before its 503; `claim_max_age_s`: as for `arun_agent`;
    `body_timeout_s`: the deadline for a body to arrive once its room is granted (408 after it,
    tools/service_http.py)."""
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):  # a float semaphore never blocks
        raise ValueError(f"max_concurrency must be an int, got {max_concurrency!r}")
    if max_concurrency < 1 or max_items < 1 or max_body_mb <= 0:
        raise ValueError("max_concurrency and max_items must be >= 1 and max_body_mb > 0")
    token = token or None  # "" is no token, as in the tool service: it demanded an empty bearer token of every client
    if token:
        from tools.settings import check_token_text

        check_token_text(token, "the reward service token")
    limit = int(max_body_mb * 1024 * 1024)
    body_timeout_s = check_body_timeout(body_timeout_s)
    bodies = BodyBudget(buffered_limit_bytes(max_buffered_mb, limit, "max_body_mb"), busy_wait_s)
    if keep_videos is not None:  # the clips' paths go into the traces: relative ones named nothing elsewhere
        keep_videos = Path(keep_videos).resolve()
    slots: list[tuple[asyncio.AbstractEventLoop, asyncio.Semaphore]] = []

    def run_slots() -> asyncio.Semaphore:
        """The run slots of the running event loop, made on its first request (module docstring)."""
        loop = asyncio.get_running_loop()
        if not slots or slots[0][0] is not loop:
            slots[:] = [(loop, asyncio.Semaphore(max_concurrency))]
        return slots[0][1]

    app = FastAPI(title="raa reward service", **docs_options(token))
    add_openapi_route(app, token)
    app.state.bodies = bodies
    app.state.body_timeout_s = body_timeout_s

    @app.exception_handler(HTTPProblem)
    async def _problem(_: Request, exc: HTTPProblem) -> JSONResponse:
        return problem_response(exc)

    async def run_one(index: int, item: Any, folder: str) -> dict[str, Any]:
        """One item's result as JSON, with its ``kind``: "error" when the service made it or the agent's machinery
        failed; its texts (reasons, notes, its faults' messages) as the client is told them (`client_text`)."""
        answer = await scored(index, item, folder)
        for field in ("reasons", "notes"):
            answer[field] = [client_text(str(t), folder, index, keep_videos) for t in answer.get(field) or []]
        answer["faults"] = [{**f, "message": client_text(str(f.get("message", "")), folder, index, keep_videos)}
                            for f in answer.get("faults") or []]
        return answer

    async def scored(index: int, item: Any, folder: str) -> dict[str, Any]:
        """One item's result as JSON, with its ``kind``: "error" for an outage (`RewardResult.outage`: its faults,
        those of a result the service made too), else None (module docstring)."""
        result = await outcome(index, item, folder)
        return {**result.model_dump(mode="json"), "kind": "error" if result.outage else None}

    async def outcome(index: int, item: Any, folder: str) -> RewardResult:
        """The agent's result for one item, or the service's own with its fault: a "service" fault for an item
        it could not run (`_item`), `machinery_failed` for a run that raised (module docstring)."""
        run_id = ""
        try:
            parsed = await asyncio.to_thread(_item, index, item, folder)
            if isinstance(parsed, str):
                return fault_result(preset, Fault(stage="service", kind="internal", message=parsed))
            async with run_slots():
                run_id = new_run_id()
                return await arun_agent(agent, parsed[0], parsed[1], run_id, preset, durability=durability,
                                        claim_max_age_s=claim_max_age_s)
        except Exception as exc:  # one item's escaped error is its own result, never a 500 (module docstring)
            failed = machinery_failed(preset, f"item {index}: the run failed on the service host "
                                      f"({type(exc).__name__}: {exc})", run_id)
            _log.warning("%s", failed.faults[0].message)
            return failed

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/v1/info")
    async def service_info(request: Request) -> dict:
        check_bearer(request, token)
        return {"service": "raa-reward", "preset": preset, "max_concurrency": max_concurrency,
                "max_items": max_items, "max_body_bytes": limit, "max_buffered_bytes": bodies.limit,
                **(info or {})}

    @app.post("/v1/score")
    async def score(request: Request) -> dict:
        check_bearer(request, token)
        with bodies.reserve() as room:  # the body is held until the answer is ready (module docstring)
            return await answer(request, room)

    async def answer(request: Request, room: Reservation) -> dict:
        """The /v1/score answer, its body counted by `room` (a `BodyBudget` reservation)."""
        body = await read_body_limited(request, limit, room, body_timeout_s,
                                       "the service's max_body_mb (raa serve-reward --max-body-mb)")
        try:  # parsing, decoding and the clips' files stay off the event loop the runs share
            payload = await asyncio.to_thread(_parse_body, body, max_items)
        except RecursionError as exc:  # JSON nested deeper than the parser goes: malformed, not a 500
            raise HTTPProblem(400, "the body is not JSON this service reads: nested too deeply to parse") from exc
        except ValueError as exc:
            raise HTTPProblem(400, f"the body is not JSON: {exc}") from exc
        items = payload.get("items") if isinstance(payload, dict) else None
        if not isinstance(items, list):
            raise HTTPProblem(400, "the body must be a JSON object with an 'items' list")
        if len(items) > max_items:
            raise HTTPProblem(400, f"{len(items)} items in one request; the limit is {max_items} "
                                   "(raa serve-reward --max-items)")
        meta = payload.get("meta") if isinstance(payload.get("meta"), dict) else {}
        try:
            folder = await asyncio.to_thread(_request_folder, keep_videos, meta.get("iteration"), meta.get("phase"))
        except OSError as exc:  # a full disk or an unwritable --keep-videos: say so, not a bare 500
            _log.warning("cannot make a folder for a request's clips: %s: %s", type(exc).__name__, exc)
            where = " under its --keep-videos folder" if keep_videos is not None else ""
            raise HTTPProblem(507, f"the service cannot make a folder for this request's clips{where} "
                              f"({type(exc).__name__}: {exc.strerror or exc})") from exc
        work = asyncio.ensure_future(asyncio.gather(*(run_one(i, item, folder) for i, item in enumerate(items))))
        try:
            while not (await asyncio.wait({work}, timeout=DISCONNECT_POLL_S))[0]:
                if await request.is_disconnected():  # the client gave up (timeout, Ctrl-C): so do its runs
                    work.cancel()
                    await asyncio.gather(work, return_exceptions=True)
                    raise HTTPProblem(499, "the client disconnected; its runs were cancelled")
            results = work.result()
        finally:
            try:
                if not work.done():  # this handler was cancelled: its runs go with it (module docstring)
                    work.cancel()
                    await asyncio.gather(work, return_exceptions=True)
            finally:
                if keep_videos is None:
                    await asyncio.to_thread(_discard, folder, frames)
        return {"results": results}

    return app
