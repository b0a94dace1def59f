"""The error a re-ask quotes back to the model (and a fault's message) is cut to `graph.validation.ERR_CHARS`: it
was cut mid-error, without saying so, so a long pydantic error list lost the errors past the cut (the one item
that mattered among rationales over their limit), and the model was re-asked about only some of its mistakes."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import AIMessage

from graph.backbone import Backbone, BackboneFault, Usage
from graph.schemas import Assessment
from graph.testing import ScriptedChatModel
from graph.validation import ERR_CHARS, InvalidReply, excerpt, reask, validate_text
from tests.test_backbone_http import MSGS


def _assessment(n: int = 10, long: int = 7) -> dict:
    """`n` judgments, the first `long` with a rationale over its limit, the last with a status that is none."""
    judgments = [{"requirement_id": f"R{i}", "status": "met", "evidence_frames": [1],
                  "rationale": "x" * 1200 if i < long else "ok", "confidence": 0.9} for i in range(n)]
    judgments[-1]["status"] = "done"
    return {"judgments": judgments, "physical_level": 4, "visual_level": 5}


def _quoted(obj: dict) -> str:
    with pytest.raises(InvalidReply) as info:
        validate_text(Assessment, json.dumps(obj))
    assert len(info.value.message) > ERR_CHARS
    said = str(reask("Assessment", info.value)[-1].content)
    return said.split("rejected (invalid_reply): ", 1)[1].rsplit("\nReply again", 1)[0]


def test_pydantic_links_take_no_room() -> None:
    """8 errors (seven rationales over their limit, then the status) fit once the links are dropped."""
    quoted = _quoted(_assessment())
    assert "judgments.9.status" in quoted and "errors.pydantic.dev" not in quoted and "not shown" not in quoted


def test_a_long_error_list_is_cut_at_a_whole_error_and_names_the_rest() -> None:
    quoted = _quoted(_assessment(16, 15))  # 16 errors: past the limit without the links too
    assert len(quoted) <= ERR_CHARS + 400
    assert "judgments.15.status" in quoted.rsplit("\n", 1)[1]  # the errors past the cut are named
    assert "more not shown here" in quoted and "errors.pydantic.dev" not in quoted
    for block in quoted.rsplit("\n", 1)[0].split("\njudgments.")[1:]:  # every error quoted is whole
        assert block.endswith("input_type=str]"), block


def test_a_short_message_is_quoted_as_it_is() -> None:
    assert excerpt("the reply's JSON object is not closed") == "the reply's JSON object is not closed"
    one_line = "y" * (ERR_CHARS + 500)
    cut = excerpt(one_line)
    assert cut.startswith("y" * 100) and len(cut) < ERR_CHARS + 100 and "500 more characters" in cut


def test_the_fault_after_the_last_reask_names_every_failed_item() -> None:
    model = ScriptedChatModel({"judge": [AIMessage(content=json.dumps(_assessment()))] * 2})
    bb = Backbone(model, method="json_mode", schema_retries=1, retry_wait=(0.0, 0.0))
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Assessment, list(MSGS), Usage()))
    assert "judgments.9.status" in info.value.message and "errors.pydantic.dev" not in info.value.message
