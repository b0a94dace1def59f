"""A failed model load is remembered for a while (tools.errors.LoadFailureMemo): the batch does not re-run it."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tools.errors import LoadFailureMemo, ToolFault
from tools.motion import CoTracker3Tracker
from tools.surprise import VJEPA2SurpriseScorer


def test_memo_remembers_for_the_pause_then_lets_one_retry():
    now = [100.0]
    memo = LoadFailureMemo(60.0, clock=lambda: now[0])
    memo.check()  # nothing remembered: no error
    memo.record(ToolFault("surprise", "load", "weights missing"))
    now[0] += 20
    with pytest.raises(ToolFault) as info:
        memo.check()
    assert (info.value.tool, info.value.kind) == ("surprise", "load")
    assert "weights missing" in info.value.message and "20 s ago" in info.value.message
    assert "another 40 s" in info.value.message
    now[0] += 40
    memo.check()  # the pause is over: the caller may try again
    never = LoadFailureMemo(0.0)
    never.record(ToolFault("motion", "load", "x"))
    never.check()
    with pytest.raises(ValueError):
        LoadFailureMemo(-1)


def _failing_vjepa(monkeypatch, delay_s: float = 0.0) -> list[str]:
    import transformers

    calls: list[str] = []

    def from_pretrained(model_id, **kwargs):
        calls.append(model_id)
        time.sleep(delay_s)
        raise OSError(f"{model_id} is not a local folder and the hub cannot be reached")

    monkeypatch.setattr(transformers.VJEPA2Model, "from_pretrained", staticmethod(from_pretrained))
    return calls


def test_surprise_load_failure_is_not_retried_per_clip(monkeypatch):
    calls = _failing_vjepa(monkeypatch)
    scorer = VJEPA2SurpriseScorer.from_pretrained("facebook/vjepa2-vitl-fpc64-256")
    clip = np.zeros((16, 32, 32, 3), np.uint8)
    for _ in range(3):
        with pytest.raises(ToolFault) as info:
            scorer.score(clip)
        assert info.value.kind == "load" and "hub cannot be reached" in info.value.message
    assert len(calls) == 1 and "not retried" in info.value.message

    retrying = VJEPA2SurpriseScorer.from_pretrained("x", load_retry_s=0)
    for _ in range(2):
        with pytest.raises(ToolFault):
            retrying.load()
    assert len(calls) == 3


def test_concurrent_runs_waiting_on_a_failing_load_fail_together(monkeypatch):
    """Runs of a batch that queue behind the load lock get the first failure, not a load each."""
    calls = _failing_vjepa(monkeypatch, delay_s=0.2)
    scorer = VJEPA2SurpriseScorer.from_pretrained("facebook/vjepa2-vitl-fpc64-256")
    faults: list[ToolFault] = []

    def run() -> None:
        try:
            scorer.load()
        except ToolFault as exc:
            faults.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(faults) == 4 and len(calls) == 1
    assert time.perf_counter() - t0 < 0.6  # one 0.2 s load, not four in a row


def test_cotracker_load_failure_is_remembered(monkeypatch, tmp_path):
    builds: list[int] = []
    original = CoTracker3Tracker._build

    def counting(self):
        builds.append(1)
        return original(self)

    monkeypatch.setattr(CoTracker3Tracker, "_build", counting)
    tracker = CoTracker3Tracker(checkpoint=tmp_path / "missing.pth")
    frames = np.zeros((4, 16, 16, 3), np.uint8)
    for _ in range(3):
        with pytest.raises(ToolFault, match="checkpoint not found"):
            tracker.track(frames, grid_size=2)
    assert len(builds) == 1
