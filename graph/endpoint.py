"""Pre-flight check of the backbone endpoint, run at the edge before long jobs (training with
`reward: agent`, `raa score-batch`, `raa serve-reward`, `raa eval reward`, `raa eval world-model`) and before
`raa score`'s one clip (a wrong endpoint there cost every stage's retries before an ineligible result).

A dead endpoint, a misspelt `RAA_MODEL` or a rejected key does not crash a run: every run ends
ineligible with the reason, as it must. Over a batch or a training run that is hours of work with no
reward at all, so the entry points ask the server first: `GET {base_url}/models` (OpenAI-compatible
servers, vLLM and SGLang included, list what they serve there).

Decisions where the issues were silent:
- `raa score` checks too, though it scores one clip: a wrong URL, key or model name is one error line and exit 2
  at once, and a host that never answers costs this wait, not each stage's request timeouts and retries before
  an ineligible exit 3; a server still loading is waited for. It costs one `GET /models` per call. A bad clip path
  or blank instruction is found before it (graph/score_inputs.py): that run needs no endpoint, and waits for none.
- Connection failures and timeouts are retried for `wait_s` seconds (a server still loading its
  weights is normal when a job script starts both); then the problem is reported. A URL that cannot
  be requested at all (no `http://` / `https://`, as in `localhost:8000/v1`, or malformed) is reported
  at once as the setting to fix: waiting never makes it right, and it was retried for the whole wait
  and then blamed on a server that was not up.
- An API key that is not printable ASCII cannot travel in a header: a problem naming `{env}_API_KEY`
  (httpx raised UnicodeEncodeError, a traceback from `raa doctor` and the pre-run check).
- 401 / 403 means the key was rejected, but where its words say no credit is left (a LiteLLM proxy answers a spent
  budget, an end user's included, with a 401; OpenRouter a key over its own credit limit with a 403): then that,
  read and advised as a model call's answer is (`graph.settings_faults.no_credit`), where it named a rejected key;
  a 200 whose model list lacks `RAA_MODEL` means a wrong name
  (the message lists what is served); "NAME:latest" in the list serves "NAME" (Ollama's default tag; any
  other tag does not: with only "llava:13b" pulled, Ollama answers a request for "llava" "not found").
- A 200 web page (an HTML content type, or a body that starts with markup) means the URL is not an
  OpenAI-compatible API (a web UI's catch-all route, a login page, a server root without `/v1`): a problem
  naming `{env}_BASE_URL`, as `graph.transport.not_a_completion` says of such a reply to a model call (every
  run would be ineligible for it). It used to pass as "unverifiable".
- A 404 at a base URL without `/v1` whose `/v1/models` lists models is a server root given without its
  `/v1` (`http://127.0.0.1:8000` for vLLM): a problem naming `{env}_BASE_URL` and the URL to set. It
  passed as "unverifiable", and every run of the batch was ineligible with a bare "Error code: 404".
- Any other answer (404 from a proxy without `/models`, a 500, JSON that is not a model list) cannot say
  either way: `probe_server` calls it "unverifiable", with what it saw, and the pre-run check
  (`check_server`, `preflight`) passes it, so it never blocks a working setup; `raa doctor` shows it as a
  warning (it said "ok ... answers" for any server at all, a plain file server included).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from graph.settings import BackboneSettings


def preflight(settings: BackboneSettings) -> str | None:
    """`check_endpoint` with the settings' `endpoint_wait_s` (0: no check), the problem ending with how to
    skip the check."""
    if settings.endpoint_wait_s <= 0:
        return None
    problem = check_endpoint(settings, settings.endpoint_wait_s)
    return None if problem is None else f"{problem} (RAA_ENDPOINT_WAIT_S=0 skips this check)"


NOT_UP_STATUS = frozenset({502, 503, 504})
"""What a gateway (or a server still loading) answers for a service that is not up yet: waited through by
`first_answer`, like a refused connection."""


def first_answer(url: str, *, wait_s: float, timeout_s: float, headers: dict[str, str] | None = None) -> httpx.Response:
    """The first HTTP answer of `GET url`, retrying connection failures, timeouts and `NOT_UP_STATUS`
    answers about once a second for `wait_s` seconds (one try when 0); at the deadline, the last such answer
    or the last `httpx.HTTPError`. A proxy's 502 for a service still starting used to count as the service
    answering. A URL that cannot be requested (`httpx.UnsupportedProtocol`, `httpx.InvalidURL`) is raised
    at once."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            resp = httpx.get(url, headers=headers or {}, timeout=timeout_s)
        except httpx.UnsupportedProtocol:
            raise
        except httpx.HTTPError:
            if time.monotonic() >= deadline:
                raise
        else:
            if resp.status_code not in NOT_UP_STATUS or time.monotonic() >= deadline:
                return resp
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


@dataclass(frozen=True)
class ServerCheck:
    """What `GET {base_url}/models` told: "verified" (it lists the model), "unverifiable" (it answered, but
    not with a model list: cannot tell) or "problem" (a run would be ineligible); `message` says what was
    seen (empty when verified)."""

    status: Literal["verified", "unverifiable", "problem"]
    message: str = ""

    @property
    def problem(self) -> str | None:
        """The message when a run would fail, else None (the lenient pre-run reading)."""
        return self.message if self.status == "problem" else None


def check_endpoint(settings: BackboneSettings, wait_s: float) -> str | None:
    """None when the endpoint answers and serves `settings.model` (or cannot tell); else the problem."""
    return probe_endpoint(settings, wait_s).problem


def probe_endpoint(settings: BackboneSettings, wait_s: float) -> ServerCheck:
    """`probe_server` with the backbone settings."""
    return probe_server(str(settings.base_url), settings.model or "", settings.api_key, wait_s=wait_s,
                        timeout_s=settings.timeout_s)


def check_server(base_url: str, model: str, api_key: str | None, *, wait_s: float, timeout_s: float,
                 env: str = "RAA", role: str = "backbone") -> str | None:
    """`check_endpoint` for any OpenAI-compatible server: its settings are named `{env}_BASE_URL`,
    `{env}_API_KEY` and `{env}_MODEL` in the problem (the reward-eval judge's are RAA_JUDGE_*)."""
    return probe_server(base_url, model, api_key, wait_s=wait_s, timeout_s=timeout_s, env=env, role=role).problem


def probe_server(base_url: str, model: str, api_key: str | None, *, wait_s: float, timeout_s: float,
                 env: str = "RAA", role: str = "backbone") -> ServerCheck:
    """Ask `GET {base_url}/models` whether the server serves `model` (module docstring); never raises."""
    from tools.settings import check_token_text

    url = f"{base_url.rstrip('/')}/models"
    try:  # httpx raised UnicodeEncodeError for a key it cannot put in a header (a pasted smart quote)
        headers = {"Authorization": f"Bearer {check_token_text(api_key, f'{env}_API_KEY')}"} if api_key else {}
    except ValueError as exc:  # names the variable and the character's position, never the key
        return ServerCheck("problem", f"the {role} API key cannot be sent: {exc}")
    try:
        resp = first_answer(url, wait_s=wait_s, timeout_s=min(10.0, timeout_s), headers=headers)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        return ServerCheck("problem", bad_url_problem(f"the {role} endpoint", base_url, f"{env}_BASE_URL", exc))
    except httpx.HTTPError as exc:
        return ServerCheck("problem", f"the {role} endpoint {base_url} did not answer within {wait_s:g} s "
                                      f"({type(exc).__name__}: {exc}); is the server up ({env}_BASE_URL)?")
    if resp.status_code in (401, 403):
        if (spent := _spent_credit(resp, env)) is not None:
            return ServerCheck("problem", f"the {role} endpoint {base_url} answered GET /models: {spent}")
        return ServerCheck("problem", f"the {role} endpoint {base_url} rejected the API key "
                                      f"(HTTP {resp.status_code}; {env}_API_KEY)")
    cannot = f"cannot confirm this is an OpenAI-compatible server serving {model!r}"
    if resp.status_code == 404 and (v1 := _v1_root(base_url, headers, timeout_s)):
        return ServerCheck("problem", f"the {role} endpoint {base_url} has no /models (HTTP 404) but {v1}/models "
                                      f"lists models: set {env}_BASE_URL={v1}")
    if resp.status_code != 200:
        return ServerCheck("unverifiable", f"GET {url} answered HTTP {resp.status_code}; {cannot}")
    served = _model_ids(resp)
    if served is None and _web_page(resp):
        return ServerCheck("problem", f"the {role} endpoint {base_url} is not an OpenAI-compatible API: GET {url} "
                                      f"answered HTTP 200 with a web page "
                                      f"({resp.headers.get('content-type', 'no content-type')}); check "
                                      f"{env}_BASE_URL (an OpenAI-compatible server's URL usually ends in /v1)")
    if served is None:
        return ServerCheck("unverifiable", f"GET {url} answered HTTP 200 without an OpenAI model list; {cannot}")
    # Ollama lists "llava:latest" and serves it as "llava" too (a bare name means that tag, and only that one)
    if not any(m in (model, f"{model}:latest") for m in served):
        shown = ", ".join(served[:10]) + (" ..." if len(served) > 10 else "")
        return ServerCheck("problem", f"model {model!r} is not served at {base_url} (served: {shown or 'none'}); "
                                      f"set {env}_MODEL to one of them")
    return ServerCheck("verified")


def _spent_credit(resp: httpx.Response, env: str) -> str | None:
    """The server's words and what to change when a 401 or 403 of `GET /models` says no credit is left, read as a
    model call's answer is (`graph.settings_faults.no_credit`, its fix naming the budget spent), else None."""
    import httpx2  # the openai SDK's own httpx (openai >= 3), whose responses its errors hold
    import openai

    from graph.server_words import clause_joined, quoted_words
    from graph.settings_faults import no_credit, settings_problem
    from graph.transport import EndpointNames

    body = _json_body(resp, resp.text)
    error = body.get("error", body) if isinstance(body, dict) else body  # as the openai SDK reads an error body
    said = error.get("message") if isinstance(error, dict) else None
    answer = httpx2.Response(resp.status_code, headers={"content-type": resp.headers.get("content-type", "")},
                             content=resp.content, request=httpx2.Request("GET", str(resp.url)))
    exc = openai.APIStatusError(said if isinstance(said, str) else f"Error code: {resp.status_code}",
                                response=answer, body=error)
    if not no_credit(exc):
        return None
    fix = settings_problem(exc, EndpointNames(f"{env}_BASE_URL", f"{env}_MODEL", api_key=f"{env}_API_KEY"))
    return clause_joined(quoted_words(exc, 300), fix or "")


def _v1_root(base_url: str, headers: dict[str, str], timeout_s: float) -> str | None:
    """`{base_url}/v1` when `base_url` does not end in `/v1` and `GET {base_url}/v1/models` answers a model
    list (a vLLM / SGLang root given without its `/v1`: every model call would get 404), else None."""
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        return None
    try:
        resp = httpx.get(f"{base}/v1/models", headers=headers, timeout=min(10.0, timeout_s))
    except httpx.HTTPError:
        return None
    return f"{base}/v1" if resp.status_code == 200 and _model_ids(resp) is not None else None


def bad_url_problem(what: str, url: str, setting: str, exc: Exception) -> str:
    """The problem of a URL httpx cannot request (`httpx.UnsupportedProtocol`, `httpx.InvalidURL`): the
    setting to fix, not a server that is down."""
    return (f"{what} URL {url!r} cannot be requested ({type(exc).__name__}: {exc}); {setting} needs a scheme "
            "and a host, e.g. http://HOST:PORT/v1")


def _web_page(resp: httpx.Response) -> bool:
    """Whether `resp` is a web page (or other markup): an HTML content type, or a body starting with `<`."""
    return "html" in resp.headers.get("content-type", "").lower() or resp.content.lstrip()[:1] == b"<"


def _model_ids(resp: httpx.Response) -> list[str] | None:
    """The ids of an OpenAI model list, or None when the body is not one."""
    body = _json_body(resp, None)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


def _json_body(resp: httpx.Response, otherwise: Any) -> Any:
    """The JSON body of `resp`, else `otherwise`: not JSON (ValueError), or nested deeper than the parser goes
    (RecursionError, which raised out of `probe_server`, a traceback from `raa doctor` and the pre-run check)."""
    try:
        return resp.json()
    except (ValueError, RecursionError):
        return otherwise
