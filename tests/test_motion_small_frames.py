"""Motion evidence on clips smaller than the agent's grid: a clip whose short side is under `GRID_SIZE` pixels
has no room for an 8x8 grid of cell centres (`tools.motion.base.grid_points` refuses it), and the agent's grid
track (track_motion without points, reflect's automatic track) failed with a TrackQueryError there: a motion
tool fault, so every such run was ineligible although the clip itself was fine."""

from __future__ import annotations

import re

import cv2
import numpy as np
from graph_scripts import full_script, make_agent, run, tool_call

from tools.video import write_video


def small_drifting_clip(path, width: int = 12, height: int = 6, frames: int = 17):
    """A smooth texture drifting right, ``width x height`` pixels (short side under the agent's grid of 8)."""
    rng = np.random.default_rng(0)
    base = cv2.resize(cv2.GaussianBlur(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8), (0, 0), 3),
                      (width * 2, height))
    return write_video(path, np.stack([np.roll(base, t % 3, axis=1)[:, :width] for t in range(frames)]), fps=16.0)


def test_grid_track_on_a_clip_smaller_than_the_grid_is_evidence_not_a_fault(tmp_path):
    clip = small_drifting_clip(tmp_path / "small.mp4")
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 16}), "done"])
    agent, _ = make_agent("full", script, motion_prefetch="off")
    out = run(agent, clip)
    assert out["faults"] == [], out["faults"]
    text = next(x for x in out["exchanges"] if x.get("overlay"))["text"]
    points = int(re.search(r"Motion tracks: (\d+) points", text).group(1))
    assert 36 <= points <= 3 * 36, text  # a 6x6 grid (the short side) on the first frame, later ones where needed
