"""The Studio graph factory without backbone endpoint settings: Studio can draw the graph and read saved runs'
state history (time travel) without a model; a run then is ineligible, naming the unset variables, and runs
no stage. With the settings, runs score through the endpoint as before."""

from __future__ import annotations

import asyncio

import pytest
from graph_scripts import full_script, moving_square
from langgraph.checkpoint.memory import InMemorySaver
from openai_stub import OpenAIStub, script_responder
from test_studio import _load_factory

from graph.settings import REQUIRED_ENV, BackboneSettings, SettingsError
from graph.testing import ScriptedChatModel
from graph.tracing import traces_serde

INSTRUCTION = "push the red block"


def _clip(tmp_path) -> str:
    return str(moving_square(tmp_path / "c.mp4"))


def test_factory_builds_and_draws_without_endpoint_settings(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    _, factory = _load_factory()
    graph = asyncio.run(factory({}))  # it raised SettingsError: Studio showed no graph at all
    assert {"quality", "observe", "contract", "assess", "inspect", "audit", "final_check", "gate"} <= set(
        graph.get_graph().nodes)
    mermaid = graph.get_graph().draw_mermaid()
    assert "quality" in mermaid and "final_check" in mermaid and "gate" in mermaid
    assert graph.checkpointer is None  # the server supplies persistence
    assert asyncio.run(factory({"configurable": {"preset": "full"}})) is graph  # one graph per preset
    assert list(tmp_path.iterdir()) == []  # building opened no stage cache or trace file


def test_saved_runs_history_reads_without_endpoint_settings(tmp_path):
    """Time travel in Studio: the server attaches its checkpointer to the factory's graph and reads a saved
    run's checkpoints through it; that needs no model."""
    saver = InMemorySaver(serde=traces_serde())
    module, factory = _load_factory()
    scored = module.build_studio_graph("direct", model=ScriptedChatModel(full_script()),
                                       settings=BackboneSettings(cache_path=None))
    config = {"configurable": {"thread_id": "saved-run"}}
    scored.copy(update={"checkpointer": saver}).invoke({"video": _clip(tmp_path), "instruction": INSTRUCTION}, config)

    graph = asyncio.run(factory({"configurable": {"preset": "direct"}})).copy(update={"checkpointer": saver})
    state = graph.get_state(config)
    assert state.values["result"].reward == pytest.approx(0.8)
    history = list(graph.get_state_history(config))
    assert history[0].values["result"] == state.values["result"]
    assert [h.next for h in history[-2:]] == [("quality",), ("__start__",)]  # every step, back to the input
    assert [s["node"] for s in state.values["steps"]] == ["quality", "direct", "gate"]


@pytest.mark.parametrize(("env", "unset"), [({}, list(REQUIRED_ENV)),
                                            ({"RAA_MODEL": "qwen-vl"}, ["RAA_BASE_URL", "RAA_API_KEY"])])
def test_run_without_endpoint_settings_is_ineligible_naming_them(monkeypatch, tmp_path, env, unset):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _, factory = _load_factory()
    graph = asyncio.run(factory({"configurable": {"preset": "full"}}))
    out = asyncio.run(graph.ainvoke({"video": _clip(tmp_path), "instruction": INSTRUCTION}))
    result = out["result"]
    assert result.status == "ineligible" and result.reward is None and result.T is None
    assert len(result.reasons) == 1
    reason = result.reasons[0]
    assert reason.startswith("backbone: settings: ") and f"unset: {', '.join(unset)})" in reason
    assert "langgraph dev" in reason  # how to get a model: set them and restart the server
    # refused at the entry: no stage ran (no frames decoded, no tool loaded, no model asked)
    assert [s["node"] for s in out["steps"]] == ["quality", "gate"]
    assert out["steps"][0]["decision"].startswith("fault (settings)")
    assert out.get("quality") is None and out["usage"].get("calls", 0) == 0


def test_invalid_setting_still_raises(monkeypatch):
    """A variable that is set but unusable is the user's mistake to fix, as at every other edge."""
    monkeypatch.setenv("RAA_TIMEOUT_S", "soon")
    _, factory = _load_factory()
    for _ in range(2):  # a failed build is not kept
        with pytest.raises(SettingsError, match="RAA_TIMEOUT_S"):
            asyncio.run(factory({}))


def test_with_endpoint_settings_runs_score_through_the_server(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with OpenAIStub(responder=script_responder(full_script())) as stub:
        monkeypatch.setenv("RAA_BASE_URL", stub.base_url)
        monkeypatch.setenv("RAA_MODEL", "stub-model")
        monkeypatch.setenv("RAA_API_KEY", "EMPTY")
        monkeypatch.setenv("RAA_CACHE_PATH", "off")
        _, factory = _load_factory()
        graph = asyncio.run(factory({"configurable": {"preset": "direct"}}))
        out = asyncio.run(graph.ainvoke({"video": _clip(tmp_path), "instruction": INSTRUCTION}))
    assert out["result"].status == "scored" and out["result"].reward == pytest.approx(0.8)
    assert len(stub.requests) == 1 and stub.requests[0]["model"] == "stub-model"


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_a_call_of_the_stand_in_model_is_a_fault_at_once(method):
    """Backstop: a call that reached the stand-in model anyway is a transport fault naming the unset
    variables, not re-asked as an invalid reply (a SettingsError is a ValueError: re-asked 3 times)."""
    from langchain_core.messages import HumanMessage

    from graph.backbone import Backbone, BackboneFault
    from graph.cache import StageCache
    from graph.no_endpoint import NoEndpointModel
    from graph.schemas import DirectScore
    from graph.usage import Usage

    backbone = Backbone(NoEndpointModel(reason="unset: RAA_MODEL"), cache=StageCache(None), method=method)
    usage = Usage()
    with pytest.raises(BackboneFault, match="NoEndpointError: unset: RAA_MODEL") as caught:
        asyncio.run(backbone.astructured("direct", DirectScore, [HumanMessage("score it")], usage))
    assert caught.value.kind == "transport" and usage.calls == 0
