"""Request options of the tool service (tools/service.py): parsed and checked before any frame is decoded
or tracked, each bad one a 400 naming the option.

Decisions where the issues were silent:
- Every option of a request is checked before its frames are decoded: a bad ``tracks_encoding`` was
  refused only after the tracker had run, and a bad ``regions`` after tracking too.
- ``grid_size`` is at most ``MAX_GRID_SIZE`` (64, i.e. 4096 points): it had no bound, and 100000 asked
  for 10^10 points (a MemoryError 500, or minutes of CPU for 1000). The library's own calls ask for 8
  (the agent), 12 (``raa demo``) and 16 (the README, the benchmarks).
- ``queries`` has at most ``MAX_QUERIES`` rows (4096, as many points as the largest grid); the agent
  sends at most 32 points.
- ``regions`` is an object mapping a name to a box of four numbers, fractions of the frame by
  ``summarize_tracks``' rule (`region_box_problem`, checked here: a box in pixels was refused only after
  tracking, and the summary's other errors were blamed on the request with it). A list or a string reached it and failed with an
  AttributeError (a 500). At most ``MAX_REGIONS`` (16, ``tools.motion.summary``) regions: co-motion is
  computed for every pair, and 1000 regions took 40 s before the summary cut them to 64.
- ``grid_frames`` ("first" by default, or "window") says which frames a ``grid_size`` grid is queried on:
  "first" is the tracker protocol's grid on frame 0 (`tools.motion.base`; `RemoteMotionTracker.track` forwards
  ``grid_size`` and must equal an in-process tracker), "window" the agent's grid (`tools.motion.grid`), which
  also tracks an object that enters the view later. A new option, not a new meaning of ``grid_size``: that
  would have changed every existing caller's tracks and broken the remote tracker's equality.
- ``frame_indices`` of a track request must not go backwards (`track_indices`, the surprise endpoint's rule,
  `tools.sampling.order_problem`): listed out of time order they were tracked across shuffled time and
  answered 200. Refused, not sorted (the answer and ``queries``' ``t`` follow the listed order).
- JSON nested deeper than the parser's recursion limit is a 400 like any other malformed JSON (the
  RecursionError was a 500), for a body and for the JSON-valued form / query fields alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from tools.motion.summary import MAX_REGIONS, region_box_problem
from tools.sampling import order_problem
from tools.service_frames import HTTPProblem

MAX_GRID_SIZE = 64
"""Largest ``grid_size`` of a track request (``grid_size**2`` points)."""
MAX_QUERIES = 4096
"""Most ``queries`` rows (points) of a track request."""
MAX_JSON_BODY_MB = 8.0
"""Largest JSON request body (MiB), below ``max_upload_mb``: a JSON request is a path and options (4096 queries and
100,000 frame indices are under 1 MiB), while a 256 MiB body parsed to ~1.3 GB of Python objects that the memory
budget, counting raw bytes only, never saw. Frames travel as an ``application/x-npy`` body or a multipart upload."""
JSON_TOO_LARGE = ("a JSON body (a path and options) is limited to {mb:g} MiB; send frames as an application/x-npy "
                  "body or a multipart upload (field 'video'), not as JSON")
JSON_FIELDS = ("queries", "frame_indices", "regions")
"""Form and query-string fields that carry JSON (lists and objects); the others are plain strings."""
TracksEncoding = Literal["list", "base64"]
"""How a track answer carries its arrays (`tools.motion.base.MotionTracks.to_dict`)."""
TRACKS_ENCODINGS = get_args(TracksEncoding)
GridFrames = Literal["first", "window"]
"""Frames a ``grid_size`` grid is queried on (module docstring)."""


def parse_json(text: str | bytes, what: str) -> Any:
    """``json.loads(text)``, or 400 naming ``what`` when it is not JSON or is nested too deeply to parse."""
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise HTTPProblem(400, f"{what} is nested too deeply to parse") from exc
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError for bytes
        raise HTTPProblem(400, f"{what} is not valid JSON: {exc}") from exc


def json_field(value: Any, name: str) -> Any:
    """A form or query-string field: parsed from JSON for ``JSON_FIELDS``, as it is otherwise."""
    if name not in JSON_FIELDS or not isinstance(value, str):
        return value
    return parse_json(value, f"field {name!r}")


def int_list(value: Any, name: str) -> list[int] | None:
    """A list of integers (None when absent); 400 for anything else."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise HTTPProblem(400, f"{name!r} must be a list of integers")
    return value


def _whole_number(value: Any) -> int | None:
    """An int, or a string of ASCII digits, as an int; None for anything else (bools, floats, "²", and digits
    past ``int``'s conversion limit, 4300 by default: its ValueError was a 500)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def grid_size(value: Any) -> int | None:
    """The ``grid_size`` option: 1..MAX_GRID_SIZE (None when absent)."""
    if value is None:
        return None
    number = _whole_number(value)
    if number is None or not 1 <= number <= MAX_GRID_SIZE:
        raise HTTPProblem(400, f"grid_size must be a whole number from 1 to {MAX_GRID_SIZE}, got {value!r}")
    return number


def grid_frames(value: Any, grid: int | None, rows: np.ndarray | None) -> GridFrames:
    """The ``grid_frames`` option ("first" when absent); "window" applies to a grid, so it needs ``grid_size``
    and no ``queries``."""
    if value is None:
        return "first"
    if value not in get_args(GridFrames):
        raise HTTPProblem(400, f"grid_frames must be 'first' or 'window', got {value!r}")
    if value == "window" and (grid is None or rows is not None):
        raise HTTPProblem(400, "grid_frames 'window' needs grid_size and no queries: it places a grid")
    return value


def queries(value: Any) -> np.ndarray | None:
    """The ``queries`` option, ``[[t, x, y], ...]`` with at most MAX_QUERIES rows, as float64 (its shape
    and ranges are the tracker's to check); None when absent."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise HTTPProblem(400, f"queries must be a list of [t, x, y] rows, got {type(value).__name__}")
    if len(value) > MAX_QUERIES:
        raise HTTPProblem(400, f"{len(value)} queries; the limit is {MAX_QUERIES} points")
    try:
        return np.asarray(value, dtype=np.float64)
    except (ValueError, TypeError, OverflowError) as exc:  # OverflowError: an integer beyond float64 (10**400)
        raise HTTPProblem(400, f"bad track request: queries must be [t, x, y] rows of numbers: {exc}") from exc


def regions(value: Any) -> dict[str, list[float]] | None:
    """The ``regions`` option: an object mapping a name to a box ``[x0, y0, x1, y1]`` of numbers, at most
    ``MAX_REGIONS`` of them, each a box ``summarize_tracks`` accepts (`region_box_problem`; None when absent)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise HTTPProblem(400, "regions must be an object mapping a name to a box [x0, y0, x1, y1], "
                               f"got {type(value).__name__}")
    if len(value) > MAX_REGIONS:
        raise HTTPProblem(400, f"{len(value)} regions; the limit is {MAX_REGIONS} (MAX_REGIONS)")
    for name, box in value.items():
        if not (isinstance(box, list) and len(box) == 4 and all(_float_number(v) for v in box)):
            raise HTTPProblem(400, f"region {name!r}: a box is a list of four numbers [x0, y0, x1, y1], got {box!r}")
        if (problem := region_box_problem(name, box)) is not None:  # the summary's own rule, before tracking
            raise HTTPProblem(400, f"bad track request: {problem}")
    return value


def _float_number(value: Any) -> bool:
    """True for an int or float that converts to a float (not a bool; 10**400 overflows: it was a 500)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def tracks_encoding(value: Any) -> TracksEncoding:
    """The ``tracks_encoding`` option: "list" (the default) or "base64"."""
    if value is None:
        return "list"
    if value not in TRACKS_ENCODINGS:
        raise HTTPProblem(400, f"tracks_encoding must be 'list' or 'base64', got {value!r}")
    return value


def flag(value: Any) -> bool:
    """A boolean option: true for JSON true, "true" or "1" (any case), false otherwise."""
    return str(value).lower() in ("true", "1")


def short_side(value: Any, default: int | None) -> int | None:
    """The ``short_side`` option: a whole number of pixels (at least 16), "full", or absent (``default``)."""
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lower() == "full":
        return None
    number = _whole_number(value)
    if number is None or number < 16:
        raise HTTPProblem(400, f"short_side must be a whole number of pixels >= 16 or 'full', got {value!r}")
    return number


def track_indices(value: Any) -> list[int] | None:
    """The ``frame_indices`` of a track request: whole numbers that never go backwards (`order_problem`, the
    surprise endpoint's rule): the tracker follows the frames in the order listed, so out of time order each
    step of a track jumped back and forth in the clip. Refused rather than sorted: sorted, the answer would
    not line up with the request, and ``queries``' ``t`` (a position among the listed frames) would name
    another frame. Repeats in order stay (a step of zero pixels). None when absent."""
    indices = int_list(value, "frame_indices")
    if indices is not None and (backwards := order_problem(indices)) is not None:
        raise HTTPProblem(400, f"bad track request: {backwards}")
    return indices


@dataclass(frozen=True)
class TrackOptions:
    """The checked options of a ``/v1/track`` request."""

    frame_indices: list[int] | None
    grid_size: int | None
    queries: np.ndarray | None
    grid_frames: GridFrames
    tracks_encoding: TracksEncoding
    summary: bool
    regions: dict[str, list[float]] | None


def track_options(params: dict) -> TrackOptions:
    """Every option of a track request, checked (400 for the first bad one)."""
    grid, rows = grid_size(params.get("grid_size")), queries(params.get("queries"))
    return TrackOptions(frame_indices=track_indices(params.get("frame_indices")), grid_size=grid,
                        queries=rows, grid_frames=grid_frames(params.get("grid_frames"), grid, rows),
                        tracks_encoding=tracks_encoding(params.get("tracks_encoding")),
                        summary=flag(params.get("summary", False)), regions=regions(params.get("regions")))
