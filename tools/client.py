"""HTTP client of the tool service (httpx + tenacity) implementing MotionTracker and SurpriseScorer.

Frames are sent as a raw ``.npy`` upload (lossless), so a remote call returns exactly what the
same tool returns in-process. Decisions where the issue was silent:
- Tracks travel base64-encoded (``track`` always, ``track_path`` by default): JSON lists of floats
  cost ~20 ms to render and ~15 ms to parse for 81 frames x 256 points, more than the HTTP hop.
- Retried (``retries`` attempts; tools/http_retry.py decides): only a request the service cannot have
  started computing: one never delivered whole (connecting failed or timed out, no pooled connection in
  time, sending failed or timed out), a 429 or 503 "busy", and a 408 (the service's answer to a body that did not
  arrive within its ``body_timeout_s``: read whole before any work, so nothing was computed), after the wait its
  ``Retry-After`` asks (else exponential backoff); the last of them is kind ``transport``. A request sent whole whose answer is lost is not: a read timeout (kind ``timeout``), a
  connection broken while waiting (kind ``transport``), a gateway's 502 / 504 (504: kind ``timeout``). The
  service goes on computing a request whose client gave up, so each retry added one more full computation
  behind the same worker slots (3 attempts, 3 tracker runs); the service, for its part, skips a queued
  request whose client is gone (tools/service.py).
- 400 (bad queries / indices) raises :class:`TrackQueryError` for tracking and ``ValueError`` for
  surprise, like the in-process tools; 500 with a ``fault`` payload re-raises that ToolFault; any
  other error status, and exhausted retries, raise ``ToolFault("service", kind, ...)`` with kind
  ``auth`` (401/403), ``input`` (422: a request the service cannot process), ``timeout`` (504), ``config`` (501:
  the service does not serve that tool, e.g. surprise on a service started with ``--no-surprise``; a permanent
  answer, never retried), ``config`` too for a 404 (a route the URL does not serve: ``RAA_TOOLS_URL`` with a wrong
  path, or another server) and a 413 (a limit of the service's setup, its upload size, ``max_frames`` or
  ``max_decode_mb`` for ``.npy`` frames, or a proxy's: as the LLM side reads a 413, `graph.transport.server_limit`),
  each message saying what to fix (a video over ``max_decode_mb`` is a 413 with the clip's ``video_error``, below); ``timeout`` (no answer within ``timeout_s``), ``config`` too for a URL httpx cannot request (no
  ``http://`` / ``https://``, malformed: never retried, it is the setting to fix) or ``transport``. 404 and 413
  were ``input``, which read as the clip's problem; each is a ToolFault, an outage (`graph.schemas.OUTAGE_FAULTS`).
- A 503 whose body holds a ``fault`` (the service host's machine failed to read the clip: an I/O error, too many
  open files, out of memory; tools/service_frames.py) is retried like a busy one, after its ``Retry-After``; when
  the attempts are spent it raises that fault, ``ToolFault("service", "machine", ...)`` saying it is not the
  clip's and that retrying later can fix it (a tool fault, which ``raa score-batch --retry-ineligible`` scores
  again). It was a 422, ``ToolFault("service", "input", "undecodable video ...")``: the clip blamed, never retried.
- A 422 for a clip the service could not decode or read, or a 413 for one whose frames would decode to more than
  its ``max_decode_mb`` (its ``video_error``: the VideoError's class and message, tools/service_frames.py) raises
  that VideoError again (`tools.video_errors.served_error`), as decoding it
  in-process would: the clip's video fault (`graph.nodes.common.to_fault`), an outage only when the clip could not
  be reached (`Fault.outage`). It was ``ToolFault("service", "input", ...)``, recorded as kind "tool": an outage, so
  a clip no run can decode was counted as the machinery's failure and scored again by every
  ``--retry-ineligible``. A 422 without one (a ``.npy`` body of frames the client decoded) stays a ToolFault. A path
  request (``track_path``, ``score_path``) whose clip is missing under the service's root, or is a folder there, is
  a 404 with a ``video_error`` too, raised as the in-process read raises it (`tools.video_errors.clip_file`).
  A tracker or scorer that ran out of memory is run again alone by the service; out of memory alone, it answers
  413 with a fault of kind ``too_large`` naming the frames (tools/service_memory.py), raised at once: sending the
  same frames again fails the same way.
- Idle pooled connections are dropped after ``keepalive_s`` (`tools.http_retry.CLIENT_KEEPALIVE_S`, 2 s),
  before the service closes them (tools/http_retry.py): at 5 s each, a request could go out on a connection
  the service was closing, a transport fault not retried.
- What the service serves: every tool answer carries ``SERVED_HEADER``, a digest of the models the service runs
  (`tools.toolbox.served_identity`; ``/v1/info`` carries it too, as ``served``). The client pins the first one it is
  answered with (`ServedPin`, shared by the clients a `Toolbox` builds) and raises ``ToolFault("service",
  "config", ...)`` for an answer from other models (the service restarted with another checkpoint): the
  toolbox's cached tracks and surprise came from the first ones, and the agent's frame cache keys a remote tool
  by its toolbox (`Toolbox.tracker_identity`), not by what the URL serves now. A restart with the same models is
  answered as before; a service that sends no header is not checked.
- An answer that is not a JSON object (``RAA_TOOLS_URL`` pointing at another HTTP server: a 200 with an
  HTML page) is ``ToolFault("service", "config", "not a tool service answer ...")`` naming the URL; it
  raised an untyped JSONDecodeError (or an AttributeError for JSON that is not an object).
"""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np

from tools.errors import ToolFault
from tools.http_retry import (
    CLIENT_KEEPALIVE_S,
    RetriesExhausted,
    SendFailed,
    client_limits,
    send_with_retries,
)
from tools.motion.base import MotionTracks, TrackQueryError, validate_frames
from tools.settings import check_token_text
from tools.surprise import SurpriseEvidence

MAX_QUERY_CHARS = 6000
SERVED_HEADER = "X-Raa-Tools-Served"
"""Response header of the tool service's answers: the digest of the models it serves (module docstring)."""


class ServedPin:
    """The models a tool service answered with first (`SERVED_HEADER`), which later answers must match (thread-safe)."""

    def __init__(self) -> None:
        self._served: str | None = None
        self._lock = threading.Lock()

    def check(self, served: str | None, where: str) -> None:
        """Pin `served` when nothing is pinned, else ToolFault("service", "config") when it differs; None (a
        service that does not say) is not checked."""
        if served is None:
            return
        with self._lock:
            if self._served is None:
                self._served = served
            pinned = self._served
        if served != pinned:
            raise ToolFault("service", "config", f"the tool service at {where} now serves other models (served "
                                                 f"{served}, was {pinned}): results cached from the first ones "
                                                 "would be mixed with theirs; build a new Toolbox to use them")


def status_kind(status: int) -> str:
    """The ToolFault kind of an error status the client does not handle otherwise (module docstring)."""
    if status in (401, 403):
        return "auth"
    if status == 422:
        return "input"
    if status == 504:  # a gateway stopped waiting: the service may still be computing (tools/http_retry.py)
        return "timeout"
    return "config" if status in (404, 413, 501) else "transport"


def status_hint(status: int, base_url: str) -> str:
    """What to fix after an error status that names a setting (`status_kind` "config"), "" for the others."""
    if status == 404:  # the service's own 404s carry the clip's video_error
        return f"; is RAA_TOOLS_URL {base_url!r} the tool service (it serves /v1/track, /v1/surprise)?"
    if status == 413:  # every clip of a run sends about as much: the setup's limit (graph.transport.server_limit)
        return ("; a limit of the tool service's setup: raise it (raa serve-tools --max-upload-mb, "
                "RAA_TOOLS_MAX_FRAMES, RAA_TOOLS_MAX_DECODE_MB; a reverse proxy's client_max_body_size) or send less")
    return ""


class ToolServiceClient:
    """Thin synchronous client of the tool service (thread-safe; one connection pool)."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout_s: float = 300.0,
                 connect_timeout_s: float = 10.0, retries: int = 3, backoff_s: float = 0.5,
                 keepalive_s: float = CLIENT_KEEPALIVE_S, served: ServedPin | None = None) -> None:
        headers = {"Authorization": f"Bearer {check_token_text(token, 'the tool service token')}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, limits=client_limits(keepalive_s),
                                  timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s))
        self.retries, self.backoff_s = retries, backoff_s
        self.served = served or ServedPin()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ToolServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, bad_request: type[Exception] = ValueError, **kwargs: Any) -> dict:
        """Send a request with retries; return the JSON answer or raise a typed error."""
        try:
            resp = send_with_retries(lambda: self._http.request(method, path, **kwargs), retries=self.retries,
                                     backoff_s=self.backoff_s)
        except SendFailed as exc:
            if (fault := _spent_fault(exc)) is not None:  # a machine fault the retries did not outlast
                raise ToolFault(fault.tool, fault.kind, f"{path}: {fault.message}") from exc
            where = f" (tool service URL {str(self._http.base_url)!r}, RAA_TOOLS_URL)" if exc.kind == "config" else ""
            raise ToolFault("service", exc.kind, f"{path}: {exc}{where}") from exc
        if resp.status_code == 200:
            self.served.check(resp.headers.get(SERVED_HEADER), str(self._http.base_url))
            answer = _json_object(resp)
            if answer is None:
                raise ToolFault("service", "config", f"{path}: not a tool service answer (HTTP 200, "
                                                     f"{resp.headers.get('content-type', 'no content type')}: "
                                                     f"{resp.text[:200]!r}); is RAA_TOOLS_URL "
                                                     f"{str(self._http.base_url)!r} the tool service?")
            return answer
        body = _json_object(resp) or {"detail": resp.text[:500]}
        detail = str(body.get("detail", ""))
        if resp.status_code == 400:
            raise bad_request(detail)
        if isinstance(body.get("video_error"), dict):  # a 422 or a path's 404: the clip's, not the service's
            from tools.video_errors import served_error

            raise served_error(body["video_error"])
        if isinstance(body.get("fault"), dict):  # a 500 tool fault, a 413 too large for the device
            f = body["fault"]
            raise ToolFault(str(f.get("tool", "service")), str(f.get("kind", "run")), str(f.get("message", detail)))
        hint = status_hint(resp.status_code, str(self._http.base_url))
        raise ToolFault("service", status_kind(resp.status_code), f"{path}: HTTP {resp.status_code}: {detail}{hint}")

    def info(self) -> dict:
        return self.request("GET", "/v1/info")

    def check_serves(self, tool: str) -> dict:
        """``/v1/info`` when the service answers and serves ``tool`` ("motion" or "surprise"), else a
        ToolFault ``(tool, "load")`` naming the service: what a batch, a reward service or a training run
        checks at start, since otherwise every run finds out (501 "surprise is not enabled", or no
        answer at all) and every clip is ineligible."""
        try:
            info = self.info()
        except ToolFault as exc:
            raise ToolFault(tool, "load", f"the tool service at {self._http.base_url} cannot be used: "
                                          f"{exc.message}") from exc
        if tool == "surprise" and not info.get("surprise_model"):
            raise ToolFault("surprise", "load", f"the tool service at {self._http.base_url} does not serve "
                                                "surprise (started with --no-surprise?)")
        return info

    def post_frames(self, path: str, frames: np.ndarray, fields: dict, bad_request: type[Exception]) -> dict:
        """Send frames losslessly as ``.npy``: a raw body with query parameters, or multipart when the
        parameters are too long for a URL."""
        frames = np.ascontiguousarray(frames)
        data = {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items() if v is not None}
        if sum(len(k) + len(v) for k, v in data.items()) <= MAX_QUERY_CHARS:
            body = _NpyBody(frames)
            return self.request("POST", path, content=body, params=data, bad_request=bad_request,
                                headers={"Content-Type": "application/x-npy", "Content-Length": str(len(body))})
        buf = io.BytesIO()
        np.save(buf, frames, allow_pickle=False)
        return self.request("POST", path, files={"video": ("frames.npy", buf.getvalue(), "application/octet-stream")},
                            data=data, bad_request=bad_request)


def _spent_fault(exc: SendFailed) -> ToolFault | None:
    """The ``fault`` of the answer that spent a request's retries (the service's 503 machine fault,
    `tools.service_frames.machine_fault`), its message saying how many attempts it took; None for any other
    failure (a busy 503, a 408, a failed connection)."""
    if not isinstance(exc, RetriesExhausted) or exc.response is None:
        return None
    fault = (_json_object(exc.response) or {}).get("fault")
    if not isinstance(fault, dict):
        return None
    return ToolFault(str(fault.get("tool", "service")), str(fault.get("kind", "run")),
                     f"{fault.get('message', '')} (HTTP {exc.response.status_code}, after {exc.attempts} attempts)")


def _json_object(resp: httpx.Response) -> dict | None:
    """The answer's body as a JSON object, or None when it is not one."""
    try:
        body = resp.json()
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        return None
    return body if isinstance(body, dict) else None


class _NpyBody:
    """The ``.npy`` serialisation of a C-contiguous array, streamed one leading-axis slice at a time.

    Re-iterable (a retry sends it again) and never materialised: building the whole ``.npy`` in a
    BytesIO costs two fresh copies of the clip (~18 ms for 16 MB here, mostly page faults), about
    as much as the loopback transfer itself."""

    def __init__(self, arr: np.ndarray) -> None:
        head = io.BytesIO()
        np.lib.format.write_array_header_1_0(head, np.lib.format.header_data_from_array_1_0(arr))
        self.header, self.arr = head.getvalue(), arr

    def __len__(self) -> int:
        return len(self.header) + self.arr.nbytes

    def __iter__(self):
        yield self.header
        for item in self.arr:
            yield item.tobytes()


def _query_fields(grid_size: int | None, queries: np.ndarray | None) -> dict:
    """The request fields of a grid or query rows. A ``grid_size`` that is not an integer is refused here with
    the in-process tracker's TrackQueryError (`tools.motion.base.grid_points`): ``str(int(4.7))`` sent "4", so
    the remote tracker answered another grid's tracks where the in-process one raised."""
    if grid_size is not None and not isinstance(grid_size, int | np.integer):
        raise TrackQueryError(f"grid_size must be a positive integer, got {grid_size!r}")
    return {"grid_size": None if grid_size is None else str(int(grid_size)),
            "queries": None if queries is None else np.asarray(queries, dtype=np.float64).tolist()}


class RemoteMotionTracker:
    """MotionTracker that calls ``POST /v1/track``."""

    name = "remote"

    def __init__(self, client: ToolServiceClient) -> None:
        self.client = client

    def track(self, frames: np.ndarray, *, grid_size: int | None = None,
              queries: np.ndarray | None = None) -> MotionTracks:
        frames = validate_frames(frames)
        fields = {**_query_fields(grid_size, queries), "tracks_encoding": "base64"}
        out = self.client.post_frames("/v1/track", frames, fields, TrackQueryError)
        return MotionTracks.from_dict(out["tracks"])

    def track_path(self, path: str | Path, *, grid_size: int | None = None, queries: np.ndarray | None = None,
                   frame_indices: list[int] | None = None, summary: bool = False,
                   regions: dict | None = None, tracks_encoding: Literal["list", "base64"] = "base64",
                   grid_frames: Literal["first", "window"] = "first") -> dict:
        """Track a video that lies under the service's allowed root; returns the raw answer.

        ``answer["tracks"]`` is base64 by default (read it with ``MotionTracks.from_dict``): encoding and
        parsing ~40k floats as JSON lists costs about a third of a small tracking request. ``grid_frames``
        "window" asks for the agent's grid (`tools.motion.grid`) instead of ``grid_size``'s grid on frame 0.
        """
        body = {"path": str(path), **_query_fields(grid_size, queries), "frame_indices": frame_indices,
                "summary": summary, "regions": regions, "tracks_encoding": tracks_encoding, "grid_frames": grid_frames}
        return self.client.request("POST", "/v1/track", json={k: v for k, v in body.items() if v is not None},
                                   bad_request=TrackQueryError)


class RemoteSurpriseScorer:
    """SurpriseScorer that calls ``POST /v1/surprise``."""

    def __init__(self, client: ToolServiceClient) -> None:
        self.client = client

    def score(self, frames: np.ndarray) -> SurpriseEvidence:
        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(f"frames must be uint8 [T,H,W,3], got {frames.dtype} {frames.shape}")
        return SurpriseEvidence.model_validate(self.client.post_frames("/v1/surprise", frames, {}, ValueError))

    def score_file(self, video: str | Path, *, frames: int | None = None,
                   short_side: int | None = None) -> SurpriseEvidence:
        """Upload the encoded clip and let the service decode it: its first ``frames`` frames (all when
        None), with the short side at most ``short_side`` pixels (None: full size). The upload is the
        file, a few MB, where ``score`` sends the decoded frames (512 frames at 448 pixels are 0.5 GB,
        over the service's default upload limit); the service decodes with the same reader and size
        rule as ``FrameStore.scaled_frames``, so the result equals scoring those frames in-process. A clip that is
        gone, unreadable or a folder raises the VideoError the in-process read raises (`tools.video_errors.clip_file`):
        a folder was "cannot be read (IsADirectoryError ...)", a final video fault, where in-process it is "is a
        directory, not a video file", retried by ``--retry-ineligible`` only once a file can be read at the path
        (`graph.batch_retry.clip_readable`); both are the clip's video fault now, neither retried while a folder.
        Call it through `tools.errors.run_clip_tool`, which lets those errors through as the clip's."""
        from tools.video_errors import clip_file, not_found, unreadable

        clip_file(Path(video), str(video))  # gone, a folder, unreadable: worded as the in-process read words it
        try:  # gone or unreadable since
            data = Path(video).read_bytes()
        except FileNotFoundError:
            raise not_found(str(video)) from None
        except OSError as exc:
            raise unreadable(str(video), exc) from None
        fields = {"short_side": "full" if short_side is None else str(int(short_side))}
        if frames is not None:
            fields["frame_indices"] = json.dumps(list(range(int(frames))))
        return SurpriseEvidence.model_validate(self.client.request(
            "POST", "/v1/surprise", files={"video": (Path(video).name, data, "application/octet-stream")},
            data=fields))

    def score_path(self, path: str | Path) -> SurpriseEvidence:
        """Score a video that lies under the service's allowed root."""
        return SurpriseEvidence.model_validate(self.client.request("POST", "/v1/surprise", json={"path": str(path)}))
