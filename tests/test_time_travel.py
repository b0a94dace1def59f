"""Stepping back through a finished agent run with LangGraph's time travel (checkpoint history, a
forked state update, a replay): how a reviewer asks "what if this judgment had been different" in
Studio or from Python. Routing refactors can break this silently (a node that picks its successor
itself, with `Command(goto=...)`, leaves `update_state` no edge to follow: the fork ends without a
result), so it is pinned here."""

from __future__ import annotations

from graph_scripts import make_agent, nodes

INSTRUCTION = "push the red block to the right"


def test_fork_before_reflect_reruns_the_rest_and_replay_repeats_the_run(clip):
    agent, _ = make_agent("full")
    config = {"configurable": {"thread_id": "tt"}}
    first = agent.invoke({"video": str(clip), "instruction": INSTRUCTION, "run_id": "tt"}, config)
    assert first["result"].status == "scored"
    history = list(agent.get_state_history(config))
    assert [h.next for h in history][:2] == [(), ("gate",)]

    before_reflect = next(h for h in history if h.next == ("reflect",))
    done = len(before_reflect.values["steps"])
    forked = agent.update_state(before_reflect.config, {"notes": ["forked by a reviewer"]})
    assert agent.get_state(forked).next == ("reflect",)
    second = agent.invoke(None, forked)
    assert second["result"].status == "scored" and "forked by a reviewer" in second["result"].reasons
    assert nodes(second)[done:] == ["reflect", "audit", "final_check", "gate"]

    before_assess = next(h for h in history if h.next == ("assess",))
    kept = len(before_assess.values["steps"])
    replay = agent.invoke(None, before_assess.config)  # the scripted model's inspect replies are used up:
    assert replay["result"].status == "scored"         # the replay inspects less, so compare the kept part
    assert nodes(replay)[:kept] == nodes(first)[:kept] and nodes(replay)[kept] == "assess"
    assert nodes(replay)[-1] == "gate"
