"""Training with `reward: agent` in process: the trainer's agent scores rollouts through the real ChatOpenAI
path against a local OpenAI-compatible stub (scripted per stage), and the run records which backbone
scored its rewards (training/provenance.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.graph_scripts import full_script
from tests.launches import launch
from tests.openai_stub import OpenAIStub, script_responder
from training.provenance import (
    REWARD_BACKBONE,
    backbone_changes,
    read_reward_backbone,
    record_reward_backbone,
)

ROOT = Path(__file__).resolve().parents[1]


def test_record_reward_backbone_notes_a_changed_backbone(tmp_path):
    from graph.settings import BackboneSettings

    settings = BackboneSettings(base_url="http://gpu-1:8000/v1", model="vlm-a", api_key="secret", temperature=0.0)
    assert "api_key" not in settings.scoring() and "secret" not in json.dumps(settings.scoring())
    assert read_reward_backbone(tmp_path) is None
    assert record_reward_backbone(tmp_path, settings.scoring(), resume=False) is None  # the first launch
    assert read_reward_backbone(tmp_path) == settings.scoring()
    assert record_reward_backbone(tmp_path, settings.scoring(), resume=True) is None  # a resume, same backbone
    moved = settings.with_overrides(model="vlm-b", temperature=0.7)
    note = record_reward_backbone(tmp_path, moved.scoring(), resume=True)
    assert note is not None and "model: 'vlm-a' -> 'vlm-b'; temperature: 0.0 -> 0.7" in note
    assert read_reward_backbone(tmp_path)["model"] == "vlm-b"  # the latest launch's
    assert record_reward_backbone(tmp_path, settings.scoring(), resume=False) is None  # a fresh run over it
    assert backbone_changes({"model": "a", "old": 1}, {"model": "a"}) == ["old: 1 -> None"]
    (tmp_path / REWARD_BACKBONE).write_text("[not a record")
    assert read_reward_backbone(tmp_path) is None


@pytest.mark.slow
def test_a_smoke_run_scored_by_the_agent_in_process(tmp_path):
    """Two launches (the second resumes under another RAA_MODEL): rewards with the agent's components,
    reward_backbone.json naming the model, and the resume's note saying it changed."""
    out = tmp_path / "run"
    base = [sys.executable, "-m", "training.train", "--config", str(ROOT / "training/configs/smoke.yaml"),
            "--output_dir", str(out), "--progress", "false", "--tensorboard", "false", "--export", "none",
            "--checkpoint_every", "1", "--reward", "agent", "--reward_options", "{preset: decomposed}"]
    with OpenAIStub(responder=script_responder(full_script()), keep_alive=True) as stub:
        # the agent's settings (tests/conftest.py has cleared every other RAA_* from the environment)
        env = {"RAA_BASE_URL": stub.base_url, "RAA_MODEL": "vlm-a", "RAA_API_KEY": "EMPTY", "RAA_ENDPOINT_WAIT_S": "0",
               "RAA_CACHE_PATH": "off", "RAA_TRACES_PATH": str(tmp_path / "traces.sqlite")}
        first = launch([*base, "--max_iterations", "1"], timeout=600, what="training", extra=env)
        assert first.returncode == 0, first.stderr[-4000:]
        second = launch([*base, "--max_iterations", "2", "--resume"], timeout=600, what="the resume",
                        extra={**env, "RAA_MODEL": "vlm-b"})
        assert second.returncode == 0, second.stderr[-4000:]
    rows = [json.loads(line) for line in (out / "rewards.jsonl").read_text().splitlines()]
    judged = [r for r in rows if r["components"]["T"] is not None]
    assert judged and all(r["run_id"] for r in judged)  # scored by agent runs, traced
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == [1, 2] and all(m["reward_usage_calls"] > 0 for m in metrics)
    assert "note: the reward agent's backbone differs" not in first.stdout
    assert "model: 'vlm-a' -> 'vlm-b'" in second.stdout
    assert read_reward_backbone(out)["model"] == "vlm-b" and read_reward_backbone(out)["base_url"] == env["RAA_BASE_URL"]
    from training.report import render_training_report

    assert "agent (preset decomposed) · model vlm-b" in render_training_report(out)
