"""A stage output holding a non-finite number (a model's JSON may write Infinity or NaN, which pydantic reads)
comes back from the stage cache as it was given, not with null in its place."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel

from graph.backbone import Backbone, Usage
from graph.cache import StageCache
from graph.schemas import InspectionPlan
from graph.testing import ScriptedChatModel

PLAN = ('{"views": [{"frames": [1], "box": [0.1, 0.1, NaN, 0.5]}], '
        '"tracks": [{"start_frame": 0, "end_frame": 10, "points": [[Infinity, 0.5]]}], "rationale": "r"}')
MSGS = [SystemMessage(content="# stage: plan\nPlan."), HumanMessage(content="which frames?")]


class Points(BaseModel):
    points: list[float]


def _twice(schema: type[BaseModel], reply: str, cache: StageCache) -> tuple[BaseModel, BaseModel, int, Usage]:
    model = ScriptedChatModel({"plan": [reply]})
    bb = Backbone(model, cache=cache, retry_wait=(0.0, 0.0))
    first = asyncio.run(bb.astructured("plan", schema, list(MSGS), Usage()))
    usage = Usage()
    again = asyncio.run(bb.astructured("plan", schema, list(MSGS), usage))
    return first, again, len(model.calls), usage


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_cached_plan_keeps_its_non_finite_numbers(tmp_path, on_disk: bool) -> None:
    cache = StageCache(tmp_path / "c.sqlite" if on_disk else None)
    first, again, calls, usage = _twice(InspectionPlan, PLAN, cache)
    assert first.tracks[0].points == [[float("inf"), 0.5]]
    # was: the track came back as the dict {"points": [[None, 0.5]]} (a plan entry "not run: invalid
    # arguments"), where the model's own reply tracked the point moved to the frame's edge
    assert repr(again) == repr(first)
    assert calls == 1 and usage.cache_hits == 1 and usage.calls == 0


def test_an_output_with_infinity_is_served_from_the_cache() -> None:
    first, again, calls, usage = _twice(Points, '{"points": [Infinity, 1.5]}', StageCache())
    assert again == first == Points(points=[float("inf"), 1.5])
    assert calls == 1 and usage.cache_hits == 1  # was: stored as [null, 1.5], a miss on every hit (asked again)
