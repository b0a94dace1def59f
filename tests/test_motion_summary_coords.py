"""The motion summary the model reads gives positions (track ends, region boxes) in the model's own coordinate
convention (`AgentConfig.coordinates`): track ends were pixels of the tracked frames and boxes fractions, so a
model writing fractions or thousandths that copied "(64,80)" into its next track_motion / view_crop call had it
clamped to the frame's edge. Each convention's position, read back the way the agent reads the model's points
(`tools.coords.to_unit_coords`, then ``p * (W - 1)`` tracker pixels), is the tracked position."""

from __future__ import annotations

import re

import numpy as np
import pytest
from graph_scripts import full_script, make_agent, moving_square, run, tool_call

from tools.coords import to_unit_coords
from tools.motion import MotionTracks, summarize_tracks

SIZE = (101, 201)  # (height, width) of the tracked frames: W - 1 = 200, H - 1 = 100
SHOWN = (400, 200)  # (width, height) of a "pixels" model's image


def one_mover() -> MotionTracks:
    """One point from (50, 25) to (150, 75) in 11 frames, one still point at (180, 90)."""
    t = np.linspace(0.0, 1.0, 11, dtype=np.float32)[:, None]
    mover = np.concatenate([50 + 100 * t, 25 + 50 * t], axis=1)
    still = np.tile(np.float32([[180.0, 90.0]]), (11, 1))
    return MotionTracks(tracks=np.stack([mover, still], axis=1), visible=np.ones((11, 2), bool),
                        query_frames=np.zeros(2, np.int64))


def track_ends(text: str) -> list[float]:
    m = re.search(r"track \d+: \(([-\d.]+),([-\d.]+)\) -> \(([-\d.]+),([-\d.]+)\)", text)
    assert m, text
    return [float(v) for v in m.groups()]


@pytest.mark.parametrize(("coordinates", "ends", "top_left", "phrase"), [
    ("unit", [0.25, 0.25, 0.75, 0.75], "[0.00,0.00,0.33,0.33]", "fractions of the width and height"),
    ("per_mille", [250, 250, 750, 750], "[0,0,333,333]", "thousandths of the width and height"),
    ("pixels", [100, 50, 300, 150], "[0,0,133,67]", "pixels of the 400x200 frames"),
])
def test_summary_positions_are_in_the_models_convention(coordinates, ends, top_left, phrase):
    text = summarize_tracks(one_mover(), SIZE).text(coordinates, SHOWN)
    assert track_ends(text) == pytest.approx(ends), text
    assert f"region top-left {top_left}:" in text, text
    assert phrase in text and "y grows downwards" in text, text
    # what a model copies from the summary lands on the tracked point (the agent's own reading of a point)
    w, h = SIZE[1], SIZE[0]
    unit = to_unit_coords(track_ends(text), coordinates, SHOWN)
    assert [unit[0] * (w - 1), unit[1] * (h - 1)] == pytest.approx([50, 25], abs=0.5)
    assert [unit[2] * (w - 1), unit[3] * (h - 1)] == pytest.approx([150, 75], abs=0.5)
    # displacements stay pixels of the tracked frames, and say so
    assert "111.8 px" in text and f"({w}x{h})" in text and "px are pixels" in text, text


def test_default_text_is_pixels_of_the_tracked_frames():
    """Callers outside the agent (demo, tests) read pixels of the frames the tracks are in, boxes included."""
    text = summarize_tracks(one_mover(), SIZE).text()
    assert "pixels of the 201x101 frames" in text, text
    assert track_ends(text) == pytest.approx([50, 25, 151, 76], abs=1), text
    assert "region top-left [0,0,67,34]:" in text, text


@pytest.mark.parametrize("coordinates", ["unit", "per_mille"])
def test_the_agents_summary_uses_its_coordinates(tmp_path, coordinates):
    """The same square clip through the agent with fractions, thousandths and pixels (of the 128-pixel frames
    sent): one track, one position, written three ways."""
    clip = moving_square(tmp_path / "square.mp4")

    def summary(convention: str) -> str:
        script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32}), "Seen."])
        agent, _ = make_agent("full", script, coordinates=convention)
        out = run(agent, clip)
        return next(x for x in out["exchanges"] if x.get("overlay"))["text"]

    pixels, other = summary("pixels"), summary(coordinates)
    scale = {"unit": 1 / 128, "per_mille": 1000 / 128}[coordinates]
    assert track_ends(other) == pytest.approx([v * scale for v in track_ends(pixels)], abs=scale), (other, pixels)
    assert "pixels of the 128x128 frames" in pixels
    assert {"unit": "fractions of the width", "per_mille": "thousandths of the width"}[coordinates] in other
    assert all(v <= {"unit": 1, "per_mille": 1000}[coordinates] for v in track_ends(other)), other


def test_report_overlays_track_a_grid_on_clips_smaller_than_the_grid():
    """The HTML report tracked an 8x8 grid whatever the clip: a 6-pixel clip read "overlay unavailable"."""
    from evals.report import _overlay_figs
    from evals.report_frames import FrameStore

    rng = np.random.default_rng(0)
    frames = {i: rng.integers(0, 255, (6, 10, 3), np.uint8) for i in range(4)}
    html = _overlay_figs(FrameStore(frames=frames, total=4, fps=4.0), [0, 1, 2, 3], [0, 3], None, None, "t")
    assert "overlay unavailable" not in html and "point tracks over frames 0..3" in html, html
