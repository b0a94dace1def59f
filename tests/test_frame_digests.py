"""The frame cache memoises the stage-key digest of the images it encodes only for agents whose backbone has a
stage cache (graph.frame_store `keys_images`); the runs, the images sent and the cache's keys are the same either
way."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import pytest
from graph_scripts import FakeSurprise, full_script, moving_square, run, tool_call
from langchain_core.messages import HumanMessage

import graph.cache_keys as cache_keys
from graph.frame_store import FrameStore

SAMPLE = list(range(0, 33, 8))


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return str(moving_square(tmp_path_factory.mktemp("clips") / "square.mp4"))


@pytest.fixture
def memo(monkeypatch) -> OrderedDict:
    """A fresh, empty digest memo (graph.cache_keys._URL_SHA) for the test."""
    fresh: OrderedDict[str, str] = OrderedDict()
    monkeypatch.setattr(cache_keys, "_URL_SHA", fresh)
    monkeypatch.setattr(cache_keys, "_url_chars", 0)
    return fresh


def _scored(clip: str, cache: object) -> tuple[dict, list[str], list[str], FrameStore]:
    """A full run with a view, a crop and a track: (its output, the image URLs sent, the stage keys the cache was
    asked for (none without a cache), its frame store)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    store = FrameStore(long_side=64)
    model = ScriptedChatModel(full_script(inspect=[
        tool_call("view_crop", {"frame": 20, "box": [0.2, 0.2, 0.8, 0.8]}),
        tool_call("track_motion", {"start_frame": 0, "end_frame": 32, "points": []}, "c2"), "seen"]))
    keys: list[str] = []
    if cache is not None:
        get = cache.get
        cache.get = lambda key: keys.append(key) or get(key)  # type: ignore[attr-defined]
    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(model, cache=cache, retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                               checkpointer=InMemorySaver(), frame_store=store)
    out = run(agent, clip)
    urls = [b["image_url"]["url"] for call in model.calls for m in call.messages if isinstance(m, HumanMessage)
            and isinstance(m.content, list) for b in m.content if b.get("type") == "image_url"]
    return out, urls, keys, store


def test_a_run_without_a_stage_cache_hashes_no_image(clip, memo):
    out, urls, _, store = _scored(clip, None)
    assert out["result"].status == "scored" and len(set(urls)) > len(SAMPLE) and store.encoded > len(SAMPLE)
    assert dict(memo) == {}  # main hashed every image it encoded (for keys no cache built)


def test_a_run_with_a_stage_cache_has_every_image_digest_ready_before_its_keys_are_built(clip, memo):
    from graph.cache import StageCache

    computed: list[str] = []
    sha = cache_keys._sha

    def counted(text: str) -> str:
        computed.append(text)
        return sha(text)

    out, urls, keys, _ = _scored(clip, StageCache(None))
    assert out["result"].status == "scored" and keys
    assert {u: hashlib.sha256(u.encode()).hexdigest() for u in set(urls)}.items() <= dict(memo).items()
    cache_keys._sha = counted
    try:
        assert all(cache_keys.url_digest(u) == memo[u] for u in urls)
    finally:
        cache_keys._sha = sha
    assert computed == []  # every digest was memoised (in the worker thread that encoded the image)


def test_runs_with_and_without_a_stage_cache_send_the_same_images_and_score_the_same(clip, memo):
    from graph.cache import StageCache

    plain, plain_urls, _, _ = _scored(clip, None)
    cached, cached_urls, _, _ = _scored(clip, StageCache(None))
    assert plain_urls == cached_urls
    assert plain["result"].model_dump() == cached["result"].model_dump()
    assert ([(s["node"], s.get("frames"), s.get("crops")) for s in plain["steps"]]
            == [(s["node"], s.get("frames"), s.get("crops")) for s in cached["steps"]])


def test_a_store_memoises_digests_from_the_first_keys_images_call_on(clip, memo):
    store = FrameStore(long_side=64)
    first = [b["image_url"]["url"] for b in store.image_blocks(clip, SAMPLE) if b["type"] == "image_url"]
    assert dict(memo) == {}
    store.keys_images()
    store.keys_images()  # idempotent
    later = [b["image_url"]["url"] for b in store.image_blocks(clip, [1, 2], box=[0.1, 0.1, 0.9, 0.9])
             if b["type"] == "image_url"]
    overlays = [b["image_url"]["url"] for b in store.array_blocks(store.frames(clip, [3]), ["overlay"])
                if b["type"] == "image_url"]
    assert list(memo) == later + overlays
    assert all(memo[u] == hashlib.sha256(u.encode()).hexdigest() for u in memo)
    assert first == [b["image_url"]["url"] for b in store.image_blocks(clip, SAMPLE) if b["type"] == "image_url"]
