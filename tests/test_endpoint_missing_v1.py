"""A base URL without `/v1` (`RAA_BASE_URL=http://127.0.0.1:8000` for a vLLM server) is named as such.

vLLM and SGLang answer 404 at `{root}/models` and list their models at `{root}/v1/models`. The pre-run
check took the 404 as "cannot tell" and let the batch go on: every clip came back ineligible with
"OpenAIModelNotFoundError: Error code: 404", which names neither the setting nor the fix, and `raa doctor`
only warned that it could not confirm the server. Now a 404 at a URL without `/v1`, where `/v1/models`
lists models, is a problem naming `RAA_BASE_URL` and the URL to set.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest
from typer.testing import CliRunner

from graph.cli import app
from graph.endpoint import check_endpoint, probe_server
from graph.settings import BackboneSettings
from tests.http_stubs import send_json, served


class _RootlessV1(BaseHTTPRequestHandler):
    """A vLLM-like server: only `/v1/...` routes exist (FastAPI's `{"detail": "Not Found"}` elsewhere)."""

    listed = True

    def do_GET(self):  # noqa: N802 (http.server API)
        if self.path == "/v1/models" and _RootlessV1.listed:
            status, body = 200, {"object": "list", "data": [{"id": "Qwen/Qwen2.5-VL-7B-Instruct"}]}
        else:
            status, body = 404, {"detail": "Not Found"}
        send_json(self, body, status, content_type="application/json")

    def log_message(self, *args):
        pass


@pytest.fixture
def root():
    _RootlessV1.listed = True
    with served(_RootlessV1) as url:
        yield url


def _settings(url: str) -> BackboneSettings:
    return BackboneSettings(base_url=url, model="Qwen/Qwen2.5-VL-7B-Instruct", api_key="EMPTY")


@pytest.mark.parametrize("suffix", ["", "/"])
def test_a_base_url_without_v1_is_the_setting_to_fix(root, suffix):
    problem = check_endpoint(_settings(root + suffix), 2)
    assert problem is not None and "RAA_BASE_URL" in problem and f"{root}/v1" in problem


def test_the_judge_settings_are_named_for_the_judge(root):
    seen = probe_server(root, "m", None, wait_s=2, timeout_s=5, env="RAA_JUDGE", role="judge")
    assert seen.status == "problem" and "RAA_JUDGE_BASE_URL" in seen.message and f"{root}/v1" in seen.message


def test_a_404_without_a_model_list_under_v1_still_cannot_tell(root):
    """A proxy without `/models` anywhere is not refused: runs still go ahead (README, 'Connecting a model')."""
    _RootlessV1.listed = False
    assert check_endpoint(_settings(root), 2) is None


def test_score_batch_stops_before_writing_rows(root, tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "a.mp4", "instruction": "push"}) + "\n")
    (tmp_path / "a.mp4").write_bytes(b"")  # a clip that is there: a batch of missing clips asks no endpoint
    env = {"RAA_BASE_URL": root, "RAA_MODEL": "Qwen/Qwen2.5-VL-7B-Instruct", "RAA_API_KEY": "EMPTY",
           "RAA_ENDPOINT_WAIT_S": "2", "RAA_TRACES_PATH": str(tmp_path / "t.sqlite"), "RAA_CACHE_PATH": "off"}
    res = CliRunner().invoke(app, ["score-batch", str(manifest), "--out", str(tmp_path / "r.jsonl")], env=env)
    assert res.exit_code == 2 and f"{root}/v1" in res.output and not (tmp_path / "r.jsonl").exists()
