"""Settings, stage keys, the SQLite stage cache and the backbone helpers (no server)."""

from __future__ import annotations

import json
import threading

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import BaseModel, Field

from graph.backbone import (
    BackboneFault,
    Usage,
    count_images,
    default_chat_model,
    is_transient,
)
from graph.cache import StageCache
from graph.cache_keys import render_messages, stage_key
from graph.replies import extract_json_object
from graph.settings import BackboneSettings, SettingsError


class Tiny(BaseModel):
    x: int = Field(ge=0, le=5, description="x")


def test_settings_from_env_reads_every_variable() -> None:
    env = {"RAA_BASE_URL": "http://h:1/v1", "RAA_MODEL": "m", "RAA_API_KEY": "k",
           "RAA_STRUCTURED_METHOD": "json_mode", "RAA_TIMEOUT_S": "7.5", "RAA_MAX_RETRIES": "1",
           "RAA_SCHEMA_RETRIES": "0", "RAA_IMAGE_LONG_SIDE": "256", "RAA_JPEG_QUALITY": "70",
           "RAA_CACHE_PATH": "off", "RAA_TRACES_PATH": "/tmp/t.sqlite", "RAA_MAX_TOKENS": "300",
           "RAA_TRACE_DURABILITY": "async", "RAA_INSPECT_MODE": "plan"}
    s = BackboneSettings.from_env(env)
    assert (s.base_url, s.model, s.api_key, s.method) == ("http://h:1/v1", "m", "k", "json_mode")
    assert (s.timeout_s, s.max_retries, s.schema_retries, s.image_long_side, s.jpeg_quality) == (7.5, 1, 0, 256, 70)
    assert s.cache_path is None and s.traces_path == "/tmp/t.sqlite" and s.max_tokens == 300
    assert s.trace_durability == "async" and BackboneSettings().trace_durability == "exit"
    assert s.inspect_mode == "plan" and BackboneSettings().inspect_mode == "tools"
    assert s.configured and s.missing() == []


def test_settings_missing_names_unset_variables() -> None:
    s = BackboneSettings.from_env({"RAA_MODEL": "m", "RAA_API_KEY": "  "})
    assert not s.configured
    assert s.missing() == ["RAA_BASE_URL", "RAA_API_KEY"]
    assert "RAA_BASE_URL" in s.describe_missing() and "vllm serve" in s.describe_missing()
    assert "RAA_INSPECT_MODE=plan" in s.describe_missing()  # Qwen2.5-VL's template has no tools
    assert s.cache_path == "runs/stage_cache.sqlite" and s.method == "json_schema"


@pytest.mark.parametrize("var,value", [("RAA_TIMEOUT_S", "abc"), ("RAA_STRUCTURED_METHOD", "xml"),
                                       ("RAA_JPEG_QUALITY", "0"), ("RAA_MAX_RETRIES", "-1"),
                                       ("RAA_TRACE_DURABILITY", "sometimes"), ("RAA_INSPECT_MODE", "tool")])
def test_settings_bad_values_name_the_problem(var: str, value: str) -> None:
    with pytest.raises(SettingsError) as info:
        BackboneSettings.from_env({var: value})
    assert var in str(info.value) or value in str(info.value) or "must" in str(info.value)


@pytest.mark.parametrize("value", ["off", " None ", "false", "0", "OFF"])
def test_traces_cannot_be_turned_off(value: str, tmp_path, monkeypatch) -> None:
    """RAA_TRACES_PATH=off, which turns RAA_CACHE_PATH off, created a trace database called `off`."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingsError, match="RAA_TRACES_PATH=.* cannot be turned off.*:memory:"):
        BackboneSettings.from_env({"RAA_TRACES_PATH": value})
    assert list(tmp_path.iterdir()) == []
    assert BackboneSettings.from_env({"RAA_TRACES_PATH": ":memory:"}).traces_path == ":memory:"
    assert BackboneSettings.from_env({"RAA_TRACES_PATH": " "}).traces_path == "runs/traces.sqlite"


def test_store_paths_expand_a_leading_tilde(monkeypatch) -> None:
    """The tool paths (RAA_VJEPA_MODEL, the CoTracker paths) expand ~; the store paths made a folder named ~."""
    monkeypatch.setenv("HOME", "/home/someone")
    got = BackboneSettings.from_env({"RAA_TRACES_PATH": "~/t.sqlite", "RAA_CACHE_PATH": "~/c.sqlite"})
    assert (got.traces_path, got.cache_path) == ("/home/someone/t.sqlite", "/home/someone/c.sqlite")


@pytest.mark.parametrize("var,value", [("RAA_TIMEOUT_S", "nan"), ("RAA_TIMEOUT_S", "inf"),
                                       ("RAA_TEMPERATURE", "nan"), ("RAA_TEMPERATURE", "inf"),
                                       ("RAA_ENDPOINT_WAIT_S", "nan"), ("RAA_ENDPOINT_WAIT_S", "inf")])
def test_settings_refuse_nan_and_infinity(var: str, value: str) -> None:
    """RAA_TIMEOUT_S=nan passed `timeout_s <= 0`: every run then timed out ("no reply within nans")."""
    with pytest.raises(SettingsError, match="finite"):
        BackboneSettings.from_env({var: value})


@pytest.mark.parametrize("var,value", [("RAA_TIMEOUT_S", "0"), ("RAA_MAX_RETRIES", "-1"), ("RAA_SCHEMA_RETRIES", "-1"),
                                       ("RAA_IMAGE_LONG_SIDE", "8"), ("RAA_JPEG_QUALITY", "101"),
                                       ("RAA_TEMPERATURE", "-1"), ("RAA_MAX_TOKENS", "0"),
                                       ("RAA_ENDPOINT_WAIT_S", "-1")])
def test_a_value_out_of_range_names_its_variable(var: str, value: str) -> None:
    """Range errors named the field ("timeout_s must be > 0"), which no user sets; parse errors named RAA_*."""
    with pytest.raises(SettingsError, match=f"^invalid RAA_\\* setting: {var} must be"):
        BackboneSettings.from_env({var: value})


def test_a_backbone_refuses_a_timeout_that_is_not_a_finite_number() -> None:
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel

    for timeout in (float("nan"), float("inf"), 0.0):
        with pytest.raises(ValueError, match="timeout_s a finite number > 0"):
            Backbone(ScriptedChatModel(), timeout_s=timeout)


def test_default_chat_model_needs_configuration_and_does_not_connect() -> None:
    with pytest.raises(SettingsError, match="RAA_BASE_URL"):
        default_chat_model(BackboneSettings())
    chat = default_chat_model(BackboneSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k",
                                               timeout_s=3.0))
    assert chat.max_retries == 0 and chat.request_timeout == 3.0 and chat.model_name == "m"
    assert chat.temperature == 0.0


def _msgs(url: str, text: str = "look") -> list:
    return [SystemMessage(content="# stage: s"),
            HumanMessage(content=[{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}])]


def test_stage_key_hashes_images_and_covers_every_input() -> None:
    base = dict(model_name="m", method="json_schema", stage="s", params={"k": 1}, schema=Tiny)
    k = stage_key(messages=_msgs("data:image/jpeg;base64,AAAA"), **base)
    assert k == stage_key(messages=_msgs("data:image/jpeg;base64,AAAA"), **base)
    assert k != stage_key(messages=_msgs("data:image/jpeg;base64,AAAB"), **base)
    assert k != stage_key(messages=_msgs("data:image/jpeg;base64,AAAA", "other"), **base)
    for change in ({"model_name": "n"}, {"method": "json_mode"}, {"stage": "t"}, {"params": {"k": 2}},
                   {"schema": None}):
        assert k != stage_key(messages=_msgs("data:image/jpeg;base64,AAAA"), **{**base, **change})
    rendered = str(render_messages(_msgs("data:image/jpeg;base64,AAAA")))
    assert "base64" not in rendered and "sha256" in rendered


def _round(frames: list[int], call_id: str = "c1", reply_id: str = "c1") -> list:
    return [SystemMessage(content="# stage: inspect"), HumanMessage(content="look again"),
            AIMessage(content="", tool_calls=[{"name": "view_frames", "args": {"frames": frames}, "id": call_id}]),
            ToolMessage(content="frames shown", tool_call_id=reply_id)]


def test_stage_key_of_a_tool_round_covers_the_tools_the_calls_and_the_image_detail() -> None:
    """A cached inspect round is keyed by the tools it was offered (no_motion vs full), the calls the model made
    (an empty AI text holds nothing else) and the replies they answer: otherwise another history's cached tool
    call (a track_motion offered to a run without it) would be replayed."""
    spec = [{"type": "function", "function": {"name": "view_frames"}}]
    k = stage_key(model_name="m", method="tools", stage="inspect", messages=_round([3]), tools=spec)
    again = {"model_name": "m", "method": "tools", "stage": "inspect"}
    assert k == stage_key(messages=_round([3]), tools=spec, **again)
    assert k != stage_key(messages=_round([3]), tools=[*spec, {"type": "function", "function": {"name": "t"}}],
                          **again)
    assert k != stage_key(messages=_round([4]), tools=spec, **again)
    assert k != stage_key(messages=_round([3], call_id="c2", reply_id="c1"), tools=spec, **again)
    assert k != stage_key(messages=_round([3], reply_id="c2"), tools=spec, **again)
    low, high = ([HumanMessage(content=[{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA",
                                                                           "detail": d}}])] for d in ("low", "high"))
    assert stage_key(messages=low, **again) != stage_key(messages=high, **again)


@pytest.mark.parametrize("on_disk", [True, False])
def test_stage_cache_roundtrip_and_threads(tmp_path, on_disk: bool) -> None:
    path = tmp_path / "sub" / "cache.sqlite"
    cache = StageCache(path if on_disk else None)
    assert cache.get("a") is None and (cache.hits, cache.misses) == (0, 1)
    cache.put("a", "1")
    cache.put("a", "2")  # replaces
    assert cache.get("a") == "2" and (cache.hits, cache.misses) == (1, 1) and len(cache) == 1

    def writer(i: int) -> None:
        for j in range(50):
            cache.put(f"{i}-{j}", str(j))
            assert cache.get(f"{i}-{j}") == str(j)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 201
    cache.close()
    if on_disk:
        assert StageCache(path).get("3-49") == "49"
    assert len(StageCache(None)) == 0  # in-memory caches are independent


def test_in_memory_stage_cache_keeps_the_most_recently_used() -> None:
    """A long-lived process with an injected model (training with reward: agent) must not keep every stage
    output of every clip it ever scored."""
    cache = StageCache(None, memory_entries=2)
    cache.put("a", "1")
    cache.put("b", "2")
    assert cache.get("a") == "1"  # a is now the most recently used
    cache.put("c", "3")
    assert len(cache) == 2 and cache.get("b") is None and cache.get("a") == "1" and cache.get("c") == "3"
    cache.put("a", "4")  # a replacement is a use too
    cache.put("d", "5")
    assert cache.get("c") is None and cache.get("a") == "4"
    with pytest.raises(ValueError, match="memory_entries must be >= 1"):
        StageCache(None, memory_entries=0)


def test_url_digest_memo_is_bounded_by_the_size_of_its_urls(monkeypatch) -> None:
    """The memo keeps its data URLs alive; large frames must not pin hundreds of MB."""
    import hashlib
    from collections import OrderedDict

    import graph.cache_keys as cache_mod

    monkeypatch.setattr(cache_mod, "_URL_SHA", OrderedDict())
    monkeypatch.setattr(cache_mod, "_url_chars", 0)
    monkeypatch.setattr(cache_mod, "_URL_SHA_MAX_CHARS", 250)
    urls = [f"data:image/jpeg;base64,{i}" + "A" * 76 for i in range(5)]  # 100 characters each
    for url in urls:
        assert cache_mod.url_digest(url) == hashlib.sha256(url.encode()).hexdigest()
    assert list(cache_mod._URL_SHA) == urls[3:] and cache_mod._url_chars == 200
    cache_mod.url_digest(urls[3])  # a hit moves it to the end and adds nothing
    assert list(cache_mod._URL_SHA) == [urls[4], urls[3]] and cache_mod._url_chars == 200
    big = "data:" + "B" * 1000  # alone over the bound: kept (the newest entry always stays)
    cache_mod.url_digest(big)
    assert list(cache_mod._URL_SHA) == [big] and cache_mod._url_chars == len(big)


def test_extract_json_object() -> None:
    assert extract_json_object('```json\n{"a": {"b": "}"}}\n```') == '{"a": {"b": "}"}}'
    assert extract_json_object('Sure! {"x": 1} trailing') == '{"x": 1}'
    assert extract_json_object('Per the schema {label, score}, here it is: {"label": "a"}') == '{"label": "a"}'
    with pytest.raises(ValueError, match="not valid JSON"):
        extract_json_object("{label: 'a'}")
    # an escaped quote does not end the string: the brace after it is text (it closed the object early)
    quoted = r'{"ok": false, "rationale": "the overlay reads \"DONE}\" but the cup stays"} more'
    assert json.loads(extract_json_object(quoted))["rationale"] == 'the overlay reads "DONE}" but the cup stays'
    assert extract_json_object(r'{"path": "C:\\", "n": 1}') == r'{"path": "C:\\", "n": 1}'  # an escaped backslash
    with pytest.raises(ValueError):
        extract_json_object("no json here")
    with pytest.raises(ValueError):
        extract_json_object('{"x": 1')


def test_extract_json_object_after_a_reasoning_block() -> None:
    """Reasoning left in the content (no reasoning parser) quotes braces; the answer follows it."""
    answer = '{"task_success": true, "notes": "ok"}'
    thinking = 'The schema wants {"task_success": bool}. I think {"task_success": false}? No. '
    assert extract_json_object(f"<think>{thinking}</think>\n\n{answer}") == answer
    assert extract_json_object(f"{thinking}</think>\n{answer}") == answer  # the template opened the block
    assert extract_json_object(f"◁think▷{thinking}◁/think▷```json\n{answer}\n```") == answer  # Kimi-VL
    with pytest.raises(ValueError, match="never closed.*max_tokens"):
        extract_json_object(f"<think>{thinking}")
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json_object(f"<think>{thinking}</think> I cannot answer.")


def test_is_transient_classification() -> None:
    req = httpx.Request("POST", "http://x/v1/chat/completions")

    def status(code: int) -> openai.APIStatusError:
        return openai.APIStatusError("e", response=httpx.Response(code, request=req), body=None)

    assert is_transient(status(500)) and is_transient(status(503)) and is_transient(status(429))
    assert not is_transient(status(400)) and not is_transient(status(401)) and not is_transient(status(404))
    assert not is_transient(status(501)) and not is_transient(status(505))  # not implemented: waiting won't help
    assert is_transient(openai.APITimeoutError(request=req)) and is_transient(openai.APIConnectionError(request=req))
    assert is_transient(httpx.ReadTimeout("t")) and is_transient(TimeoutError())
    assert not is_transient(ValueError("x"))


def test_usage_and_image_count() -> None:
    u = Usage(calls=1, images=2).add(Usage(calls=2, input_tokens=5, cache_hits=1))
    assert u.as_dict() == {"calls": 3, "images": 2, "input_tokens": 5, "output_tokens": 0, "cache_hits": 1, "attempts": 0}
    assert count_images(_msgs("data:x") + [AIMessage(content="hi")] + _msgs("data:y")) == 2


def test_fault_carries_stage_kind_message() -> None:
    f = BackboneFault("observe", "timeout", "no reply")
    assert (f.stage, f.kind, f.message) == ("observe", "timeout", "no reply")
    assert "observe" in str(f) and "timeout" in str(f)
