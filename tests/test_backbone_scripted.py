"""Backbone policy with an injected (scripted) chat model: error classification, the per-attempt time
guard, re-asks and usage accounting, independent of any HTTP server."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from graph.backbone import Backbone, BackboneFault, Usage
from graph.cache import StageCache
from graph.testing import ScriptedChatModel

REQ = httpx.Request("POST", "http://stub/v1/chat/completions")
MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]


class Verdict(BaseModel):
    label: str = Field(max_length=20, description="label")
    score: int = Field(ge=0, le=10, description="score")


def _status(code: int) -> openai.APIStatusError:
    return openai.APIStatusError(f"status {code}", response=httpx.Response(code, request=REQ), body=None)


def _bb(replies, method="json_schema", **kw) -> tuple[Backbone, ScriptedChatModel]:
    model = ScriptedChatModel({"judge": replies}, delay_s=kw.pop("delay_s", 0.0))
    opts = {"max_retries": 2, "schema_retries": 1, "timeout_s": 5.0, "retry_wait": (0.0, 0.0), **kw}
    return Backbone(model, method=method, **opts), model


def _run(bb: Backbone, usage: Usage | None = None) -> BaseModel:
    return asyncio.run(bb.astructured("judge", Verdict, list(MSGS), usage or Usage()))


@pytest.mark.parametrize("exc", [openai.RateLimitError("slow down", response=httpx.Response(429, request=REQ),
                                                       body=None),
                                 openai.APIConnectionError(request=REQ), _status(502), httpx.ReadTimeout("t"),
                                 ConnectionRefusedError(111, "Connection refused"), ConnectionResetError(104, "reset")])
def test_transient_errors_are_retried(exc) -> None:
    bb, model = _bb([exc, {"label": "a", "score": 2}])
    usage = Usage()
    assert _run(bb, usage).score == 2
    assert len(model.calls) == 2 and usage.calls == 1


def test_client_error_is_refused_at_once() -> None:
    bb, model = _bb([_status(422), {"label": "a", "score": 2}])
    with pytest.raises(BackboneFault) as info:
        _run(bb)
    assert info.value.kind == "refused" and len(model.calls) == 1


def test_unexpected_exception_is_a_fault_not_a_crash() -> None:
    bb, _ = _bb([RuntimeError("boom")])
    with pytest.raises(BackboneFault) as info:
        _run(bb)
    assert info.value.kind == "transport" and "RuntimeError" in info.value.message


def test_time_guard_bounds_a_model_without_its_own_timeout() -> None:
    bb, model = _bb([{"label": "a", "score": 2}], delay_s=2.0, timeout_s=0.1, max_retries=1)
    with pytest.raises(BackboneFault) as info:
        _run(bb)
    assert info.value.kind == "timeout" and len(model.calls) == 0  # cancelled before replying


@pytest.mark.parametrize("method", ["json_schema", "json_mode"])
def test_reask_carries_the_validation_error(method: str) -> None:
    bb, model = _bb([{"label": "a", "score": 11}, "```json\n{\"label\": \"a\", \"score\": 9}\n```"], method=method)
    usage = Usage()
    assert _run(bb, usage).score == 9
    reask = model.calls[1].messages[-1].content
    assert "less than or equal to 10" in reask and usage.calls == 2
    assert usage.input_tokens > 0 and usage.output_tokens > 0


def test_cache_hit_counts_no_call() -> None:
    bb, model = _bb([{"label": "a", "score": 1}], cache=StageCache(None))
    usage = Usage()
    _run(bb, usage)
    _run(bb, usage)
    assert len(model.calls) == 1 and usage.calls == 1 and usage.cache_hits == 1


def test_params_are_part_of_the_cache_key() -> None:
    bb, model = _bb([{"label": "a", "score": 1}], cache=StageCache(None))
    for params in ({"round": 0}, {"round": 1}, {"round": 0}):
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage(), params=params))
    assert len(model.calls) == 2


def test_sync_wrapper() -> None:
    bb, _ = _bb([{"label": "s", "score": 3}])
    assert bb.structured("judge", Verdict, list(MSGS), Usage()).label == "s"


def test_sync_wrapper_inside_a_running_event_loop() -> None:
    """The sync wrappers also work where a loop is already running (a notebook cell)."""
    bb, _ = _bb([{"label": "s", "score": 3}])

    async def cell() -> str:
        return bb.structured("judge", Verdict, list(MSGS), Usage()).label

    assert asyncio.run(cell()) == "s"


class _CountingModel(ScriptedChatModel):
    """Records every structured runnable it builds (ChatOpenAI converts the schema each time)."""

    built: list = Field(default_factory=list)

    def with_structured_output(self, schema, **kwargs):
        self.built.append(("structured", schema, kwargs.get("method")))
        return super().with_structured_output(schema, **kwargs)

    def bind(self, **kwargs):
        self.built.append(("bind", None, None))
        return super().bind(**kwargs)


class Other(BaseModel):
    note: str = Field(max_length=20, description="note")


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_structured_runnable_is_built_once_per_schema(method: str) -> None:
    """Repeated calls with one schema reuse one runnable (and still get each call's own reply); a second
    schema gets its own, and a re-ask reuses the first."""
    model = _CountingModel({"judge": [{"label": "a", "score": 1}, {"label": "b", "score": 2},
                                      {"label": "c", "score": 99}, {"label": "d", "score": 4}],
                            "note": [{"note": "n"}]})
    bb = Backbone(model, method=method, schema_retries=1, retry_wait=(0.0, 0.0))
    assert [_run(bb).label for _ in range(2)] == ["a", "b"]
    assert _run(bb).label == "d"  # "c" fails validation (score 99): re-asked through the same runnable
    note_msgs = [SystemMessage(content="# stage: note\nNote."), HumanMessage(content="?")]
    assert asyncio.run(bb.astructured("note", Other, note_msgs, Usage())).note == "n"
    built = model.built
    if method == "json_mode":
        assert built == [("bind", None, None), ("bind", None, None)]
    else:
        assert built == [("structured", Verdict, method), ("structured", Other, method)]
    assert len(model.calls) == 5


def test_replacing_the_model_builds_a_new_runnable() -> None:
    """A backbone whose model is replaced calls the new model, not a runnable cached for the old one."""
    old = _CountingModel({"judge": [{"label": "old", "score": 1}]})
    new = _CountingModel({"judge": [{"label": "new", "score": 2}]})
    bb = Backbone(old, retry_wait=(0.0, 0.0))
    assert _run(bb).label == "old"
    bb.model = new
    assert _run(bb).label == "new"
    assert len(old.built) == len(new.built) == 1 and len(old.calls) == len(new.calls) == 1


def test_draws_take_their_own_cache_entries_and_draw_0_keeps_the_unsalted_ones() -> None:
    """AgentConfig.draw: a temperature > 0 study scores one clip with draws 0..N-1; each draw samples its own
    answers, a repeated draw is served from the cache, and draw 0 hits entries written without a draw."""
    from graph.cache_keys import stage_key

    cache = StageCache(None)
    bb, model = _bb([{"label": "a", "score": 1}, {"label": "b", "score": 2}, {"label": "c", "score": 3}],
                    cache=cache)
    assert [_run(b).score for b in (bb, bb.for_draw(1), bb.for_draw(2), bb.for_draw(1), bb.for_draw(0))] == \
        [1, 2, 3, 2, 1]
    assert len(model.calls) == 3 and bb.draw == 0  # for_draw copies; the original keeps draw 0
    unsalted = stage_key(model_name=bb.model_name, method=bb.method, stage="judge", messages=list(MSGS),
                         schema=Verdict)
    assert asyncio.run(cache.aget(unsalted)) is not None  # what runs before draws existed wrote and read


def test_a_temperature_above_0_takes_its_own_cache_entries() -> None:
    """Answers sampled at one temperature are never served at another; temperature 0 keeps the unsalted keys,
    and a draw at a temperature is salted with both."""
    from graph.cache_keys import stage_key
    from graph.settings import BackboneSettings, SettingsError

    cache = StageCache(None)
    bb, model = _bb([{"label": "a", "score": 1}, {"label": "b", "score": 2}, {"label": "c", "score": 3}],
                    cache=cache)
    warm = Backbone(model, cache=cache, retry_wait=(0.0, 0.0), temperature=0.7)
    assert [_run(b).score for b in (bb, warm, warm, bb, warm.for_draw(1), warm.for_draw(1))] == [1, 2, 2, 1, 3, 3]
    assert len(model.calls) == 3 and warm.for_draw(1).temperature == 0.7
    unsalted = stage_key(model_name=bb.model_name, method=bb.method, stage="judge", messages=list(MSGS),
                         schema=Verdict)
    assert asyncio.run(cache.aget(unsalted)) is not None  # temperature 0: the keys from before temperatures
    settings = BackboneSettings(base_url="http://x/v1", model="m", api_key="k", temperature=0.7)
    assert Backbone.from_settings(settings, model=model).temperature == 0.7  # RAA_TEMPERATURE reaches the key
    with pytest.raises(SettingsError, match="temperature must be >= 0"):
        BackboneSettings(temperature=-0.1)


def test_an_agent_built_for_a_draw_salts_its_backbone(tmp_path) -> None:
    """build_reward_agent(AgentConfig(draw=k), backbone=...) scores with k's cache entries: a second draw of
    the same clip calls the model again, the same draw again does not."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import FakeSurprise, full_script, moving_square
    from tools.motion import LKTracker

    clip = moving_square(tmp_path / "clip.mp4")
    model = ScriptedChatModel(full_script())
    base = Backbone(model, cache=StageCache(None), retry_wait=(0.0, 0.0))
    calls = []
    for k, draw in enumerate((0, 1, 1)):
        agent = build_reward_agent(AgentConfig(preset="decomposed", draw=draw), backbone=base,
                                   tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                                   checkpointer=InMemorySaver())
        out = agent.invoke({"video": str(clip), "instruction": "push the block", "run_id": f"r{k}"},
                           {"configurable": {"thread_id": f"r{k}"}})
        assert out["result"].status == "scored"
        calls.append(len(model.calls))
    assert calls[0] > 0 and calls[1] == 2 * calls[0] and calls[2] == calls[1]
    with pytest.raises(ValueError, match="draw must be >= 0"):
        AgentConfig(draw=-1)


def test_a_stored_output_that_no_longer_validates_is_recomputed(tmp_path) -> None:
    """A cache file outlives code: an entry written before a validator was tightened (or otherwise damaged)
    raised a bare ValidationError on every hit, so that stage input failed for good until the cache was
    pruned. It is a miss instead: the model is asked and the entry replaced."""
    from langchain_core.messages import AIMessage

    from graph.cache_keys import stage_key

    cache = StageCache(tmp_path / "cache.sqlite")
    model = ScriptedChatModel({"judge": [{"label": "a", "score": 2}, AIMessage(content="R1 is met.")]})
    bb = Backbone(model, cache=cache, retry_wait=(0.0, 0.0))
    key = stage_key(model_name=bb.model_name, method=bb.method, stage="judge", messages=MSGS, schema=Verdict)
    tool_key = stage_key(model_name=bb.model_name, method="tools", stage="judge", messages=MSGS, tools=[])
    cache.put(key, '{"label": "a", "score": 99}')
    cache.put(tool_key, '{"text": "an entry of another shape"}')
    usage = Usage()
    assert _run(bb, usage).score == 2
    assert asyncio.run(bb.atool_round("judge", list(MSGS), [], usage)).text == "R1 is met."
    assert len(model.calls) == 2 and usage.calls == 2 and usage.cache_hits == 0
    assert cache.get(key) == '{"label":"a","score":2}' and "R1 is met." in (cache.get(tool_key) or "")
    assert _run(bb, usage).score == 2 and usage.cache_hits == 1


@pytest.mark.parametrize("stored", ['<tool_call>{"name": "view_frames", "arguments": {"frames": [3]}}</tool_call>',
                                    '[TOOL_CALLS][{"name": "view_frames", "arguments": {"frames": [3]}}]',
                                    "<think>R1 looks met, but let me check frame 3.</think>", "<think>cut here", ""])
def test_a_stored_tool_round_reply_that_todays_checks_reject_is_asked_again(stored: str) -> None:
    """A cache file outlives code: a tool-round reply stored before a check existed (a tool call the server
    left in the text, taken for the closing answer before that was a fault; a reply holding only reasoning)
    was served on every hit, so the inspection the model asked for silently never happened, where the same
    reply from the model is re-asked or a fault and never stored. Such an entry is a miss: the model is asked
    and the entry replaced. A stored closing answer is still served."""
    from langchain_core.messages import AIMessage

    from graph.cache import decode_tool_reply, encode_tool_reply
    from graph.cache_keys import stage_key

    call = AIMessage(content="", tool_calls=[{"name": "view_frames", "args": {"frames": [3]}, "id": "c1"}])
    cache = StageCache(None)
    model = ScriptedChatModel({"judge": [call]})
    bb = Backbone(model, cache=cache, retry_wait=(0.0, 0.0))
    key = stage_key(model_name=bb.model_name, method="tools", stage="judge", messages=MSGS, tools=[])
    cache.put(key, encode_tool_reply(AIMessage(content=stored)))
    usage = Usage()
    reply = asyncio.run(bb.atool_round("judge", list(MSGS), [], usage))
    assert reply.tool_calls == call.tool_calls and len(model.calls) == 1 and usage.cache_hits == 0
    assert decode_tool_reply(cache.get(key) or "").tool_calls == call.tool_calls  # the entry was replaced
    cache.put(key, encode_tool_reply(AIMessage(content="<think>checked frame 3</think>R1 is met (frame 3).")))
    assert asyncio.run(bb.atool_round("judge", list(MSGS), [], usage)).text.endswith("R1 is met (frame 3).")
    assert len(model.calls) == 1 and usage.cache_hits == 1
