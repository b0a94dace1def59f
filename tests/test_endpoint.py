"""The pre-flight endpoint check (graph/endpoint.py) against a local HTTP server, and its two entry points:
`raa score-batch` and training with `reward: agent` stop with exit 2 instead of scoring nothing."""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph.cli import app
from graph.endpoint import check_endpoint
from graph.settings import BackboneSettings
from tests.http_stubs import send_json, served

ROOT = Path(__file__).resolve().parents[1]


class _Models(BaseHTTPRequestHandler):
    status = 200
    body: object = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-VL-7B-Instruct"}, {"id": "other"}]}
    auth: list = []

    def do_GET(self):  # noqa: N802 (http.server API)
        _Models.auth.append((self.path, self.headers.get("Authorization")))
        send_json(self, _Models.body, _Models.status)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Models.status, _Models.auth = 200, []
    _Models.body = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-VL-7B-Instruct"}, {"id": "other"}]}
    with served(_Models) as root:
        yield f"{root}/v1"


def _settings(url: str, model: str = "Qwen/Qwen2.5-VL-7B-Instruct") -> BackboneSettings:
    return BackboneSettings(base_url=url, model=model, api_key="sk-test")


def test_served_model_passes_and_the_key_is_sent(server):
    assert check_endpoint(_settings(server), 5) is None
    assert _Models.auth == [("/v1/models", "Bearer sk-test")]


def test_a_model_the_server_does_not_serve_is_named_with_what_it_serves(server):
    problem = check_endpoint(_settings(server, "Qwen/Qwen2.5-VL-7B"), 5)
    assert "model 'Qwen/Qwen2.5-VL-7B' is not served" in problem and "Qwen/Qwen2.5-VL-7B-Instruct, other" in problem


def test_a_tagged_name_serves_the_bare_name(server):
    _Models.body = {"data": [{"id": "llava:latest"}]}  # Ollama
    assert check_endpoint(_settings(server, "llava"), 5) is None
    assert "not served" in check_endpoint(_settings(server, "lla"), 5)


def test_a_bare_name_is_only_the_latest_tag(server):
    """Ollama serves a bare name as NAME:latest only: with just llava:13b pulled, a request for "llava" is
    answered "model not found". The check passed it (any NAME:TAG counted), so every run went ineligible."""
    _Models.body = {"data": [{"id": "llava:13b"}, {"id": "qwen2.5vl:latest"}]}
    problem = check_endpoint(_settings(server, "llava"), 5)
    assert problem is not None and "model 'llava' is not served" in problem and "llava:13b" in problem
    assert check_endpoint(_settings(server, "llava:13b"), 5) is None
    assert check_endpoint(_settings(server, "qwen2.5vl"), 5) is None


def test_rejected_key(server):
    _Models.status = 401
    assert "rejected the API key (HTTP 401; RAA_API_KEY)" in check_endpoint(_settings(server), 5)


@pytest.mark.parametrize("status, message", [
    (401, "Authentication Error, ExceededBudget: End User=ishaan3 over budget. Spend=0.000887, Budget=0.0001"),
    (401, "Authentication Error, Budget has been exceeded! Current cost: 10.51, Max budget: 10.0"),
    (403, "Key limit exceeded (total limit). Manage it using https://openrouter.ai/settings/keys")])
def test_a_spent_budget_at_models_is_reported_as_the_budget_not_a_rejected_key(server, status, message):
    """A LiteLLM proxy answers a spent budget as a 401 `auth_error` (docs/my-website/docs/proxy/users.md), OpenRouter
    a key over its credit limit as a 403: the key is accepted, its credit is what to change."""
    _Models.status = status
    _Models.body = {"error": {"message": message, "type": "auth_error", "param": "None", "code": status}}
    problem = check_endpoint(_settings(server), 5)
    assert problem is not None and "rejected the API key" not in problem, problem
    assert f"HTTP {status}" in problem and ("no credit" in problem or "credit limit" in problem), problem
    assert "RAA_API_KEY" in problem, problem


@pytest.mark.parametrize("status, body", [
    (401, {"error": {"message": "Incorrect API key provided: sk-test.", "type": "invalid_request_error",
                     "param": None, "code": "invalid_api_key"}}),
    (401, b"<html><head><title>401 Authorization Required</title></head><body>nginx</body></html>"),
    (403, b"forbidden " * 200_000), (403, b"[1, 2]"), (401, b""), (401, b"\xff\xfe{")])
def test_an_ordinary_rejection_at_models_still_names_the_key(server, status, body):
    """A 401 / 403 whose words name no spent credit (OpenAI's bad key, a proxy's page, a body of megabytes, not a
    JSON object, empty, undecodable) is still the key's: `_spent_credit` reads its body first."""
    _Models.status, _Models.body = status, body
    assert f"rejected the API key (HTTP {status}; RAA_API_KEY)" in check_endpoint(_settings(server), 5)


@pytest.mark.parametrize("status", [401, 200])
def test_json_nested_deeper_than_the_parser_goes_is_no_traceback(server, status):
    """`probe_server` never raises: a body nested past the JSON parser's depth raised RecursionError, not the
    ValueError its body readers caught (a traceback from `raa doctor` and the pre-run check)."""
    _Models.status, _Models.body = status, b"[" * 200_000
    problem = check_endpoint(_settings(server), 5)
    assert (problem is not None and "rejected the API key" in problem) if status == 401 else problem is None, problem


@pytest.mark.parametrize("status, body", [(404, {"error": "no such route"}), (404, b"<html>not found</html>"),
                                          (200, {"models": ["x"]}), (200, b"plain text")])
def test_answers_that_cannot_tell_pass(server, status, body):
    """They pass the pre-run check, and `probe_endpoint` says what it saw (raa doctor's warning)."""
    from graph.endpoint import probe_endpoint

    _Models.status, _Models.body = status, body
    assert check_endpoint(_settings(server, "anything"), 5) is None
    seen = probe_endpoint(_settings(server, "anything"), 5)
    assert seen.status == "unverifiable" and f"GET {server}/models answered HTTP {status}" in seen.message
    assert "cannot confirm this is an OpenAI-compatible server serving 'anything'" in seen.message


@pytest.mark.parametrize("body", [b"<!doctype html><html><body>Sign in</body></html>", b"  <html>ui</html>"])
def test_a_web_page_at_models_is_not_an_openai_api(server, body):
    """A web UI's catch-all route or a login page answers 200 to GET /models: every run would be ineligible
    (graph.transport.not_a_completion), so the pre-run check stops; it passed as "unverifiable"."""
    _Models.body = body
    problem = check_endpoint(_settings(server, "anything"), 5)
    assert problem is not None and f"the backbone endpoint {server} is not an OpenAI-compatible API" in problem
    assert "HTTP 200 with a web page" in problem and "RAA_BASE_URL" in problem and "/v1" in problem


def test_no_answer_within_the_wait():
    problem = check_endpoint(_settings("http://127.0.0.1:9/v1"), 0.3)
    assert "did not answer within 0.3 s" in problem and "RAA_BASE_URL" in problem


@pytest.mark.parametrize("url", ["localhost:8000/v1", "127.0.0.1:8000/v1", "http://[::1/v1"])
def test_a_url_without_a_scheme_is_reported_at_once_as_the_setting_to_fix(url):
    """httpx's UnsupportedProtocol was retried for the whole wait and then blamed on a server not up."""
    import time

    from graph.endpoint import check_server

    start = time.monotonic()
    problem = check_server(url, "m", None, wait_s=30, timeout_s=5)
    assert time.monotonic() - start < 5
    assert f"URL {url!r} cannot be requested" in problem and "RAA_BASE_URL needs a scheme" in problem


def test_a_key_that_cannot_travel_in_a_header_is_the_setting_to_fix_not_a_crash(server):
    """httpx raised UnicodeEncodeError for an API key with a non-ASCII character (a pasted smart quote):
    `probe_server` ("never raises") crashed `raa doctor` and the pre-run check with a traceback."""
    from graph.endpoint import probe_server

    seen = probe_server(server, "Qwen/Qwen2.5-VL-7B-Instruct", "\u201csk-test\u201d", wait_s=0, timeout_s=5)
    assert seen.status == "problem" and "RAA_API_KEY must be printable ASCII" in seen.message
    assert "sk-test" not in seen.message and _Models.auth == []  # never echoed, never sent


def test_score_batch_stops_before_writing_rows(server, monkeypatch, tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "a.mp4", "instruction": "push"}) + "\n")
    (tmp_path / "a.mp4").write_bytes(b"")  # a clip that is there: a batch of missing clips asks no endpoint
    env = {"RAA_BASE_URL": server, "RAA_MODEL": "typo-model", "RAA_API_KEY": "EMPTY", "RAA_ENDPOINT_WAIT_S": "5",
           "RAA_TRACES_PATH": str(tmp_path / "t.sqlite"), "RAA_CACHE_PATH": "off"}
    res = CliRunner().invoke(app, ["score-batch", str(manifest), "--out", str(tmp_path / "r.jsonl")], env=env)
    assert res.exit_code == 2 and "model 'typo-model' is not served" in res.output
    assert "RAA_ENDPOINT_WAIT_S=0 skips this check" in res.output and not (tmp_path / "r.jsonl").exists()


def test_score_stops_at_a_wrong_endpoint_before_the_run(server, tmp_path):
    """`raa score` ran the clip against a wrong endpoint: each stage's calls went through the transport retries
    (minutes against a host that never answers) before exit 3 with an ineligible result; it now checks first,
    as the other scoring commands do, and stops with the problem (exit 2) without a run or a model call (a clip that
    is there: a missing one is its ineligible result before the check, tests/test_score_inputs_first.py)."""
    from tests.cli_agent_helpers import _clip

    env = {"RAA_BASE_URL": server, "RAA_MODEL": "typo-model", "RAA_API_KEY": "EMPTY", "RAA_ENDPOINT_WAIT_S": "5",
           "RAA_TRACES_PATH": str(tmp_path / "t.sqlite"), "RAA_CACHE_PATH": "off"}
    res = CliRunner().invoke(app, ["score", _clip(tmp_path / "a.mp4"), "-i", "push", "--preset", "direct"], env=env)
    assert res.exit_code == 2 and "model 'typo-model' is not served" in res.output, res.output
    assert "RAA_ENDPOINT_WAIT_S=0 skips this check" in res.output and "raa trace" not in res.output
    assert _Models.auth == [("/v1/models", "Bearer EMPTY")]  # the check only: no chat request


def test_training_with_the_agent_reward_stops_at_start(server, tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAA_")}, "RAA_BASE_URL": server,
           "RAA_MODEL": "typo-model", "RAA_API_KEY": "EMPTY", "RAA_ENDPOINT_WAIT_S": "5"}
    from tests.launches import launch

    proc = launch([sys.executable, "-m", "training.train", "--config", str(ROOT / "training/configs/smoke.yaml"),
                   "--reward", "agent", "--reward_options", "{preset: decomposed}", "--output_dir",
                   str(tmp_path / "run")], timeout=120, what="training", cwd=ROOT, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "reward: agent: model 'typo-model' is not served" in proc.stderr and "deepspeed" not in proc.stderr.lower()


def test_eval_world_model_stops_before_asking_questions(server, tmp_path):
    manifest = tmp_path / "vqa.jsonl"
    manifest.write_text(json.dumps({"path": "a.mp4", "questions": [{"question": "Is it red?", "answer": "yes"}]}) + "\n")
    env = {"RAA_BASE_URL": server, "RAA_MODEL": "typo-model", "RAA_API_KEY": "EMPTY", "RAA_ENDPOINT_WAIT_S": "5",
           "RAA_TRACES_PATH": str(tmp_path / "t.sqlite"), "RAA_CACHE_PATH": "off"}
    res = CliRunner().invoke(app, ["eval", "world-model", "-m", str(manifest), "-o", str(tmp_path / "o")], env=env)
    assert res.exit_code == 2 and "model 'typo-model' is not served" in res.output


def test_score_batch_loads_its_tool_models_before_scoring(monkeypatch, tmp_path):
    """A V-JEPA 2 folder that cannot load made every row of a full-preset batch ineligible."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "a.mp4", "instruction": "push"}) + "\n")
    (tmp_path / "a.mp4").write_bytes(b"")  # a clip that is there: a batch of missing clips asks no endpoint
    env = {"RAA_BASE_URL": "http://127.0.0.1:9/v1", "RAA_MODEL": "m", "RAA_API_KEY": "EMPTY",
           "RAA_ENDPOINT_WAIT_S": "0", "RAA_TRACES_PATH": str(tmp_path / "t.sqlite"), "RAA_CACHE_PATH": "off",
           "RAA_VJEPA_MODEL": str(tmp_path / "no-vjepa")}
    res = CliRunner().invoke(app, ["score-batch", str(manifest), "--out", str(tmp_path / "r.jsonl"),
                                   "--preset", "full"], env=env)
    assert res.exit_code == 2 and "surprise tool load failure" in res.output
    assert not (tmp_path / "r.jsonl").exists()
