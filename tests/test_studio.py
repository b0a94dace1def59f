"""langgraph.json names a graph factory that `langgraph dev` can load; it builds without connecting."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from graph_scripts import full_script, moving_square

from graph.settings import BackboneSettings, SettingsError
from graph.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]


def _load_factory(name: str = "reward_agent"):
    """Import the factory the way the LangGraph server does: file path + attribute from langgraph.json."""
    config = json.loads((ROOT / "langgraph.json").read_text())
    spec_path, attr = config["graphs"][name].rsplit(":", 1)
    file = (ROOT / spec_path).resolve()
    assert file.is_file(), file
    spec = importlib.util.spec_from_file_location("studio_graph_under_test", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, getattr(module, attr)


def test_langgraph_json_points_at_a_factory():
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert config["dependencies"] == ["."] and set(config["graphs"]) == {"reward_agent"}
    _, factory = _load_factory()
    assert callable(factory)


def test_factory_builds_from_env_without_connecting(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the default stage cache / trace paths are relative (runs/...)
    monkeypatch.setenv("RAA_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there: no request is made
    monkeypatch.setenv("RAA_MODEL", "qwen-vl")
    monkeypatch.setenv("RAA_API_KEY", "EMPTY")
    _, factory = _load_factory()
    graph = factory({"configurable": {"preset": "no_audit"}})
    nodes = set(graph.get_graph().nodes)
    assert {"quality", "observe", "contract", "assess", "inspect", "final_check", "gate"} <= nodes
    assert "audit" not in nodes and graph.checkpointer is None  # the server supplies persistence
    assert "audit" in set(factory({}).get_graph().nodes)  # default preset: full


def test_factory_errors_are_clear(monkeypatch):
    _, factory = _load_factory()
    with pytest.raises(SettingsError, match="RAA_BASE_URL"):
        factory({})
    module, _ = _load_factory()
    with pytest.raises(ValueError, match="unknown preset"):
        module.build_studio_graph("everything", model=ScriptedChatModel({}), settings=BackboneSettings())


def test_injected_model_graph_runs(tmp_path):
    module, _ = _load_factory()
    model = ScriptedChatModel(full_script())
    graph = module.build_studio_graph("direct", model=model, settings=BackboneSettings(cache_path=None))
    out = graph.invoke({"video": str(moving_square(tmp_path / "c.mp4")), "instruction": "push the red block"})
    assert out["result"].reward == pytest.approx(0.8) and [c.stage for c in model.calls] == ["direct"]


def test_inspect_mode_comes_from_the_settings(tmp_path):
    module, _ = _load_factory()
    model = ScriptedChatModel(full_script())
    settings = BackboneSettings(cache_path=None, inspect_mode="plan")
    graph = module.build_studio_graph("visual_verify", model=model, settings=settings)
    out = graph.invoke({"video": str(moving_square(tmp_path / "c.mp4")), "instruction": "push the red block"})
    assert out["result"].status == "scored"
    assert len(model.calls_for("plan")) == 1 and model.calls_for("inspect") == []
