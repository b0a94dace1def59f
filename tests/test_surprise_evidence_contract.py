"""`tools.surprise.evidence_problem` refuses evidence whose status contradicts its windows: "ok" with no
window or no mean (its `text()` raised TypeError formatting the None mean, in the surprise node, an internal
error instead of the scorer's run fault) and "not_enough_frames" with windows."""

from __future__ import annotations

import pytest

from tools.surprise import SurpriseEvidence, SurpriseWindow, evidence_problem


def _window(start: int = 0, surprise: float = 0.3) -> SurpriseWindow:
    return SurpriseWindow(start=start, end=start + 15, frames=list(range(start, start + 16)), surprise=surprise)


@pytest.mark.parametrize(("evidence", "why"), [
    (SurpriseEvidence(status="ok", num_frames=20), "no window"),
    (SurpriseEvidence(status="ok", windows=[_window()], num_frames=20), "no mean"),
    (SurpriseEvidence(status="not_enough_frames", windows=[_window()], mean=0.3, num_frames=20), "not_enough_frames"),
])
def test_a_status_its_windows_contradict_is_a_problem(evidence, why):
    problem = evidence_problem(evidence, 20)
    assert problem is not None and why in problem


def test_consistent_evidence_passes():
    ok = SurpriseEvidence(status="ok", windows=[_window(), _window(4, 0.5)], top=[_window(4, 0.5)], mean=0.4,
                          num_frames=20)
    assert evidence_problem(ok, 20) is None
    assert evidence_problem(SurpriseEvidence(status="not_enough_frames", num_frames=15), 15) is None
    # top_k 0: no top window is fine, and the text says so instead of "Most surprising: ."
    none_listed = ok.model_copy(update={"top": []})
    assert evidence_problem(none_listed, 20) is None and "Most surprising: ." not in none_listed.text()
