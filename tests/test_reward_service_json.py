"""The reward service's bound on the JSON structure of a request body (graph/reward_service.py): a body of many
small values parses to many times its size, so it is refused (413) before it is parsed."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from graph.reward_service import JSON_VALUES_PER_ITEM, create_reward_app


def _app(max_items: int = 5):
    return create_reward_app(object(), "decomposed", max_items=max_items, max_body_mb=2.0)


def test_a_body_of_many_small_values_is_refused_before_it_is_parsed(monkeypatch):
    """1.5 MiB of ``[],`` (within max_body_mb) parsed to ~35 MiB of lists before the 'items' check (22x its size:
    2 GiB, the default max_body_mb, would be ~45 GB); the 413 names the limit and what a request holds."""
    import graph.reward_service as service

    body = b'{"items": [], "pad": [' + b",".join([b"[]"] * 500_000) + b"]}"
    parsed: list[bytes] = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda text, **kw: (parsed.append(text) if text == body else None)
                        or real(text, **kw))
    with TestClient(_app()) as c:
        r = c.post("/v1/score", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    limit = JSON_VALUES_PER_ITEM * 5 + service.JSON_VALUES_SLACK
    detail = r.json()["detail"]
    assert f"limit of {limit}" in detail and "5 items" in detail and "video_b64" in detail
    assert not parsed  # refused before json.loads


def test_a_batch_at_the_item_limit_with_wordy_instructions_is_read(monkeypatch):
    """The bound leaves room for every item's fields and punctuation in its instruction: a full batch is parsed
    (its items are then answered one by one; here their clips are bad base64, each its own ineligible result)."""
    instruction = "pick up the cup, then the plate: put both, gently, on the shelf; " * 20  # 60 ',' and ':'
    items = [{"video_b64": "!!", "instruction": instruction, "fps": 16.0} for _ in range(5)]
    with TestClient(_app()) as c:
        r = c.post("/v1/score", json={"items": items, "meta": {"iteration": 1, "phase": "train"}})
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()["results"]] == ["ineligible"] * 5


def test_punctuation_inside_instructions_does_not_count_against_the_bound():
    """An instruction within the agent's own 4000 characters may be punctuation-heavy (a goal given as
    waypoints, a list of steps): a full batch of them was refused (413) because the bound counted the ',' and
    ':' inside strings as values; only the JSON's own structure may count."""
    from graph.config import INSTRUCTION_CHARS_LIMIT

    waypoints = ", ".join(f"[{i}, {i + 1}]" for i in range(400))
    instruction = ("move the gripper through the waypoints: " + waypoints)[:INSTRUCTION_CHARS_LIMIT]
    assert instruction.count(",") > JSON_VALUES_PER_ITEM
    items = [{"video_b64": "!!", "instruction": instruction, "fps": 16.0} for _ in range(32)]
    with TestClient(_app(max_items=32)) as c:
        r = c.post("/v1/score", json={"items": items, "meta": {"iteration": 1, "phase": "train"}})
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()["results"]] == ["ineligible"] * 32


def test_a_body_of_many_empty_strings_is_refused_too():
    """Strings count as values themselves: a body of many small strings is refused like one of small lists."""
    body = b'{"items": [], "pad": [' + b",".join([b'""'] * 50_000) + b"]}"
    with TestClient(_app()) as c:
        r = c.post("/v1/score", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
