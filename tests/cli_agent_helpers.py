"""Shared pieces of the agent CLI tests (test_cli_agent.py, test_cli_score_batch.py): the RAA_* environment
of a run, a small clip and the scripted chat model behind `graph.commands.make_chat_model`."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

runner = CliRunner()


def _env(monkeypatch, tmp_path, base_url: str = "http://127.0.0.1:9/v1") -> None:
    monkeypatch.setenv("RAA_BASE_URL", base_url)
    monkeypatch.setenv("RAA_MODEL", "stub-model")
    monkeypatch.setenv("RAA_API_KEY", "EMPTY")
    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite"))
    monkeypatch.setenv("RAA_CACHE_PATH", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("RAA_MAX_RETRIES", "1")
    monkeypatch.setenv("RAA_TIMEOUT_S", "5")
    monkeypatch.setenv("RAA_ENDPOINT_WAIT_S", "0")  # scripted models never reach base_url (graph/endpoint.py)


def _clip(path, *, uniform: bool = False, frames: int = 12) -> str:
    from tools.video import write_video

    rng = np.random.default_rng(0)
    if uniform:
        video = np.full((frames, 64, 64, 3), 127, np.uint8)
    else:
        video = rng.integers(0, 255, (frames, 64, 64, 3), dtype=np.uint8)
        for t in range(frames):
            video[t, 20:40, 5 + 2 * t:25 + 2 * t] = 255
    write_video(path, video, fps=8.0)
    return str(path)


def _scripted(monkeypatch, tmp_path):
    from graph import commands
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import full_script

    model = ScriptedChatModel(full_script())
    monkeypatch.setattr(commands, "make_chat_model", lambda settings: model)
    _env(monkeypatch, tmp_path)
    return model
