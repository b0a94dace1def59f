"""graph/frame_store.py on bad input: frame indices that are not integers are refused naming the clip, as
tools.video refuses them, instead of being truncated to another frame."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from graph_scripts import moving_square

from graph.frame_store import FrameStore
from tools.video import FrameIndexError


@pytest.mark.parametrize("bad", [1.5, "2", True, np.float32(3.0)])
def test_a_frame_index_that_is_not_an_integer_is_refused_naming_the_clip(tmp_path, bad):
    # int() took 1.5 as frame 1, "2" as frame 2 and True as frame 1: the wrong frame, silently
    clip = str(moving_square(tmp_path / "c.mp4"))
    store = FrameStore()
    calls = [lambda: store.frames(clip, [0, bad]), lambda: store.frame_list(clip, [bad]),
             lambda: store.prefetch(clip, [bad]), lambda: store.image_blocks(clip, [bad]),
             lambda: store.start_encoding(clip, [bad]), lambda: asyncio.run(store.ablocks(clip, [bad]))]
    for call in calls:
        with pytest.raises(FrameIndexError, match=r"c\.mp4: frame index must be an integer"):
            call()
    assert store.decoded == 0 and store.encoded == 0 and store.nbytes == 0
    assert store.frames(clip, [np.int64(2), 3]).shape == (2, 128, 128, 3)  # numpy integers are integers


def test_a_job_in_flight_stays_in_the_bounded_job_table(monkeypatch):
    """The job table dropped its oldest entry even while it ran, so the next caller of that key started a second
    copy of the same work (a surprise scoring evicted by a track prefetch was scored twice)."""
    import threading

    import graph.shared_jobs as jobs

    monkeypatch.setattr(jobs, "_MAX_JOBS", 1)
    store, gate = FrameStore(), threading.Event()
    running = store.shared_job("slow", lambda: gate.wait(30))
    store.shared_job("quick", lambda: 1).result(timeout=30)
    assert store.shared_job("slow", lambda: gate.wait(30)) is running  # reused, not started again
    gate.set()
    assert running.result(timeout=30) is True
    store.shared_job("other", lambda: 2).result(timeout=30)
    assert store.started_job("quick") is None  # finished jobs still leave the table past its bound
