"""One inspect round answers a bounded number of tool calls (`graph.schemas.CALLS_PER_ROUND`), and the conversation
sent back after a round is one an OpenAI-compatible server accepts: every tool-call id of an assistant message is
unique and answered by exactly one tool message (DESIGN.md §3, inspect <-> tool_call)."""

from __future__ import annotations

import pytest
from graph_scripts import full_script, make_agent, run
from langchain_core.messages import AIMessage, ToolMessage

from graph.schemas import CALLS_PER_ROUND, PLAN_VIEWS, TRACKS_PER_ROUND


def reply(*calls: tuple[str, str, dict]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": i, "name": n, "args": a, "type": "tool_call"} for i, n, a in calls])


def views(n: int) -> AIMessage:
    return reply(*((f"v{k}", "view_frames", {"frames": [k % 33]}) for k in range(n)))


def assert_valid_conversation(messages) -> None:
    """What an OpenAI-compatible server checks: the tool messages after an assistant message answer its tool calls,
    each id once, and no tool message answers anything else."""
    for k, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            assert k > 0 and isinstance(messages[k - 1], AIMessage | ToolMessage), "a tool message without a call"
        if not (isinstance(m, AIMessage) and m.tool_calls):
            continue
        ids = [c["id"] for c in m.tool_calls]
        assert len(set(ids)) == len(ids), f"duplicate tool-call ids {ids}"
        answers = []
        for later in messages[k + 1:]:
            if not isinstance(later, ToolMessage):
                break
            answers.append(later.tool_call_id)
        assert answers == ids, (answers, ids)


def test_a_reply_with_many_calls_runs_at_most_the_cap_and_the_rest_are_left_out(clip) -> None:
    # a reply of 300 calls ran and answered 1,200 exchanges over 4 rounds: the text sent back grew each round
    script = full_script(inspect=[views(40), views(40), "The frames confirm R1 and R2."])
    agent, model = make_agent("full", script, motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"]
    assert [sum(e["round"] == r for e in ex) for r in (0, 1)] == [CALLS_PER_ROUND] * 2
    assert [e["call_id"] for e in ex if e["round"] == 0] == [f"v{k}" for k in range(CALLS_PER_ROUND)]
    last = [e for e in ex if e["round"] == 0][-1]["text"]
    assert f"{40 - CALLS_PER_ROUND} more tool calls of this reply were not run" in last, last
    assert f"at most {CALLS_PER_ROUND} tool calls per round" in last, last
    calls = model.calls_for("inspect")
    assert len(calls) == 3
    for call in calls:
        assert_valid_conversation(call.messages)
    sent = [m for m in calls[2].messages if isinstance(m, AIMessage)]
    assert [len(m.tool_calls) for m in sent] == [CALLS_PER_ROUND] * 2  # what was left out is not sent back
    tool_step = next(s for s in out["steps"] if s["node"] == "tool_call")
    assert tool_step["decision"].startswith(f"executed {CALLS_PER_ROUND} tool calls, {40 - CALLS_PER_ROUND} left out")


def test_a_reply_within_the_cap_has_no_note(clip) -> None:
    agent, _ = make_agent("full", full_script(inspect=[views(CALLS_PER_ROUND), "done"]), motion_prefetch="off")
    out = run(agent, clip)
    assert len(out["exchanges"]) == CALLS_PER_ROUND
    assert not any("not run" in e["text"] for e in out["exchanges"])


def test_the_inspect_prompt_states_the_call_cap(monkeypatch, clip) -> None:
    import graph.nodes.inspect as inspect_node

    monkeypatch.setattr(inspect_node, "CALLS_PER_ROUND", 3)  # the value the loop enforces, not a literal
    agent, model = make_agent("full", full_script(inspect=[views(5), "done"]), motion_prefetch="off")
    out = run(agent, clip)
    assert "at most 3 tool calls per round" in model.calls_for("inspect")[0].text()
    assert len(out["exchanges"]) == 3


@pytest.mark.parametrize("ids", [["c1", "c1", "c1"], ["c1", "", "call_0_1"], ["x", "y", "x"]])
def test_duplicate_tool_call_ids_are_made_unique_and_every_call_runs(clip, ids) -> None:
    # ids repeated within one reply were sent back unchanged: a server may refuse the conversation (400)
    first = reply(*((i, "view_frames", {"frames": [f]}) for i, f in zip(ids, (4, 12, 20), strict=True)))
    agent, model = make_agent("full", full_script(inspect=[first, "done"]), motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"]
    assert [e["frames"] for e in ex] == [[4], [12], [20]]
    assert len({e["call_id"] for e in ex}) == 3
    assert ex[0]["call_id"] == ids[0]  # the first keeps the server's id
    assert_valid_conversation(model.calls_for("inspect")[1].messages)


def test_a_plan_past_its_caps_is_answered_in_bounded_exchanges(clip) -> None:
    # each view past 8 and each track past 2 got its own "not run" exchange: 300 views gave 292 of them
    track = {"start_frame": 0, "end_frame": 32, "points": [[0.3, 0.5]]}
    plan = {"views": [{"frames": [k % 33]} for k in range(300)], "tracks": [track] * 50, "rationale": "x"}
    agent, model = make_agent("full", full_script(plan=[plan]), inspect_mode="plan", motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"]
    assert len(ex) == PLAN_VIEWS + 1 + TRACKS_PER_ROUND + 1
    assert PLAN_VIEWS + TRACKS_PER_ROUND <= CALLS_PER_ROUND  # a plan within its caps runs every entry
    texts = [e["text"] for e in ex]
    assert f"plan views {PLAN_VIEWS + 1}-300 not run: a plan runs at most {PLAN_VIEWS} views" in texts
    assert any(t.startswith(f"plan tracks {TRACKS_PER_ROUND + 1}-50 not run: at most {TRACKS_PER_ROUND} "
                            "track_motion runs per round") for t in texts), texts
    assert sum(1 for e in ex if e.get("overlay")) == TRACKS_PER_ROUND


def test_a_tool_call_id_repeated_in_a_later_round_is_made_unique(clip) -> None:
    # a server numbering calls per reply ("call_0" each round) had its ids sent back as given: the conversation
    # then held two assistant turns calling "c1" and two tool messages answering "c1", which a server requiring
    # unique tool-call ids per conversation refuses (400), and the run ended ineligible
    rounds = [reply(("c1", "view_frames", {"frames": [f]}), ("c2", "view_frames", {"frames": [f + 1]}))
              for f in (4, 12)]
    agent, model = make_agent("full", full_script(inspect=[*rounds, "done"]), motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ids = [e["call_id"] for e in out["exchanges"]]
    assert len(set(ids)) == 4 and ids[:2] == ["c1", "c2"], ids  # the first round keeps the server's ids
    messages = model.calls_for("inspect")[2].messages
    assert_valid_conversation(messages)
    sent = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sent == answered == ids
