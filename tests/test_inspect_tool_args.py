"""A tool call's arguments are stored, sent back and traced as they were run, bounded, not as the model wrote them: a
view_frames call of thousands of frames showed 16 but carried every index into each later request, reflect's request,
the checkpoints and the trace; a 1 MB string argument did the same (DESIGN.md §3, inspect <-> tool_call)."""

from __future__ import annotations

import json

from graph_scripts import full_script, make_agent, run
from langchain_core.messages import AIMessage
from test_inspect_call_cap import assert_valid_conversation, reply

from graph.nodes.inspect import round_calls
from graph.schemas import VIEW_FRAMES

BIG = "x" * 1_000_000
SMALL = 4_000  # characters one stored call may take, arguments and answer together


def size(value: object) -> int:
    return len(json.dumps(value, default=str))


def test_a_long_view_is_stored_and_sent_back_as_the_frames_viewed(clip) -> None:
    first = reply(("v", "view_frames", {"frames": [k % 33 for k in range(3000)]}))
    agent, model = make_agent("full", full_script(inspect=[first, "done"]), motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    (ex,) = out["exchanges"]
    assert ex["args"] == {"frames": list(range(VIEW_FRAMES))}
    assert ex["frames"] == list(range(VIEW_FRAMES))
    assert "2984 more frames" in ex["text"] and size(ex) < SMALL, ex["text"][:400]
    second = model.calls_for("inspect")[1].messages
    assert_valid_conversation(second)
    (sent,) = [m for m in second if isinstance(m, AIMessage) and m.tool_calls]
    assert sent.tool_calls[0]["args"] == {"frames": list(range(VIEW_FRAMES))}
    assert len(model.calls_for("reflect")[0].text()) < 30_000
    tool_step = next(s for s in out["steps"] if s["node"] == "tool_call")
    assert size(tool_step["tool_summaries"]) < SMALL


def test_huge_string_arguments_cannot_bloat_the_state(clip) -> None:
    first = reply(("a", "view_frames", {"frames": [3], "note": BIG}),
                  ("b", "view_crop", {"frame": 5, "box": BIG}),
                  ("c", "zoom_in", {"query": BIG, "more": [BIG] * 3}),
                  ("d" * 100_000, "y" * 100_000, {"q": BIG}))
    agent, model = make_agent("full", full_script(inspect=[first, "done"]), motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"]
    assert len(ex) == 4
    assert [e["frames"] for e in ex[:2]] == [[3], [5]]  # they still ran
    assert ex[1]["box"] is None and "full frame" in ex[1]["text"]
    assert "unknown tool" in ex[2]["text"]
    for e in ex:
        assert size(e) < SMALL, (e["name"][:40], size(e))
    second = model.calls_for("inspect")[1].messages
    assert_valid_conversation(second)
    assert sum(len(m.text()) + size(getattr(m, "tool_calls", [])) for m in second) < 60_000
    assert len(model.calls_for("reflect")[0].text()) < 30_000


def test_pending_calls_are_bounded_before_they_are_checkpointed() -> None:
    calls = round_calls([{"id": "v", "name": "view_frames", "args": {"frames": list(range(5000)), "s": BIG}},
                         {"id": "i" * 100_000, "name": "n" * 100_000, "args": {"q": BIG}}], 0)
    assert size(calls) < 2 * SMALL
    assert calls[0]["args"]["frames"] == list(range(VIEW_FRAMES))
    assert len({c["id"] for c in calls}) == 2


def test_a_plan_view_of_thousands_of_frames_is_stored_as_viewed(clip) -> None:
    long = [k % 33 for k in range(3000)]
    plan = {"views": [{"frames": long}] + [{"frames": [1]}] * 7 + [{"frames": long, "junk": BIG}], "rationale": "x"}
    agent, _ = make_agent("full", full_script(plan=[plan]), inspect_mode="plan", motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"]
    assert ex[0]["args"] == {"frames": list(range(VIEW_FRAMES))}
    assert "2984 more frames dropped" in ex[0]["text"], ex[0]["text"][:300]
    assert ex[-1]["text"].startswith("plan view 9 not run")
    for e in ex:
        assert size(e) < SMALL, (e["text"][:80], size(e))
