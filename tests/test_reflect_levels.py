"""Reflect may lower the rubric levels (P, V) but not raise them (`graph.nodes.revision.guard_levels`, mode "credit"):
the levels cite no frames, and reflect's evidence (inspected frames, surprise windows, extra tools' claims) covers
part of the clip: it can show a problem the uniform sample missed, not that the clip has none. A reflect that
returned 5/5 over an assessment's 2/2, on no frame (or on an extra tool's claim), raised R from 0.48 to 1.0."""

from __future__ import annotations

import pytest
from graph_scripts import assessment, full_script, make_agent, run


def test_reflect_raising_the_levels_keeps_the_earlier_ones(clip):
    low = assessment(phys=2, vis=2)
    agent, _ = make_agent("no_wmreward", full_script(assess=[low], reflect=[assessment(phys=5, vis=5)]))
    out = run(agent, clip)
    res = out["result"]
    assert res.status == "scored" and (res.P, res.V) == (0.25, 0.25), res
    assert (out["assessment"].physical_level, out["assessment"].visual_level) == (2, 2)
    assert any(n.startswith("reflect: physical_level kept 2") and "returned 5" in n for n in out["notes"])
    assert any(n.startswith("reflect: visual_level kept 2") for n in out["notes"])


def test_reflect_lowering_a_level_stands(clip):
    agent, _ = make_agent("no_wmreward", full_script(assess=[assessment(phys=5, vis=4)],
                                                     reflect=[assessment(phys=2, vis=3)]))
    out = run(agent, clip)
    assert (out["assessment"].physical_level, out["assessment"].visual_level) == (2, 3)
    assert out["result"].P == pytest.approx(0.25) and not any("_level kept" in n for n in out["notes"])


def test_the_level_guard_modes():
    """Pure: "changes" (repair) keeps every earlier level and its rationale; "credit" (reflect) only a raised one."""
    from graph.nodes.revision import guard_levels
    from graph.schemas import Assessment

    def a(p, v, why):
        return Assessment(physical_level=p, visual_level=v, physical_rationale=why, visual_rationale=why)

    before, after = a(3, 3, "before"), a(5, 1, "after")
    credit, notes = guard_levels(before, after, "reflect", "credit")
    assert (credit.physical_level, credit.physical_rationale, credit.visual_level, credit.visual_rationale) == (
        3, "before", 1, "after") and len(notes) == 1
    changes, notes = guard_levels(before, after, "repair", "changes")
    assert (changes.physical_level, changes.visual_level, changes.visual_rationale) == (3, 3, "before")
    assert len(notes) == 2
