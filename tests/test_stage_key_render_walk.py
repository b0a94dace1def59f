"""`graph.cache_keys._render_block` walks only dicts and lists: a string, number or None inside a block is taken as it
is, not passed to a call of its own (a stage's messages hold hundreds of such values). The rendering is unchanged:
it equals the walk that called itself on every value, which the keys already written were built with."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import graph.cache_keys as cache_keys
from graph.cache_keys import render_messages

URL = "data:image/jpeg;base64,QUJD"


def _every_value(block: Any) -> Any:
    """The walk as it was: a call on every value."""
    if isinstance(block, dict):
        out: dict[str, Any] = {}
        for k, v in block.items():
            if k == "image_url":
                url = v.get("url", "") if isinstance(v, dict) else str(v)
                out[k] = {"sha256": cache_keys.url_digest(url), "detail": v.get("detail") if isinstance(v, dict) else None}
            elif k in ("data", "base64") and isinstance(v, str):
                out[k] = {"sha256": cache_keys.url_digest(v)}
            elif k == "url" and isinstance(v, str) and v.startswith("data:"):
                out[k] = {"sha256": cache_keys.url_digest(v)}
            else:
                out[k] = _every_value(v)
        return out
    if isinstance(block, list):
        return [_every_value(b) for b in block]
    return block


CONTENT = [{"type": "text", "text": "frame 3 (t=0.19s)"},
           {"type": "image_url", "image_url": {"url": URL, "detail": "low"}},
           {"type": "image_url", "image_url": URL},
           {"type": "image", "source_type": "base64", "data": "QUJD", "mime_type": "image/jpeg"},
           {"type": "image", "base64": "QUJD", "url": URL},
           {"type": "file", "url": "https://example.org/a.png", "extras": {"n": 1, "x": None, "f": 0.5, "t": (1, 2)}},
           {"type": "nested", "parts": [["a", {"url": URL}], 3, None, True], "data": 7, "base64": ["not", "a str"]},
           "a bare string block"]
MESSAGES = [SystemMessage(content="# stage: assess\nJudge."), HumanMessage(content=CONTENT),
            AIMessage(content="", tool_calls=[{"name": "view_frames", "args": {"frames": [1, 2]}, "id": "c1"}]),
            ToolMessage(content=[{"type": "text", "text": "shown"}], tool_call_id="c1")]


def test_the_rendering_is_that_of_the_walk_over_every_value():
    rendered = render_messages(MESSAGES)
    assert [m["content"] for m in rendered] == [_every_value(m.content) for m in MESSAGES]
    assert rendered[1]["content"][6]["parts"][0][1] == {"url": {"sha256": cache_keys.url_digest(URL)}}
    assert rendered[1]["content"][6]["data"] == 7 and rendered[1]["content"][6]["base64"] == ["not", "a str"]


def test_only_dicts_and_lists_are_walked(monkeypatch):
    calls: list[Any] = []
    walk = cache_keys._render_block

    def counted(block: Any) -> Any:
        calls.append(block)
        return walk(block)

    monkeypatch.setattr(cache_keys, "_render_block", counted)
    render_messages([HumanMessage(content=[{"type": "text", "text": f"frame {i}"} for i in range(10)])])
    assert all(isinstance(b, dict | list) for b in calls), [b for b in calls if not isinstance(b, dict | list)]
    assert len(calls) == 11  # the content list and its 10 text blocks
