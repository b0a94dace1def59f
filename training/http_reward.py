"""The reward service's client (:class:`HttpAgentReward`, JSON API in training/rewards.py's docstring) and
the agent adapters' shared pieces: the components a result reports and the writing of a batch's clips.

Decisions where the issue was silent:
- A gateway's 502 / 504 (`GATEWAY_STATUS`) makes the batch ineligible with a reason naming the status and
  saying it was not retried, and why: the request went out through the gateway, so the service may have
  scored the batch, or still be scoring it (tools/http_retry.py). It read as httpx's generic
  "HTTPStatusError: Server error '502 Bad Gateway' ...", which looked like a failure the client forgot
  to retry.
- Any other error status makes the batch ineligible with the service's own reason (`refused_reason`: ``HTTP 400
  Bad Request: 2000 items in one request; the limit is 1024``, its JSON ``detail``): httpx's message ("Client
  error '400 Bad Request' for url ...", with a link to a web page on the status) dropped it, so a batch refused
  for a limit (``--max-items``, ``--max-body-mb``) or a wrong token did not say which.
- A clip that cannot be written as mp4 (no frames, a frame without
pixels, a rate no container stores: `tools.video.write_video` refuses them) is ineligible on its own, of
kind ``none`` (a malformed rollout, as for the verifiable rewards), with the reason; the batch's other
clips are still scored. It used to raise out of the reward, which made the whole batch ineligible.
- The POST runs in the trainer's reward threads (`training.reward_threads.in_thread`), not asyncio's default
  executor: httpx's timeouts are per phase, so a service that keeps trickling bytes holds the thread past the
  trainer's ``reward_timeout_s``; it is then counted as stuck there, and bounded, like a hung sync reward's.
"""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import numpy as np

from training.finite import finite_number
from training.reward_outcome import RewardBatch, reward_number
from training.reward_threads import in_thread

GATEWAY_STATUS = frozenset({502, 504})
"""A gateway's answers for a request it forwarded: not retried, the batch may have been scored (module docstring)."""


class GatewayFailed(RuntimeError):
    """The service's gateway answered 502 / 504 for a batch it had forwarded (not retried)."""


def gateway_reason(status: int, phrase: str) -> str:
    """Why a batch answered with a gateway's ``status`` is ineligible, and why it was not sent again."""
    return (f"HTTP {status} {phrase} from a gateway in front of the reward service; not retried: the request "
            "had reached it, so the service may have scored the batch (or may still be scoring it)")


class ServiceRefused(RuntimeError):
    """The reward service answered a batch with an error status (its reason in the message, `refused_reason`)."""


def refused_reason(resp: Any) -> str:
    """``HTTP <status> <phrase>: <why>`` of an error answer (an httpx Response): the service's ``detail`` (a JSON
    answer's), else the start of its body (module docstring)."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    why = str(detail) if detail is not None else resp.text[:300] or "no reason given"
    return f"HTTP {resp.status_code} {resp.reason_phrase}: {why}"


AGENT_COMPONENTS = ("T", "P", "V", "failure", "unverifiable")
"""The RewardResult fields the agent adapters report as reward components (DESIGN.md §3: the scores
and the gate's inputs)."""


def agent_components(results: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """RewardBatch.components from the agent's results as dicts (a RewardResult dumped, or the reward
    service's JSON; a field a result lacks is None)."""
    return {name: [r.get(name) for r in results] for name in AGENT_COMPONENTS}


def write_clips(videos: Sequence[np.ndarray], folder: Path, names: Sequence[str],
                fps: float) -> tuple[list[Path | None], list[str | None]]:
    """Each clip written as ``folder / name`` (`tools.video.write_video`): (paths, problems), a clip it refuses
    (ValueError: no frames, no pixels) None with the reason (module docstring). Other errors (a full disk)
    are raised: the batch is ineligible then, an outage."""
    from tools.video import write_video

    paths: list[Path | None] = []
    problems: list[str | None] = []
    for video, name in zip(videos, names, strict=True):
        try:
            paths.append(write_video(folder / name, video, fps=fps))
            problems.append(None)
        except ValueError as exc:
            paths.append(None)
            problems.append(f"the rollout could not be written as a video: {exc}")
    return paths, problems


def with_unwritten(batch: RewardBatch, problems: Sequence[str | None]) -> RewardBatch:
    """``batch`` (the results of the written clips, in order) spread over every clip: one that could not be
    written (its ``problems`` entry) is ineligible, of kind none, with the problem as its reason."""
    if not any(problems):
        return batch
    written = iter(range(len(batch.rewards)))
    order = [None if problem else next(written) for problem in problems]

    def spread(values: list[Any] | None, missing: Any) -> list[Any] | None:
        return None if values is None else [missing if k is None else values[k] for k in order]

    return RewardBatch([None if k is None else batch.rewards[k] for k in order],
                       [[str(p)] if k is None else batch.reasons[k] for k, p in zip(order, problems, strict=True)],
                       spread(batch.run_ids, None),
                       None if batch.components is None else {n: [None if k is None else v[k] for k in order]
                                                               for n, v in batch.components.items()},
                       batch.usage if isinstance(batch.usage, dict) else spread(batch.usage, {}),  # one record: as is
                       spread(batch.kinds, None))


@dataclass
class HttpAgentReward:
    """A reward service over HTTP (JSON API in training/rewards.py's docstring); async, one POST per batch."""

    url: str | list[str]
    """Endpoint receiving the POST, or several (e.g. one `raa serve-reward` per node): rank r posts its
    batches to ``url[r % len(url)]``, so the ranks spread over the services without a load balancer."""
    token: str | None = None
    """Bearer token (resolved from the environment by the CLI, never here)."""
    timeout_s: float = 600.0
    """Seconds httpx waits in each phase of a request (connecting, and each read or write: the service's
    answer must start within it, not the whole exchange end)."""
    retries: int = 3
    """Attempts per batch (the first included) when the service cannot have started it (the request never
    delivered whole, HTTP 408 (its body did not arrive in time) or 429/503 busy: after its ``Retry-After``, else
    exponential backoff); other failures
    (a read timeout, a connection broken while waiting, a gateway's 502/504: the service may still be scoring
    the batch; 400, 401, 500, a malformed answer) are not retried (tools/http_retry.py)."""
    backoff_s: float = 1.0
    """First wait between attempts in seconds (doubled each time, at most 30 s)."""
    startup_wait_s: float = 60.0
    """How long ``wait_until_reachable`` (called when the trainer builds the reward) waits for the service
    to answer at all; 0 skips the check. A service that is down later only makes batches ineligible."""
    last_reasons: list[list[str]] = field(default_factory=list)
    """Reasons of the last batch (service reasons, or the transport failure for every item)."""
    _urls: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 1:
            raise ValueError(f"HttpAgentReward: retries must be an integer >= 1, got {self.retries!r}")
        for option, least in (("timeout_s", None), ("backoff_s", 0.0), ("startup_wait_s", 0.0)):
            value = getattr(self, option)  # NaN passed `< 0` and `<= 0`: a request without a timeout
            if not finite_number(value) or (value <= 0 if least is None else value < least):
                raise ValueError(f"HttpAgentReward: {option} must be a finite number "
                                 f"{'> 0' if least is None else '>= 0'}, got {value!r}")
        urls = [self.url] if isinstance(self.url, str) else list(self.url)
        if not urls or not all(isinstance(u, str) and urlsplit(u).scheme in ("http", "https") and urlsplit(u).hostname
                               for u in urls):
            raise ValueError(f"HttpAgentReward: url must be an http(s) URL or a non-empty list of them, got {self.url!r}")
        self._urls = urls
        if self.token:  # checked now, as the tool client's: a token no header can carry failed every batch of the run
            from tools.settings import check_token_text

            check_token_text(self.token, "the reward service token (reward_options.token_env)")

    def url_for(self, rank: int) -> str:
        """The service rank ``rank`` posts to."""
        return self._urls[rank % len(self._urls)]

    def wait_until_reachable(self) -> None:
        """Return once the service answers over HTTP (a GET on a POST route is a 405, still an answer);
        ValueError naming the url after ``startup_wait_s`` of connection failures, or of a gateway's 502 / 503
        / 504 (a proxy in front of a service not up yet: it passed as an answer, and the run's first batches
        were ineligible). Without it, a wrong url or a service that never started made every reward of the
        run ineligible: no update."""
        import httpx

        from graph.endpoint import NOT_UP_STATUS, first_answer  # the backbone pre-flight's wait

        if self.startup_wait_s <= 0:
            return
        for url in self._urls:
            try:
                resp = first_answer(url, wait_s=self.startup_wait_s, timeout_s=min(10.0, self.timeout_s))
            except httpx.HTTPError as exc:
                raise ValueError(f"reward service {url} did not answer within {self.startup_wait_s:g} s "
                                 f"({type(exc).__name__}: {exc}); start it (raa serve-reward) or fix "
                                 "reward_options.url") from None
            if resp.status_code in NOT_UP_STATUS:
                raise ValueError(f"reward service {url} answered only HTTP {resp.status_code} "
                                 f"{resp.reason_phrase} for {self.startup_wait_s:g} s (a gateway whose service "
                                 "is not up); start it (raa serve-reward) or fix reward_options.url")

    def _auth(self) -> dict[str, str]:
        """The bearer-token header of every request to the service (none without a token)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def service_info(self) -> list[tuple[str, dict[str, Any] | str]]:
        """Per service url, its ``GET /v1/info`` answer (the path next to the score url; `raa serve-reward`
        reports its preset and backbone ``scoring`` there), or why there is none (an HTTP error, not JSON,
        not an object). Sent again as a batch is (``retries``, ``backoff_s``: a refused connection, 408, 429,
        503; tools/http_retry.py): a busy moment left the run recorded as "unreported". Never raises: what
        scored a run is recorded, not required (training/provenance.py)."""
        import httpx

        out: list[tuple[str, dict[str, Any] | str]] = []
        from tools.http_retry import client_limits  # idle connections dropped before the service drops them

        with httpx.Client(timeout=min(10.0, self.timeout_s), headers=self._auth(), limits=client_limits()) as http:
            for url in self._urls:
                out.append((url, self._info(http, urljoin(url, "info"))))
        return out

    def _info(self, http: Any, info_url: str) -> dict[str, Any] | str:
        """One service's ``GET /v1/info`` object (``http``: an httpx.Client), or why there is none."""
        import httpx

        from tools.http_retry import SendFailed, send_with_retries  # the batches' retry policy

        try:
            resp = send_with_retries(lambda: http.get(info_url), retries=self.retries, backoff_s=self.backoff_s)
            resp.raise_for_status()
            info = resp.json()
        except (httpx.HTTPError, SendFailed, ValueError) as exc:
            return f"GET {info_url}: {type(exc).__name__}: {exc}"
        return info if isinstance(info, dict) else f"GET {info_url}: not a JSON object"

    def _post(self, url: str, body: bytes) -> dict[str, Any]:
        import httpx

        from tools.http_retry import client_limits, send_with_retries  # the tool client's retry policy

        headers = {"Content-Type": "application/json", **self._auth()}
        with httpx.Client(timeout=self.timeout_s, limits=client_limits()) as http:  # a retry after a wait reuses it
            resp = send_with_retries(lambda: http.post(url, content=body, headers=headers),
                                     retries=self.retries, backoff_s=self.backoff_s, max_wait_s=30.0)
        if resp.status_code in GATEWAY_STATUS:
            raise GatewayFailed(gateway_reason(resp.status_code, resp.reason_phrase))
        if resp.is_error:
            raise ServiceRefused(refused_reason(resp))
        return resp.json()

    async def __call__(self, videos: Sequence[np.ndarray], prompts: Sequence[str], **meta: Any) -> RewardBatch:
        fps = float(meta.get("fps", 16.0))
        items = []
        with tempfile.TemporaryDirectory() as tmp:
            paths, problems = write_clips(videos, Path(tmp), [f"{i:04d}.mp4" for i in range(len(videos))], fps)
            for path, prompt in zip(paths, prompts, strict=True):
                if path is not None:
                    items.append({"video_b64": base64.b64encode(path.read_bytes()).decode("ascii"),
                                  "instruction": prompt, "fps": fps})
        batch = await self._score(items, meta) if items else RewardBatch([], [])
        batch = with_unwritten(batch, problems)
        self.last_reasons = batch.reasons
        return batch

    async def _score(self, items: list[dict[str, Any]], meta: dict[str, Any]) -> RewardBatch:
        """The service's RewardBatch for ``items`` (every item ineligible of kind error when the call fails)."""
        phase = "eval" if meta.get("phase") == "eval" else "train"  # the API's values (_phase is a folder prefix)
        url = self.url_for(int(meta.get("rank", 0)))
        body = json.dumps({"items": items, "meta": {"iteration": meta.get("iteration"), "phase": phase}}).encode("utf-8")
        try:
            reply = await in_thread(self._post, url, body)  # the trainer's reward threads (training/reward_threads.py)
            results = reply.get("results") if isinstance(reply, dict) else None
            if not isinstance(results, list) or len(results) != len(items):
                raise ValueError(f"expected a JSON object with a results list of {len(items)}, got {reply_shape(reply)}")
        except Exception as exc:  # the call or its body failed -> every item ineligible (kind error), with the reason
            reason = f"http reward failed ({url}): {type(exc).__name__}: {exc}"
            return RewardBatch([None] * len(items), [[reason] for _ in items], kinds=["error"] * len(items))
        return service_batch(results, url)


def reply_shape(reply: Any) -> str:
    """What a reward service's answer is, for the reason of a batch it made ineligible: ``a JSON list``, ``an
    object with no results field``, ``results of NoneType``, ``1 results`` (Python's own words, e.g. "list indices
    must be integers", said nothing about the API)."""
    if not isinstance(reply, dict):
        return f"a JSON {'list' if isinstance(reply, list) else type(reply).__name__}"
    if "results" not in reply:
        return f"an object with no results field (fields: {', '.join(map(str, list(reply)[:5])) or 'none'})"
    results = reply["results"]
    return f"{len(results)} results" if isinstance(results, list) else f"results of {type(results).__name__}"


def service_batch(results: list[Any], url: str) -> RewardBatch:
    """A reward service's ``results`` (one per item) as a RewardBatch, item by item: a null reward is the
    service's ⊥ (kind none, its reasons kept) or, with ``"kind": "error"``, its failure (kind error); a result that is not an object, has no ``reward`` field (not
    the verdict: a service answering ``{"score": ...}``) or whose reward is not a number
    (`reward_number`: text such as "0.5" too, as for a reward callable's list) is ineligible of kind error,
    naming the value, and costs the batch's other items nothing."""
    items: list[dict[str, Any]] = []
    rewards: list[float | None] = []
    reasons: list[list[str]] = []
    kinds: list[str | None] = []
    for raw in results:
        item = raw if isinstance(raw, dict) else {}
        given, value = item.get("reasons"), item.get("reward")
        why = [given] if isinstance(given, str) else [str(x) for x in given] if isinstance(given, list) else []
        number = None if value is None else reward_number(value)
        problem = (f"a result that is not a JSON object: {repr(raw)[:80]}" if not isinstance(raw, dict)
                   else f"a result without a reward field: {repr(raw)[:80]}" if "reward" not in raw
                   else f"a reward that is not a number: {repr(value)[:80]}" if value is not None and number is None
                   else None)
        items.append(item)
        rewards.append(number)
        reasons.append(why if problem is None else [f"http reward service {url} returned {problem}", *why])
        kinds.append("error" if problem is not None or (value is None and item.get("kind") == "error") else None)
    return RewardBatch(rewards, reasons, [r.get("run_id") or None for r in items], agent_components(items),
                       [r.get("usage") or {} for r in items], kinds)
