"""Request video -> frames for the tool service: decoding a path, video bytes or a ``.npy`` body, with
the service's limits (frames per request, decoded size) checked before any decoding.

Decisions where the issue was silent: a C-order uint8 ``.npy`` body is used as a read-only zero-copy view
of the request bytes (other ``.npy`` go through ``np.load``; a Fortran-order one, or a selection of one, is then
made C-order once here: every tracker call made its own copy, `tools.motion.base.validate_frames`, and LK's second
window-grid call converted those to grey again); video bytes are written to a temporary file
for the reader; a video is decoded at ``tools.frames.tool_size`` of the requested short side (the agent's
rule, so remote and in-process frames match); errors are ``HTTPProblem`` answers (400 bad indices, 413
over a limit, 422 undecodable, 503 a read the machine failed). A clip that could not be reached (a
PermissionError, gone since its path was checked: `VideoNotFoundError`) is a 422 "unreadable video", not
"undecodable": its bytes may be good.

A clip whose read the service host's machine failed (`tools.video_errors.machine_failed`: an I/O error, a stale
NFS handle, too many open files, memory that ran short; writing an upload to its temporary file included) is a
503 with ``Retry-After`` (`MACHINE_RETRY_AFTER_S`) and a ``fault`` of tool "service", kind "machine"
(`machine_fault`): it was a 422 "undecodable video", the clip's permanent fault, for a good clip, so the client
reported an input fault and did not try again. The client retries a 503 and, when its attempts are spent, raises
that fault (tools/client.py). A MemoryError of the decoded frames themselves is one too: their size is already
within ``max_decode_mb``, so the host ran short, not the request (it was a 500 tool fault).

A ``.npy`` body meets the same limits as a video, with the same 413 wording, and before any copy:
``frame_indices`` may repeat a frame, so ``arr[frame_indices]`` of a one-frame body could allocate
gigabytes (the count and the decoded size of the *selected* frames are checked first). Frames of 0
pixels (H or W < 1) are an undecodable upload (422): nothing can be computed on them and the
surprise model failed on them with a 500 tool fault. The tracker's own 2-pixel minimum stays its
rule (a 400 from ``/v1/track``); surprise works on frames of a pixel.

The reader's own decode limit is ``max_decode_mb`` too (`_reader_limit`): it kept `tools.video_limits`' 4 GiB, so
a setting above that refused a request within it as the clip's "undecodable video". The reader is the one check of a
video's decoded size (before it decodes or allocates anything), and a video over it is the clip's: a 413 with its
``video_error`` (a `VideoTooLargeError` naming ``RAA_TOOLS_MAX_DECODE_MB`` and the size that would admit the clip),
which the client raises again as the in-process read raises it over its own limit (`tools.video_limits`). The
service checked the size itself first and answered a plain 413, which the client reports as a limit of the service's
setup: an outage, retried by every ``--retry-ineligible``, for a clip the in-process path calls final. A ``.npy`` body
over ``max_decode_mb`` stays a plain 413 (the setup's): the client decoded those frames within its own limit.

A whole clip is decoded by the reader whose metadata the limits were checked on (``read_all_frames``' own
``read(range(T))``): a second open of the path decoded whatever file was there by then, past both limits
when it had been replaced by a longer clip, and scanned the clip's index twice.

An error about an uploaded clip names it as the client sent it (`Upload`: ``uploaded clip 'c.mp4'``, or
``uploaded clip`` without a filename): it named the temporary file written for the reader
(``/tmp/tmpab12.video``), a server path leaked to the client and a name the client never sent. An error about a
clip requested by path names it relative to the allowed root (`shown_to_client`: ``episodes/c.mp4``): the reader
names the file it opens, the resolved absolute path, so a 422 or a tool fault sent the server's folder layout to
the client; the absolute path is logged on the server (logger ``tools.service_frames``) with the answer.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tools.video_limits import DecodeLimit

NPY_MAGIC = b"\x93NUMPY"
MACHINE_RETRY_AFTER_S: float = 5
"""The ``Retry-After`` (s) of a machine fault's 503 (`machine_fault`), as long as a busy 503's."""
NPY_CONTENT_TYPE = "application/x-npy"
_log = logging.getLogger(__name__)


class HTTPProblem(Exception):
    """An error answer: status code, message, optional response ``headers`` (a busy 503's ``Retry-After``) and
    optional extra JSON fields."""

    def __init__(self, status: int, detail: str, *, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.detail, self.extra = status, detail, extra
        self.headers = dict(headers or {})


UPLOAD_LABEL = "uploaded clip"


@dataclass(frozen=True)
class Upload:
    """The bytes of an uploaded clip (a video or a ``.npy``) and how errors name it (`upload_label`)."""

    data: bytes
    label: str = UPLOAD_LABEL


def upload_label(filename: str | None) -> str:
    """``uploaded clip 'NAME'`` for the filename a client sent (cut to 80 characters), else ``uploaded clip``."""
    if not filename:
        return UPLOAD_LABEL
    return f"{UPLOAD_LABEL} {filename if len(filename) <= 80 else filename[:77] + '...'!r}"


def shown_to_client(problem: HTTPProblem, src: Path | bytes | Upload | None, root: Path) -> HTTPProblem:
    """``problem`` as the client is told it: a clip requested by path (``src``, resolved under ``root``) named
    relative to ``root`` in its detail and its fault's message, the original logged (module docstring);
    ``problem`` itself when it does not name that path."""
    if not isinstance(src, Path) or not src.is_relative_to(root):
        return problem
    absolute, shown = str(src), src.relative_to(root).as_posix()
    if absolute not in problem.detail and absolute not in str(problem.extra):
        return problem
    _log.warning("HTTP %d about %s: %s %s", problem.status, absolute, problem.detail, problem.extra or "")

    def named(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(absolute, shown)
        return {k: named(v) for k, v in value.items()} if isinstance(value, dict) else value

    return HTTPProblem(problem.status, named(problem.detail), headers=problem.headers, **named(problem.extra))


SERVICE_DECODE_SETTING = "the tool service's max_decode_mb, RAA_TOOLS_MAX_DECODE_MB"
"""The setting a clip over the service's decode limit is told would admit it (`tools.video_limits.check_decode_size`)."""
NPY_LABEL = ".npy upload"


def _reader_limit(max_decode_mb: float | None) -> DecodeLimit | None:
    """The decode limit of ``max_decode_mb`` (None: the reader's default, `tools.video_limits`), which the reader
    checks before it decodes or allocates anything: with the reader's default, a setting above 4 GiB passed the
    service's own check and then the reader refused the clip as "undecodable video" (422)."""
    from tools.video_limits import DecodeLimit  # lazy, as tools.video is: PyAV only where a video is decoded

    return None if max_decode_mb is None else DecodeLimit(int(max_decode_mb * 2**20), SERVICE_DECODE_SETTING)


def _check_frame_count(count: int, max_frames: int, requested: bool) -> None:
    """413 when ``count`` frames (``requested`` by frame_indices, else the whole clip) exceed ``max_frames``."""
    if count <= max_frames:
        return
    if requested:
        raise HTTPProblem(413, f"{count} frames requested; the limit is {max_frames}")
    raise HTTPProblem(413, f"the clip has {count} frames, over the limit of {max_frames}; pass frame_indices")


def decode_frames(src: Path | bytes | Upload, frame_indices: list[int] | None, max_frames: int,
                  short_side: int | None = None, max_decode_mb: float | None = None) -> np.ndarray:
    """Decode a video path, video bytes or ``.npy`` bytes into uint8 frames ``[T,H,W,3]``; a video is
    decoded with its short side at most ``short_side`` (``.npy`` frames are taken as sent), and refused
    (413) before decoding when its frames would take more than ``max_decode_mb``. Uploaded bytes are named
    by their label in errors (module docstring)."""
    from tools.video import FrameIndexError, VideoError, VideoNotFoundError, VideoReader, tool_size
    from tools.video_errors import VideoTooLargeError, machine_failed

    label = UPLOAD_LABEL
    if isinstance(src, Upload):
        label, src = src.label, src.data
    if isinstance(src, bytes) and src.startswith(NPY_MAGIC):
        return _load_npy(src, frame_indices, max_frames, max_decode_mb)
    tmp = None
    try:
        if isinstance(src, bytes):
            try:
                fd, tmp = tempfile.mkstemp(suffix=".video")
                with os.fdopen(fd, "wb") as fh:
                    fh.write(src)
            except OSError as exc:  # too many open files, an I/O error: the host's, not the upload's
                if machine_failed(exc):
                    raise machine_fault(f"{label}: cannot be written to a temporary file "
                                        f"({type(exc).__name__}: {exc.strerror or exc})") from exc
                raise
            src = Path(tmp)
        with VideoReader(src, decode_limit=_reader_limit(max_decode_mb)) as reader:
            meta = reader.meta
            size = tool_size(meta.width, meta.height, short_side)
            if frame_indices is not None:  # the reader checks the decoded size before decoding anything
                _check_frame_count(len(frame_indices), max_frames, requested=True)
                return reader.read(frame_indices, size=size)
            _check_frame_count(meta.frames, max_frames, requested=False)
            return reader.read(range(meta.frames), size=size)  # the file checked (module docstring)
    except FrameIndexError as exc:
        raise HTTPProblem(400, f"frame index error: {_named(str(exc), tmp, label)}") from exc
    except VideoError as exc:
        # the machine's fault (module docstring); `tools.video` decided (a VideoDecodeError is the clip's, whatever FFmpeg
        # said: out of memory on a corrupt size, an I/O error on data that reads back)
        if isinstance(exc, VideoNotFoundError) and (cause := _cause(exc)) is not None and machine_failed(cause):
            raise machine_fault(_named(str(exc), tmp, label)) from exc
        what = ("unreadable video" if isinstance(exc, VideoNotFoundError)  # no fault of its bytes
                else "too large a video" if isinstance(exc, VideoTooLargeError) else "undecodable video")
        message = _named(str(exc), tmp, label)
        raise HTTPProblem(413 if isinstance(exc, VideoTooLargeError) else 422,
                          f"{what}: {type(exc).__name__}: {message}",  # the client raises it again
                          video_error={"type": type(exc).__name__, "message": message}) from exc
    except MemoryError as exc:  # the frames' own allocation, within max_decode_mb: the host is short of memory
        where = src if isinstance(src, Path) and tmp is None else label
        raise machine_fault(f"{where}: decoding ran out of memory (MemoryError: {exc})") from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def machine_fault(problem: str) -> HTTPProblem:
    """The 503 of a clip the service host's machine failed to read (``problem`` names the clip and the error):
    ``Retry-After: MACHINE_RETRY_AFTER_S`` and a ``fault`` of tool "service", kind "machine", which the client
    raises once its retries are spent (module docstring)."""
    detail = f"{problem}: a fault of the service host's machine, not of the clip; retrying later can fix it"
    return HTTPProblem(503, detail, headers={"Retry-After": f"{MACHINE_RETRY_AFTER_S:g}"},
                       fault={"tool": "service", "kind": "machine", "message": detail})


def _cause(exc: BaseException) -> BaseException | None:
    """The error ``exc`` was raised for: its ``__cause__``, or the context a ``raise ... from None`` hid."""
    if exc.__cause__ is not None:
        return exc.__cause__
    return exc.__context__ if exc.__suppress_context__ else None


def _named(message: str, tmp: str | None, label: str) -> str:
    """``message`` with the temporary file ``tmp`` (when one was written) named ``label`` instead."""
    return message if tmp is None else message.replace(tmp, label)


def _load_npy(data: bytes, frame_indices: list[int] | None, max_frames: int,
              max_decode_mb: float | None) -> np.ndarray:
    """The frames of a ``.npy`` body (selected by ``frame_indices``), its limits checked before the
    selection copies anything (module docstring)."""
    from tools.video_limits import VideoTooLargeError, check_decode_size

    arr = _parse_npy(data)
    if arr.ndim != 4 or arr.shape[-1] != 3 or arr.dtype != np.uint8:
        raise HTTPProblem(422, f".npy upload must be uint8 [T,H,W,3], got {arr.dtype} {arr.shape}")
    total, height, width = arr.shape[:3]
    if height < 1 or width < 1:
        raise HTTPProblem(422, f".npy upload has frames of {height}x{width} pixels; each frame needs at least 1x1")
    count = total if frame_indices is None else len(frame_indices)
    _check_frame_count(count, max_frames, requested=frame_indices is not None)
    try:  # frames the client decoded within its own limit: the two setups' limits differ, no fault of the clip
        check_decode_size(NPY_LABEL, count, (width, height), _reader_limit(max_decode_mb))
    except VideoTooLargeError as exc:
        raise HTTPProblem(413, f"{exc}; or pass fewer frame_indices") from exc
    if frame_indices is None:
        return np.ascontiguousarray(arr)  # the C-order view itself; a Fortran-order array's copy (module docstring)
    bad = [i for i in frame_indices if not 0 <= i < total]
    if bad:
        raise HTTPProblem(400, f"frame indices {bad[:8]} outside 0..{total - 1}")
    return np.ascontiguousarray(arr[frame_indices])


def _parse_npy(data: bytes) -> np.ndarray:
    """The array of a ``.npy`` body (a zero-copy view when it can be one); 422 when it cannot be read."""
    import io

    try:
        arr = _npy_view(data)
        return arr if arr is not None else np.load(io.BytesIO(data), allow_pickle=False)
    except HTTPProblem:
        raise
    except Exception as exc:  # noqa: BLE001 - any parse error is an undecodable upload
        raise HTTPProblem(422, f"undecodable .npy upload: {exc}") from exc


def _npy_view(data: bytes) -> np.ndarray | None:
    """A read-only, zero-copy view of a C-order uint8 ``.npy`` (v1/v2 header); None for anything else,
    which :func:`numpy.load` then handles (copying a 16 MB clip costs a few ms of page faults)."""
    import io

    fh = io.BytesIO(data)
    version = np.lib.format.read_magic(fh)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in readers:
        return None
    shape, fortran_order, dtype = readers[version](fh, max_header_size=10000)
    if fortran_order or dtype != np.uint8:
        return None
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) - fh.tell() != count:
        raise HTTPProblem(422, f"undecodable .npy upload: {len(data) - fh.tell()} data bytes for shape {shape}")
    return np.frombuffer(data, dtype=np.uint8, count=count, offset=fh.tell()).reshape(shape)
