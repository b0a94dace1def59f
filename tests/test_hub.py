"""Hub models on a machine that cannot reach the hub (tools/hub.py): a cached V-JEPA 2 id loads from the
cache without transformers' connection retries, a missing one fails with a reason saying the hub was not
reachable. The "hub" is a closed local port or a local HTTP server: no test touches the network."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from threading import Thread

import pytest

from tests.http_stubs import POLL_S
from tools.hub import hub_load_kwargs, hub_reachable, is_hub_id

CLOSED = "http://127.0.0.1:9"  # discard port: nothing listens, the connection is refused at once


@contextlib.contextmanager
def answering_hub(status: int) -> Iterator[str]:
    """The URL of a local "hub" answering every HEAD request with ``status``, served while the block runs."""

    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args):  # noqa: ANN002
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def test_only_hub_ids_that_are_not_local_paths_count(tmp_path, monkeypatch):
    (tmp_path / "org" / "model").mkdir(parents=True)
    assert is_hub_id("facebook/vjepa2-vitl-fpc64-256")
    assert not is_hub_id(str(tmp_path / "missing"))  # an absolute path is no repo id
    monkeypatch.chdir(tmp_path)
    assert not is_hub_id("org/model")  # a local folder by that name is read, not asked for


def test_an_endpoint_that_answers_anything_is_reachable(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # tests/conftest.py sets HF_HUB_OFFLINE=1
    with answering_hub(404) as url:
        assert hub_reachable(url, timeout_s=5)
        assert hub_load_kwargs("org/model", endpoint=url) == {}
    assert not hub_reachable(CLOSED, timeout_s=1)
    assert hub_load_kwargs("org/model", endpoint=CLOSED, timeout_s=1) == {"local_files_only": True}
    assert hub_load_kwargs("/no/such/folder", endpoint=CLOSED, timeout_s=1) == {}  # transformers says why



@pytest.mark.parametrize("endpoint", ["http://[::1", "http://host:port"])
def test_a_malformed_endpoint_is_no_answer_without_a_thread_traceback(monkeypatch, endpoint):
    """A malformed ``HF_ENDPOINT`` raised httpx.InvalidURL (not an httpx.HTTPError) in the probe thread: the right
    answer (unreachable), but an "Exception in thread hub-probe" traceback on stderr at every model load."""
    import threading

    escaped = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    assert not hub_reachable(endpoint, timeout_s=1)
    assert escaped == []

def test_hf_hub_offline_is_left_to_huggingface_hub(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert hub_load_kwargs("org/model", endpoint=CLOSED, timeout_s=1) == {}  # no request: it reads its cache


@pytest.mark.parametrize("repo", ["acme/tiny-vjepa", "acme/not-cached"])
@pytest.mark.slow
def test_vjepa_by_hub_id_without_network(tmp_path, repo):
    """In a fresh process whose hub endpoint refuses connections (HF_HOME and HF_ENDPOINT are read at
    import): the cached id loads from the cache, the missing one names the cause."""
    script = textwrap.dedent(f"""
        from pathlib import Path
        from transformers import VJEPA2Config, VJEPA2Model
        from tools.errors import ToolFault
        from tools.surprise import VJEPA2SurpriseScorer

        repo = Path({str(tmp_path)!r}) / "hub" / "models--acme--tiny-vjepa"
        cfg = VJEPA2Config(crop_size=32, patch_size=16, frames_per_clip=16, tubelet_size=2, hidden_size=48,
                           num_attention_heads=2, num_hidden_layers=1, pred_hidden_size=48,
                           pred_num_attention_heads=2, pred_num_hidden_layers=1, num_pooler_layers=1)
        VJEPA2Model(cfg).save_pretrained(repo / "snapshots" / ("a" * 40))  # the cache's own layout
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("a" * 40)
        try:
            print("loaded", VJEPA2SurpriseScorer({repo!r}).model.config.hidden_size)
        except ToolFault as fault:
            print("fault", fault.message)
        """)
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_ENDPOINT": CLOSED, "HF_HUB_OFFLINE": "0"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    if repo == "acme/tiny-vjepa":
        assert "loaded 48" in out.stdout
    else:
        assert "fault cannot load V-JEPA 2 from 'acme/not-cached' (the Hugging Face hub did not answer" in out.stdout
    assert "Retrying" not in out.stderr  # transformers' connection retries were not needed


def test_a_name_too_long_for_the_filesystem_is_no_path_and_no_hub_id():
    """Path.exists() raised OSError "File name too long" for such a name (RAA_VJEPA_MODEL can be 500 characters)."""
    from tools.hub import local_path_problem

    name = "x" * 300
    assert not is_hub_id(name)
    assert local_path_problem(name).startswith(f"no such folder {name!r}")
