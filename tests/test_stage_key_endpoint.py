"""The endpoint is part of the stage key (graph/cache.py): two servers serving a model under one name
(a fine-tune served as the base model's name, a path reused for new weights) no longer share stage outputs;
one URL written two ways still does, and a backbone without an endpoint (an injected model) keeps its keys."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel

from graph.backbone import Backbone, Usage
from graph.cache import StageCache
from graph.cache_keys import endpoint_identity, stage_key
from graph.settings import BackboneSettings
from graph.testing import ScriptedChatModel

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]


class Verdict(BaseModel):
    label: str
    score: int


def _from(url: str, score: int, cache: StageCache) -> tuple[Backbone, ScriptedChatModel]:
    model = ScriptedChatModel({"judge": [{"label": "x", "score": score}, f"R1 is met ({score})."]})
    settings = BackboneSettings(base_url=url, model="Qwen/Qwen2.5-VL-7B-Instruct", api_key="EMPTY")
    return Backbone.from_settings(settings, model=model, cache=cache), model


def _score(bb: Backbone) -> int:
    return asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage())).score


def _answer(bb: Backbone) -> str:
    return asyncio.run(bb.atool_round("judge", list(MSGS), [], Usage())).text


def test_two_servers_under_one_model_name_do_not_share_outputs(tmp_path) -> None:
    cache = StageCache(tmp_path / "cache.sqlite")
    base, base_model = _from("http://gpu-a:8000/v1", 1, cache)
    tuned, tuned_model = _from("http://gpu-b:8000/v1", 5, cache)
    assert (_score(base), _score(tuned)) == (1, 5)  # the second server was served the first one's answer
    assert (_answer(base), _answer(tuned)) == ("R1 is met (1).", "R1 is met (5).")  # tool rounds too
    assert len(base_model.calls) == len(tuned_model.calls) == 2
    assert (_score(tuned), _answer(base)) == (5, "R1 is met (1).") and len(tuned_model.calls) == 2  # each its own


@pytest.mark.parametrize("same", ["http://GPU-A:8000/v1/", "HTTP://gpu-a:8000/v1", "http://user:pw@gpu-a:8000/v1",
                                  " http://gpu-a:8000/v1 "])
def test_one_endpoint_written_two_ways_shares(tmp_path, same: str) -> None:
    cache = StageCache(None)
    first, _ = _from("http://gpu-a:8000/v1", 1, cache)
    again, model = _from(same, 5, cache)
    assert (_score(first), _score(again)) == (1, 1) and model.calls == []


def test_default_ports_and_the_path_are_normalised() -> None:
    assert endpoint_identity("https://api.example.com:443/v1/") == endpoint_identity("https://API.example.com/v1")
    assert endpoint_identity("http://h:80/v1") == "http://h/v1"
    assert endpoint_identity("http://h:8000/v1") != endpoint_identity("http://h:8001/v1")
    assert endpoint_identity("http://h/v1") != endpoint_identity("http://h/v2")
    assert endpoint_identity("http://h/v1?api-version=2") != endpoint_identity("http://h/v1")
    assert endpoint_identity(" gpu-a:8000/v1 ") == "gpu-a:8000/v1"  # no server answers there: keyed as written
    assert endpoint_identity("http://h:port/v1") == "http://h:port/v1"
    assert endpoint_identity("http://[::1]:8000/v1/") == "http://[::1]:8000/v1"


def test_a_backbone_without_an_endpoint_keeps_the_keys_it_had() -> None:
    """An injected chat model (no settings) has no endpoint: its keys are those from before the endpoint was
    keyed, so an in-memory or benchmark cache keyed by them is unchanged."""
    base = dict(model_name="m", method="json_schema", stage="s", messages=list(MSGS), schema=Verdict)
    assert stage_key(**base, endpoint=None) == stage_key(**base)
    assert stage_key(**base, endpoint="http://h/v1") != stage_key(**base)
    assert stage_key(**base, endpoint="http://h:80/v1/") == stage_key(**base, endpoint="http://h/v1")
    assert Backbone(ScriptedChatModel({})).endpoint is None
    settings = BackboneSettings(base_url="http://h:80/v1/", model="m", api_key="k")
    assert Backbone.from_settings(settings, model=ScriptedChatModel({})).for_draw(1).endpoint == "http://h:80/v1/"
