"""A tool-round reply the server cut at the token limit (finish_reason "length") that holds tool calls: the calls
that parsed are complete (a JSON object parses only once it is closed) and are run; a call the cut reached does
not parse and the reply is re-asked with the hint to raise RAA_MAX_TOKENS (graph.tool_replies)."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage

from graph.backbone import Backbone, Usage
from graph.cache import StageCache
from graph.testing import ScriptedChatModel
from tests.test_backbone_http import MSGS
from tests.test_backbone_not_a_completion import VIEW

CUT = {"finish_reason": "length"}
WHOLE = {"name": "view_frames", "args": {"frames": [3, 5]}, "id": "c1", "type": "tool_call"}


def test_complete_calls_of_a_cut_reply_run_and_the_reply_is_not_cached() -> None:
    """Re-asking would send the same request under the same cap (cut again, then a fault that leaves the run
    ineligible) for calls the model wrote whole; what the cut dropped after them the model can ask for next round."""
    cut = AIMessage(content="", tool_calls=[WHOLE], response_metadata=CUT)
    model = ScriptedChatModel({"judge": [cut, AIMessage(content="R1 is met.")]})
    cache = StageCache(None)
    bb = Backbone(model, cache=cache, retry_wait=(0.0, 0.0))
    reply = asyncio.run(bb.atool_round("judge", list(MSGS), [VIEW], usage := Usage()))
    assert [c["args"] for c in reply.tool_calls] == [{"frames": [3, 5]}] and usage.calls == 1
    assert len(cache) == 0  # a rerun with a higher RAA_MAX_TOKENS asks again


def test_a_cut_reply_whose_last_call_was_reached_by_the_cut_is_reasked_with_the_hint() -> None:
    broken = {"name": "view_crop", "args": '{"frame": 3, "box": [0.1, 0.', "id": "c2", "error": "not JSON",
              "type": "invalid_tool_call"}
    cut = AIMessage(content="", tool_calls=[WHOLE], invalid_tool_calls=[broken], response_metadata=CUT)
    model = ScriptedChatModel({"judge": [cut, AIMessage(content="", tool_calls=[WHOLE])]})
    bb = Backbone(model, retry_wait=(0.0, 0.0))
    reply = asyncio.run(bb.atool_round("judge", list(MSGS), [VIEW], usage := Usage()))
    assert reply.response_metadata.get("finish_reason") != "length" and usage.calls == 2
    reask = model.calls[1].messages[-1].content
    assert "RAA_MAX_TOKENS" in reask and "view_crop" in reask
