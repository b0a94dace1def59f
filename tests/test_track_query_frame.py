"""track_motion's points lie on start_frame (its schema says so): they are queried on that frame's
position among the tracked frames, also for a reversed stretch and for a one-frame stretch widened
at the clip's end (both were queried on the first tracked frame, i.e. on the wrong frame)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from graph_scripts import full_script, make_agent, run, tool_call

from graph.nodes.tracking import track_frames
from tools.motion import LKTracker


class RecordingTracker(LKTracker):
    """LK, recording the queries it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[np.ndarray] = []

    def track(self, frames, *, grid_size=None, queries=None):  # noqa: ANN001, ANN201 (protocol)
        if queries is not None:
            self.queries.append(np.array(queries))
        return super().track(frames, grid_size=grid_size, queries=queries)


@pytest.mark.parametrize(("start", "end", "frame"), [(30, 10, 30), (10, 30, 10), (32, 32, 32), (0, 0, 0),
                                                      (50, 10, 32), (5, 5, 5), (31, 0, 31)])
def test_query_index_names_the_start_frame(start, end, frame):
    from graph.nodes.tracking import query_index

    assert track_frames(33, start, end)[query_index(33, start, end)] == frame


def track_text(clip, args: dict) -> tuple[str, np.ndarray]:
    """(the track_motion result text, the tracker's query rows) for one scripted call (pixel coordinates)."""
    tracker = RecordingTracker()
    script = full_script(inspect=[tool_call("track_motion", args), "done"])
    agent, _ = make_agent("full", script, tracker=tracker, coordinates="pixels", motion_prefetch="off")
    out = run(agent, clip)
    return next(x for x in out["exchanges"] if x.get("overlay"))["text"], tracker.queries[0]


def test_reversed_stretch_queries_the_point_on_start_frame(clip):
    """The square covers x 90..113, y 48..79 on frame 30 and x 35..58 on frame 10: its corner (91, 49) given
    on start_frame 30 is followed back to frame 10 (it was queried on frame 10, on the background)."""
    text, queries = track_text(clip, {"start_frame": 30, "end_frame": 10, "points": [[91, 49]]})
    idx = track_frames(33, 30, 10)
    assert idx[int(queries[0, 0])] == 30
    assert "1 points moved" in text, text
    start, end = [[float(v) for v in m] for m in re.findall(r"\(([-\d.]+),([-\d.]+)\)", text.split("- track 0:")[1])[:2]]
    assert abs(end[0] - 90) <= 2 and abs(start[0] - 36) <= 3, text  # clip order: frame 10 -> frame 30


def test_one_frame_stretch_at_the_last_frame_queries_that_frame(clip):
    """A one-frame stretch at the clip's last frame widens to frames 31..32: the point is queried on 32."""
    _, queries = track_text(clip, {"start_frame": 32, "end_frame": 32, "points": [[100, 64]]})
    assert track_frames(33, 32, 32)[int(queries[0, 0])] == 32
