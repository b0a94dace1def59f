"""A stage-cache key is the sha256 of one canonical JSON text of the stage input (`graph.cache_keys.stage_key`).
These pin it: the digests below are keys of caches already written (a change to how the key text is built, e.g.
to make it cheaper, must still find them), and the key must be that of the whole payload's single `json.dumps`."""

from __future__ import annotations

import hashlib
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import BaseModel

from graph.cache_keys import endpoint_identity, render_messages, stage_key
from graph.nodes.evidence import tool_specs
from graph.schemas import Assessment, TaskContract

MSGS = [SystemMessage(content="# stage: assess\nJudge — «data» \u2028 ✓"),
        HumanMessage(content=[{"type": "text", "text": "frame 0"},
                              {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA", "detail": "low"}}]),
        AIMessage(content="", tool_calls=[{"name": "view_frames", "args": {"frames": [1, 2]}, "id": "c1"}]),
        ToolMessage(content="shown", tool_call_id="c1")]
TOOLS = [{"type": "function", "function": {"name": "view", "parameters": {"b": 1, "a": [None, 1.5]}}}]


class Verdict(BaseModel):
    ok: bool
    note: str = "é"


def _whole_payload_key(*, model_name, method, stage, messages, params=None, schema=None, tools=None, endpoint=None):
    """The key as one json.dumps of the whole payload (how it was computed before it was written in parts)."""
    payload = {**({} if endpoint is None else {"endpoint": endpoint_identity(endpoint)}), "model": model_name,
               "method": method, "stage": stage, "messages": render_messages(messages), "params": params or {},
               "schema": None if schema is None else {"name": schema.__name__, "json": schema.model_json_schema()},
               "tools": list(tools or [])}
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


CASES = {
    "schema_endpoint": dict(model_name="m", method="json_schema", stage="assess", messages=MSGS,
                            params={"draw": 2, "temperature": 0.5}, schema=Verdict, endpoint="HTTPS://Host:443/v1/"),
    "tools": dict(model_name="m", method="tools", stage="inspect", messages=MSGS, tools=TOOLS),
    "bare": dict(model_name="", method="json_mode", stage="s", messages=[]),
}


@pytest.mark.parametrize("name, digest", [
    ("schema_endpoint", "96946645bfa158e2f6af8464b778d001b5c688bd846836d95efc908da03340dd"),
    ("tools", "0f3212947b5990f99b7a9ce90379c427df5c9143285bd6475418ee8952d06d68"),
    ("bare", "78b2cca7b178de3a1ada3d19ea1124ebbc65421f5c971c6000806351bb1493a2"),
])
def test_keys_written_before_are_found_again(name, digest):
    assert stage_key(**CASES[name]) == digest


@pytest.mark.parametrize("extra", [dict(schema=Assessment), dict(schema=TaskContract, endpoint="http://h:8000/v1"),
                                   dict(tools=tool_specs(True)), dict(params={"x": [1, {"y": None}]})])
def test_the_key_is_that_of_the_whole_payload(extra):
    kwargs = dict(model_name="m", method="json_schema", stage="assess", messages=MSGS, **extra)
    assert stage_key(**kwargs) == _whole_payload_key(**kwargs)
    assert stage_key(**kwargs) == _whole_payload_key(**kwargs)  # a second call (nothing cached changes it)
