"""langgraph.json names a graph factory that `langgraph dev` can load; it builds without connecting."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
from graph_scripts import full_script, moving_square

from graph.settings import BackboneSettings
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
    graph = asyncio.run(factory({"configurable": {"preset": "no_audit"}}))  # the server awaits the factory
    nodes = set(graph.get_graph().nodes)
    assert {"quality", "observe", "contract", "assess", "inspect", "final_check", "gate"} <= nodes
    assert "audit" not in nodes and graph.checkpointer is None  # the server supplies persistence
    full = asyncio.run(factory({}))
    assert "audit" in set(full.get_graph().nodes)  # default preset: full
    # the server calls the factory for every run and state read: one graph per preset per process
    assert asyncio.run(factory({"configurable": {"preset": "no_audit"}})) is graph
    assert asyncio.run(factory({"configurable": {}})) is full


def test_factory_errors_are_clear(monkeypatch):
    """Unset endpoint settings are no error here (tests/test_studio_no_endpoint.py); an unknown preset is."""
    module, factory = _load_factory()
    for _ in range(2):  # a failed build is not kept
        with pytest.raises(ValueError, match="unknown preset"):
            asyncio.run(factory({"configurable": {"preset": "everything"}}))
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


def test_runs_with_the_servers_dict_context(tmp_path):
    """The LangGraph server hands every run its `configurable` as a plain-dict context; a graph that
    declared RunContext as its context schema failed every run with
    "RunContext.__init__() got an unexpected keyword argument 'preset'"."""
    module, _ = _load_factory()
    model = ScriptedChatModel(full_script())
    graph = module.build_studio_graph("direct", model=model, settings=BackboneSettings(cache_path=None))
    server_context = {"preset": "direct", "graph_id": "reward_agent", "thread_id": "t-1", "assistant_id": "a-1"}
    out = graph.invoke({"video": str(moving_square(tmp_path / "c.mp4")), "instruction": "push the red block"},
                       context=server_context)
    assert out["result"].status == "scored" and out["result"].reward == pytest.approx(0.8)


def test_input_and_output_json_schemas_for_studio_forms():
    """Studio builds its input form from the graph's input JSON schema; with `typing.TypedDict` state on
    Python 3.11 pydantic refused to build either schema, so the server reported none."""
    module, _ = _load_factory()
    graph = module.build_studio_graph("full", model=ScriptedChatModel({}), settings=BackboneSettings(cache_path=None))
    schema = graph.get_input_jsonschema()
    assert set(schema["properties"]) == {"video", "instruction", "run_id"}
    assert sorted(schema["required"]) == ["instruction", "video"]
    output = graph.get_output_jsonschema()
    assert {"result", "steps", "contract", "assessment", "faults"} <= set(output["properties"])
