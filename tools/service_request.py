"""How the tool service (tools/service.py) reads a request into its video source and parameters: a ``.npy`` body,
a multipart upload, or a JSON body naming a path under the allowed root (403 outside it; a clip that cannot be
reached there is a 404 whose ``video_error`` the client raises again, a check the host's machine failed its 503).
Bodies are read within their size limit and ``body_timeout_s`` (tools/service_http.py); JSON and multipart are
parsed off the event loop."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from fastapi import Request

from tools.service_budget import Reservation
from tools.service_frames import NPY_CONTENT_TYPE, NPY_MAGIC, HTTPProblem, Upload, machine_fault
from tools.service_http import read_body_limited
from tools.service_multipart import parse_multipart
from tools.service_params import JSON_TOO_LARGE, json_field, parse_json

if TYPE_CHECKING:
    from tools.service import ServiceState


UPLOAD_TOO_LARGE = "the service's max_upload_mb (raa serve-tools --max-upload-mb)"
"""What a 413 for a ``.npy`` or multipart body names as its limit."""


async def parse_request(request: Request, state: ServiceState,
                        room: Reservation | None = None) -> tuple[Path | bytes | Upload, dict]:
    """Read a JSON or multipart request into (video source, parameters); ``room`` as in `read_body_limited`."""
    ctype = request.headers.get("content-type", "").lower()  # media types are case-insensitive (RFC 9110)
    if ctype.startswith((NPY_CONTENT_TYPE, "multipart/form-data")):
        body = await read_body_limited(request, state.max_upload_bytes, room, state.body_timeout_s, UPLOAD_TOO_LARGE)
    else:  # a JSON body has its own, smaller cap (tools/service_params.py MAX_JSON_BODY_MB)
        body = await read_body_limited(request, state.max_json_bytes, room, state.body_timeout_s,
                                       JSON_TOO_LARGE.format(mb=state.max_json_bytes / 2**20))
    if ctype.startswith(NPY_CONTENT_TYPE):
        if not body:
            raise HTTPProblem(422, "undecodable .npy upload: the body is empty")
        if not body.startswith(NPY_MAGIC):
            raise HTTPProblem(422, "undecodable .npy upload: missing the NumPy header")
        return body, {k: json_field(v, k) for k, v in request.query_params.items()}
    if ctype.startswith("multipart/form-data"):  # off the event loop, the body held once (tools/service_multipart.py)
        held = [body]
        del body
        return await parse_multipart(request.scope, held)
    # off the event loop, as the reward service parses its body: 256 MiB of JSON took ~4 s there, all requests stalled
    params = await anyio.to_thread.run_sync(parse_json, body or b"{}", "the body (neither multipart nor .npy)")
    if not isinstance(params, dict) or not isinstance(params.get("path"), str):
        raise HTTPProblem(400, "JSON body must be an object with a string 'path'")
    return resolve_under_root(state.allowed_root, params.pop("path")), params


def resolve_under_root(root: Path, requested: str) -> Path:
    """Resolve ``requested`` (relative to ``root`` or absolute) and refuse anything outside ``root``; a path
    the filesystem cannot resolve (a name over its length limit: 400, a symlink loop: 404) is refused
    with the reason instead of failing the request with a 500. A clip missing under the root, a folder there, or
    one that cannot be resolved is a 404 whose ``video_error`` (`tools.video_errors.clip_file`'s, named as requested)
    the client raises again: the clip could not be reached, as the in-process read says, where a bare 404 (a route
    the service does not serve) is the client's URL setting (tools/client.py). A check the host's machine failed (an
    I/O error, a stale network handle, too many open files) is its 503 machine fault, as the clip's read is there."""
    from tools.video_errors import NOT_FOUND, VideoError, clip_file, machine_failed, unreadable

    if not requested or "\x00" in requested:
        raise HTTPProblem(400, "empty or invalid path")
    shown = repr(requested if len(requested) <= 80 else requested[:77] + "...")
    root = root.resolve()
    try:
        candidate = (root / requested).resolve()
        if not candidate.is_relative_to(root):
            raise HTTPProblem(403, f"path {shown} is outside the allowed root")
        clip_file(candidate, requested)
    except RuntimeError as exc:  # Path.resolve's "Symlink loop from <absolute path>" before Python 3.13
        raise _unreached(f"path {shown} cannot be resolved: a symlink loop",
                         unreadable(requested, OSError(errno.ELOOP, "a symlink loop"))) from exc
    except (VideoError, OSError) as exc:
        error = exc.__context__ if isinstance(exc, VideoError) else exc  # clip_file's stat error (it raises `from None`)
        if isinstance(error, OSError) and error.errno == errno.ENAMETOOLONG:
            raise HTTPProblem(400, f"path {shown} is longer than the filesystem allows") from exc
        if isinstance(exc, OSError):  # resolving failed: its strerror, without the absolute path it names
            message = f"path {shown} cannot be resolved: {exc.strerror or exc}"
            if machine_failed(exc):  # the host's, as a read of the clip it then fails (tools/service_frames.py)
                raise machine_fault(message) from exc
            raise _unreached(message, unreadable(requested, OSError(exc.errno, exc.strerror))) from exc
        message = str(exc).replace(str(candidate), requested)  # not the server's folder layout
        if error is not None and machine_failed(error):
            raise machine_fault(message) from exc
        detail = f"no such file under the allowed root: {shown}" if message.endswith(NOT_FOUND) else message
        raise _unreached(detail, type(exc)(message)) from exc
    return candidate


def _unreached(detail: str, error: Exception) -> HTTPProblem:
    """The 404 of a path request whose clip could not be reached (`resolve_under_root`), with its ``video_error``."""
    return HTTPProblem(404, detail, video_error={"type": type(error).__name__, "message": str(error)})
