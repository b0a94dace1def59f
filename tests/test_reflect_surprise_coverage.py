"""Reflect tells the model which frames the surprise covers when the scorer saw only the first
`MAX_SURPRISE_FRAMES` of a long clip (graph.nodes.reflect): the result's notes said so, but the model read "the
most surprising windows" as covering the whole clip, so the end of a long clip, where the task succeeds or fails,
looked predictable for want of any window there."""

from __future__ import annotations

from graph_scripts import make_agent, run
from test_extra_evidence import GripperCheck, _agent
from test_reflect_surprise import Overlapping

import graph.nodes.extra as extra_node
import graph.nodes.surprise as surprise_node


def test_reflect_names_the_frames_a_capped_scoring_covered(clip, monkeypatch):
    monkeypatch.setattr(surprise_node, "MAX_SURPRISE_FRAMES", 24)  # the 33-frame clip stands for a long one
    agent, model = make_agent("full", surprise=Overlapping(), surprise_windows=1)
    out = run(agent, clip)
    assert out["result"].status == "scored"
    text = model.calls_for("reflect")[0].text()
    assert "scored frames 0..23 of the clip's 33 only" in text and "frames 24..32 have no surprise evidence" in text
    assert "surprise scored on the first 24 of 33 frames" in out["result"].notes


def test_reflect_says_nothing_of_coverage_when_the_whole_clip_was_scored(clip):
    agent, model = make_agent("full", surprise=Overlapping(), surprise_windows=1)
    run(agent, clip)
    assert "no surprise evidence" not in model.calls_for("reflect")[0].text()


def test_reflect_names_the_frames_the_extra_tools_saw_of_a_long_clip(clip, monkeypatch):
    """The same for your own evidence tools (`graph.nodes.extra.MAX_EXTRA_FRAMES`)."""
    monkeypatch.setattr(extra_node, "MAX_EXTRA_FRAMES", 24)
    agent, model = _agent(tools=[GripperCheck()])
    run(agent, clip)
    text = model.calls_for("reflect")[0].text()
    assert "saw frames 0..23 of the clip's 33 only" in text and "frames 24..32 were not evaluated" in text
