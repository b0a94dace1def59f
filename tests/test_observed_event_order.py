"""An observed event written with its end before its start ("frames 20..5") is refused and re-asked with the
reason: it was kept as written, so assess and the audit read a timeline running backwards and the report linked a
stretch that does not exist. The schema sent to the model is unchanged (its fields already say first and last)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import ValidationError

from graph.backbone import Backbone, Usage
from graph.schemas import Observation, ObservedEvent
from graph.testing import ScriptedChatModel

MSGS = [SystemMessage(content="# stage: observe\nDescribe."), HumanMessage(content="frames")]


def _observation(start: int, end: int) -> dict:
    return {"scene": "a table", "events": [{"start_frame": start, "end_frame": end, "description": "a block moves"}],
            "objects": ["block"], "visual_issues": [], "summary": "A block moves."}


def test_an_event_ending_before_it_starts_is_refused():
    with pytest.raises(ValidationError, match="end_frame 5 is before its start_frame 20"):
        ObservedEvent.model_validate({"start_frame": 20, "end_frame": 5, "description": "a block moves"})
    assert ObservedEvent.model_validate({"start_frame": 7, "end_frame": 7, "description": "a flash"}).end_frame == 7


def test_the_schema_sent_to_the_model_is_unchanged():
    event = Observation.model_json_schema()["$defs"]["ObservedEvent"]
    assert set(event) == {"description", "properties", "required", "title", "type"}
    assert set(event["properties"]) == {"start_frame", "end_frame", "description"}


@pytest.mark.parametrize("method", ["json_schema", "json_mode", "function_calling"])
def test_a_reversed_event_is_re_asked_with_the_reason(method):
    model = ScriptedChatModel({"observe": [_observation(20, 5), _observation(5, 20)]})
    bb = Backbone(model, method=method, schema_retries=1, retry_wait=(0.0, 0.0))
    obs = bb.structured("observe", Observation, list(MSGS), Usage())
    assert (obs.events[0].start_frame, obs.events[0].end_frame) == (5, 20)
    again = model.calls_for("observe")[1]
    assert "end_frame 5 is before its start_frame 20" in again.text()


def test_a_stored_observation_with_a_reversed_event_is_asked_again():
    """A stage-cache entry written before the check (an observation with a reversed event) is a miss, so the stage
    is asked again and the entry replaced, not an observe fault that would make the run ineligible."""
    import json

    from graph.cache import StageCache

    model = ScriptedChatModel({"observe": [_observation(5, 20)]})
    bb = Backbone(model, schema_retries=1, retry_wait=(0.0, 0.0), cache=StageCache(None))
    key = bb.key_of("observe", list(MSGS), method=bb.method, schema=Observation)
    bb.cache.put(key, json.dumps(_observation(20, 5)))
    usage = Usage()
    obs = bb.structured("observe", Observation, list(MSGS), usage)
    assert (obs.events[0].start_frame, obs.events[0].end_frame) == (5, 20)
    assert len(model.calls_for("observe")) == 1 and usage.cache_hits == 0
    assert json.loads(bb.cache.get(key))["events"][0]["start_frame"] == 5
