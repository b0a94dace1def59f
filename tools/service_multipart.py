"""A multipart upload to the tool service (tools/service.py), parsed in a worker thread and held once.

Starlette parses a form on the event loop: a 200 MB upload took ~0.76 s there, during which no other request,
``/healthz`` included, was read or answered; and the raw body was kept while the upload was read back from the
parser's spooled file, so the upload was held twice. Now starlette's own parser (``Request.form``, its limits and
its 400s kept) runs in a worker thread on an event loop of its own (``anyio.run``), fed the body in ``CHUNK``
pieces, and the raw body is dropped once its last piece is fed, before the upload is read back: one copy of the
upload is held at a time (plus a piece), as the service's memory budget counts it (tools/service_budget.py).

An OSError of the parser's spooled file (an upload over 1 MiB goes to disk: a full disk, too many open files)
escaped the request as a bare 500 "Internal Server Error", which the client reported as a transport fault with no
reason; it is now the host's fault (`spool_fault`): a 503 machine fault (tools/service_frames.py) when its errno
says the machine failed (a retry can fix it), else a 500 fault of tool "service", kind "run", with the error.
"""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request

from tools.service_frames import HTTPProblem, Upload, machine_fault, upload_label
from tools.service_params import json_field
from tools.video_errors import machine_failed

CHUNK = 1 << 20
"""Bytes of the raw body handed to the form parser at a time (1 MiB)."""


async def parse_multipart(scope: MutableMapping[str, Any], held: MutableSequence[bytes]) -> tuple[Upload, dict]:
    """The upload (field ``video``) and the form's other fields (JSON-decoded) of the multipart body ``held[0]``,
    parsed off the event loop; ``held`` is emptied once the body is parsed (the caller keeps no other reference)."""
    return await anyio.to_thread.run_sync(anyio.run, _parse, scope, held)


def spool_fault(exc: OSError) -> HTTPProblem:
    """The answer to an upload the service host could not spool or read back: its machine's fault (503,
    `tools.service_frames.machine_fault`) for an errno that says so, else a 500 fault of the service, with the
    reason (module docstring)."""
    problem = f"the upload cannot be spooled on the service host ({type(exc).__name__}: {exc.strerror or exc})"
    if machine_failed(exc):
        return machine_fault(problem)
    return HTTPProblem(500, problem, fault={"tool": "service", "kind": "run", "message": problem})


async def _parse(scope: MutableMapping[str, Any], held: MutableSequence[bytes]) -> tuple[Upload, dict]:
    size = len(held[0])
    starts = iter(range(0, max(size, 1), CHUNK))

    async def receive() -> dict:
        start = next(starts, size)
        piece, more = held[0][start:start + CHUNK] if held else b"", start + CHUNK < size
        if not more:
            held.clear()  # all fed: the raw body is no longer needed (module docstring)
        return {"type": "http.request", "body": piece, "more_body": more}

    try:
        form = await Request(scope, receive).form(max_files=1, max_fields=16)
    except OSError as exc:  # spooling the upload to a temporary file failed (module docstring)
        raise spool_fault(exc) from exc
    try:  # closed once read: its spooled copy of the upload (on disk past 1 MiB) is not kept for the work
        upload = form.get("video")
        if upload is None or isinstance(upload, str):
            raise HTTPProblem(400, "multipart request needs a file field 'video'")
        try:
            data = await upload.read()
        except OSError as exc:
            raise spool_fault(exc) from exc
        label = upload_label(upload.filename)
        if not data:  # the clip's, as reading it in-process says (the client raises it again, tools/client.py)
            message = f"{label}: video file is empty (0 bytes)"
            raise HTTPProblem(422, f"undecodable video: EmptyVideoError: {message}",
                              video_error={"type": "EmptyVideoError", "message": message})
        params = {k: json_field(v, k) for k, v in form.items() if k != "video"}
        return Upload(data, label), params
    finally:
        await form.close()
