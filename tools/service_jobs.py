"""The work of the tool service's requests (`tools.service`): decode the frames a request names, track or score
them, and answer with JSON-ready dicts. Each job runs in a worker thread under the service's limiter.

Errors (the status codes are listed in `tools.service`):
- What a request asks of its own frames is checked here before the tracker runs, with the tracker protocol's
  own checks (`validate_frames`, `resolve_queries`): frames too small to track, a grid finer than the frames,
  query rows outside the clip or the image are a 400 whatever tracker the service runs. A `TrackQueryError`
  the tracker still raises (a stricter backend) is a 400 too.
- Any other exception of a job is the tool's fault (`as_tool_fault`): a 500 with the fault's tool, kind "run"
  and message, the tracker's ValueError and TypeError included. (They were a 400 "bad track request" until
  December 2026, which told the client its request was wrong for a bug of the tracker.) Tracks that break
  the tracker contract (`require_tracks`) are the same fault.
- Surprise evidence that breaks the scorer contract (`tools.surprise.evidence_problem`: not SurpriseEvidence,
  over another number of frames, a window past them, a NaN or infinite surprise) is the same fault of
  "surprise", with the message the in-process agent gives. A NaN failed when the answer was rendered, after
  the fault handling (a bare 500 the client reported as a transport fault), and evidence over other frames
  was answered 200.
- The summary's errors are the tool's fault too: the request's part (its region boxes, `region_box_problem`, and
  their count) is checked with its options, a 400 before decoding and tracking. Any ValueError or TypeError of
  `summarize_tracks` was a 400 "bad track request", after tracking, blaming the client for a bug of the summary.
- A track summary holding a NaN or an infinity (`non_finite_field`: distances between finite positions so far
  outside the frame that they overflow) is a fault of "motion" the same way; it too failed when rendered. Such
  tracks now break the contract first (`require_tracks`' bound); the check stays as the summary's backstop.
- A tracker or scorer that runs out of memory names the frames it was given (`sized_for`): the service runs such a
  request once more alone, then answers 413 "too large for this device" (tools/service_memory.py), which must say
  how many frames of what size did not fit.
- The answer is rendered as JSON in the job's worker thread (`as_tool_fault`, `render_json`), not on the event
  loop: tracks as lists of 1024 frames x 4096 points took ~7 s to render (81 x 4096: 0.6 s), during which the
  service read and answered nothing else. A value that cannot be rendered is then the tool's fault too.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from tools.errors import ToolFault, out_of_memory
from tools.motion import MotionTracker, summarize_tracks
from tools.motion.base import MotionTracks, TrackQueryError, require_tracks, resolve_queries, validate_frames
from tools.motion.grid import grid_tracks
from tools.service_frames import HTTPProblem, Upload, decode_frames
from tools.service_params import TrackOptions, int_list, short_side, track_options
from tools.surprise import evidence_problem, order_problem

if TYPE_CHECKING:
    from tools.service import ServiceState

T = TypeVar("T")

Job = Callable[["ServiceState", Path | bytes | Upload, dict], dict]


def as_tool_fault(tool: str, job: Job) -> Callable[[ServiceState, Path | bytes | Upload, dict], bytes]:
    """``job`` with its answer rendered as JSON (`render_json`, in the job's worker thread), and any exception
    other than an HTTPProblem or a ToolFault, the rendering's included, raised as ToolFault(tool, "run",
    "<type>: <message>") (module docstring)."""
    def guarded(state: ServiceState, src: Path | bytes | Upload, params: dict) -> bytes:
        try:
            return render_json(job(state, src, params))
        except (HTTPProblem, ToolFault):
            raise
        except Exception as exc:  # noqa: BLE001 - the reason travels to the client as a fault
            raise ToolFault(tool, "run", f"{type(exc).__name__}: {exc}") from exc

    return guarded


def render_json(answer: dict) -> bytes:
    """``answer`` as the JSON body of the response, rendered as starlette's JSONResponse renders it (a NaN or an
    infinity is a ValueError)."""
    return json.dumps(answer, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")


def track_job(state: ServiceState, src: Path | bytes | Upload, params: dict) -> dict:
    """``POST /v1/track``: the tracks (and, asked for, their summary) of the request's frames."""
    opts = track_options(params)  # every option before decoding and tracking (tools/service_params.py)
    frames = decode_frames(src, opts.frame_indices, state.settings.max_frames,
                           max_decode_mb=state.settings.max_decode_mb)
    frames.flags.writeable = False  # unchanged from here on: LK's second window-grid call reuses its grey frames
    tracker = state.tracker
    if tracker is None:  # set when the service starts (tools.service), before any request is served
        raise ToolFault("motion", "run", "the service has no motion tracker")
    tracks = sized_for("motion", frames, lambda: requested_tracks(tracker, frames, opts))
    if opts.frame_indices is not None:  # replace: MotionTracks checks the list against its frames again
        tracks = dataclasses.replace(tracks, frame_indices=list(opts.frame_indices))
    out: dict = {"tracks": tracks.to_dict(opts.tracks_encoding),
                 "frame_size": [int(frames.shape[1]), int(frames.shape[2])],
                 "backend": state.info.get("motion_backend")}
    if opts.summary:
        # the request's regions were checked with its options: any error here is the tool's (module docstring)
        out["summary"] = summarize_tracks(tracks, frames.shape[1:3], opts.regions).model_dump(mode="json")
        if (field := non_finite_field(out["summary"], "summary")) is not None:  # JSON cannot carry it
            raise ToolFault("motion", "run", f"the tracks give a non-finite {field} (positions too far outside "
                                             "the frame to measure)")
    return out


def sized_for(tool: str, frames: np.ndarray, call: Callable[[], T]) -> T:
    """``call()``; an out-of-memory it raises (`out_of_memory`) is raised as ToolFault(tool, "run") naming the
    count and size of ``frames`` (module docstring)."""
    try:
        return call()
    except Exception as exc:
        if not out_of_memory(exc):
            raise
        reason = exc.message if isinstance(exc, ToolFault) else f"{type(exc).__name__}: {exc}"
        raise ToolFault(tool, "run", f"ran out of memory on {len(frames)} frames of {frames.shape[1]}x"
                                     f"{frames.shape[2]} ({reason})") from exc


def non_finite_field(value: Any, where: str) -> str | None:
    """The path (``where`` first) of the first NaN or infinity in the JSON-ready ``value``, or None. Such a value
    failed when the answer was rendered, after the fault handling: a bare 500 (module docstring)."""
    if isinstance(value, float):
        return None if math.isfinite(value) else where
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if (found := non_finite_field(item, f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]")):
            return found
    return None


def requested_tracks(tracker: MotionTracker, frames: np.ndarray, opts: TrackOptions) -> MotionTracks:
    """The tracks a request asks for: ``grid_frames`` "window" is the agent's grid (`grid_tracks`, one or two
    tracker calls), otherwise one call with the request's ``grid_size`` or ``queries``. A request the frames
    cannot serve is a 400 before the tracker runs; tracks that break the contract are a tracker's bug (module
    docstring): JSON cannot carry a NaN, a summary would be wrong, and tracks one frame short got the request's
    frame_indices anyway."""
    try:  # before either grid: the window grid's query frames need at least one frame
        validate_frames(frames)
    except ValueError as exc:  # no frames, or frames too small to track
        raise HTTPProblem(400, f"bad track request: {exc}") from exc

    def call(grid: int | None, rows: np.ndarray | None) -> MotionTracks:
        try:
            resolve_queries(frames.shape, grid, rows)  # the protocol's checks, before tracking
        except ValueError as exc:  # TrackQueryError
            raise HTTPProblem(400, f"bad track request: {exc}") from exc
        try:
            tracks = tracker.track(frames, grid_size=grid, queries=rows)
        except TrackQueryError as exc:  # a stricter backend's refusal; any other error is its fault
            raise HTTPProblem(400, f"bad track request: {exc}") from exc
        try:
            return require_tracks(tracks, len(frames), None if rows is None else len(rows), frame_size=frames.shape[1:3])
        except ValueError as exc:
            raise ToolFault("motion", "run", str(exc)) from exc

    if opts.grid_frames == "first" or opts.grid_size is None:  # "window" comes with a grid_size (track_options)
        return call(opts.grid_size, opts.queries)
    try:
        return grid_tracks(lambda rows: call(None, rows), frames.shape, opts.grid_size)
    except TrackQueryError as exc:  # a grid finer than the frames, refused before any tracking
        raise HTTPProblem(400, f"bad track request: {exc}") from exc


def surprise_job(state: ServiceState, src: Path | bytes | Upload, params: dict) -> dict:
    """``POST /v1/surprise``: the surprise evidence of the request's frames, windows named by clip frame."""
    side = short_side(params.get("short_side"), state.settings.surprise_short_side)
    indices = int_list(params.get("frame_indices"), "frame_indices")
    if indices is not None and (backwards := order_problem(indices)) is not None:  # windows would end before start
        raise HTTPProblem(400, f"bad surprise request: {backwards}")
    frames = decode_frames(src, indices, state.settings.max_frames, side, state.settings.max_decode_mb)
    scorer = state.scorer
    if scorer is None:  # the route refuses the request first (501: started with --no-surprise)
        raise ToolFault("surprise", "run", "surprise is not enabled on this service")
    evidence = sized_for("surprise", frames, lambda: scorer.score(frames))
    if (problem := evidence_problem(evidence, len(frames))) is not None:  # the agent's check (module docstring)
        raise ToolFault("surprise", "run", problem)
    if indices is not None:  # windows named by clip frame, as /v1/track names its tracks
        evidence = evidence.on_frames(indices)
    return evidence.model_dump(mode="json")
