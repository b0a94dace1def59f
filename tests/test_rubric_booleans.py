"""A boolean where the schema asks for a rubric level (or the direct reward) is an invalid reply, re-asked: lax
pydantic read `true` as level 1 (P or V = 0) or as reward 1.0, a number the model never wrote."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from graph.backbone import Backbone, Usage
from graph.gate import score_mapping
from graph.schemas import Assessment, DirectScore, Requirement, TaskContract
from graph.testing import ScriptedChatModel

SCHEMA_SHA = {Assessment: "ff6638737c161eb7", DirectScore: "4d8deceb965d25f5"}  # the stage keys hash these


@pytest.mark.parametrize("field", ["physical_level", "visual_level"])
@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_rubric_level_is_refused(field: str, value: bool) -> None:
    data = {"judgments": [], "physical_level": 4, "visual_level": 4, field: value}
    with pytest.raises(ValidationError, match="boolean"):
        Assessment.model_validate(data)
    with pytest.raises(ValidationError, match="boolean"):
        Assessment.model_validate_json(json.dumps(data))


def test_a_boolean_direct_reward_is_refused() -> None:
    with pytest.raises(ValidationError, match="boolean"):
        DirectScore.model_validate_json('{"reward": true}')


def test_levels_and_reward_as_numbers_still_read() -> None:
    assert Assessment.model_validate_json('{"physical_level": 5.0, "visual_level": "3"}').physical_level == 5
    assert DirectScore.model_validate_json('{"reward": 1}').reward == 1.0


@pytest.mark.parametrize("schema", [Assessment, DirectScore])
def test_the_json_schemas_sent_are_unchanged(schema: type[BaseModel]) -> None:
    text = json.dumps(schema.model_json_schema(), sort_keys=True)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == SCHEMA_SHA[schema]


def test_a_reply_with_a_boolean_level_is_re_asked() -> None:
    bad = {"judgments": [{"requirement_id": "R1", "status": "met"}], "physical_level": True, "visual_level": 5}
    good = {**bad, "physical_level": 4}
    model = ScriptedChatModel({"assess": [bad, good]})
    bb = Backbone(model, method="json_mode", retry_wait=(0.0, 0.0))
    usage = Usage()
    msgs = [SystemMessage(content="# stage: assess\nAssess."), HumanMessage(content="frames")]
    out = asyncio.run(bb.astructured("assess", Assessment, msgs, usage))
    contract = TaskContract(requirements=[Requirement(id="R1", kind="outcome", text="done")])
    assert score_mapping(out, contract) == (1.0, 0.75, 1.0)  # was (1.0, 0.0, 1.0): `true` read as level 1
    assert usage.calls == 2 and "boolean" in model.calls[1].text()


@pytest.mark.parametrize(("value", "read"), [("no", False), ("false", False), (0, False), ("yes", True), (1, True)])
def test_a_final_check_flag_is_read_as_written(value, read) -> None:
    """Decided (graph/schemas.py): lax booleans read only spellings that state the value."""
    from graph.schemas import FinalCheck

    check = FinalCheck.model_validate_json(json.dumps({"failure_established": value, "essential_unverifiable": value}))
    assert (check.failure_established, check.essential_unverifiable) == (read, read)


@pytest.mark.parametrize("value", ["maybe", "unclear", None, 0.5, [], "N/A"])
def test_a_final_check_flag_that_states_no_value_is_refused(value) -> None:
    from graph.schemas import FinalCheck

    with pytest.raises(ValidationError):
        FinalCheck.model_validate_json(json.dumps({"failure_established": value, "essential_unverifiable": False}))
