"""Which frames inspection may show (paper Sec. 3.2, DESIGN §3): any frame of a clip of at most 81 frames;
on longer clips the initial sample plus at most 16 more, each one a frame the model asked for."""

from __future__ import annotations

import pytest
from graph_scripts import full_script, make_agent, moving_square, run, tool_call

from graph.config import AgentConfig
from tools.sampling import NEARBY_EXTRA_LIMIT


def test_long_clip_gets_at_most_16_nearby_extra_frames(tmp_path):
    long_clip = moving_square(tmp_path / "long.mp4", frames=100)
    asks = [tool_call("view_frames", {"frames": [5 + 7 * k + r for r in range(5)]}, call_id=f"c{k}")
            for k in range(8)]
    agent, _ = make_agent("full", full_script(inspect=asks), max_tool_rounds=8, frame_budget=64,
                          max_images_per_call=64)
    out = run(agent, long_clip)
    sample = set(out["sample"])
    assert len(sample) == 32
    shown = {f for e in out["exchanges"] for f in e["frames"]}
    assert 0 < len(shown - sample) <= 16
    assert any("outside the allowed set" in e["text"] for e in out["exchanges"])


def test_short_clip_allows_any_frame(clip):
    agent, _ = make_agent("full", full_script(inspect=[tool_call("view_frames", {"frames": [1, 3, 5, 40]}), "ok"]))
    out = run(agent, clip)
    ex = out["exchanges"][0]
    assert ex["frames"] == [1, 3, 5] and "outside 0..32" in ex["text"]


def _outside(sample: list[int], n: int, k: int) -> list[int]:
    return [f for f in range(n) if f not in sample][:k]


def test_long_clip_shows_the_frames_asked_for_not_their_neighbours(tmp_path):
    """One request for a frame outside the sample adds that frame, not 16 of its neighbours: the allowance and
    the frame budget stay for later requests (a second request used to find the allowance spent)."""
    long_clip = moving_square(tmp_path / "long.mp4", frames=120)
    probe = run(make_agent("full")[0], long_clip, run_id="probe")
    a, b = _outside(probe["sample"], 120, 40)[10], _outside(probe["sample"], 120, 40)[30]
    asks = [tool_call("view_frames", {"frames": [a]}, call_id="c1"), tool_call("view_frames", {"frames": [b]}, call_id="c2"),
            tool_call("view_crop", {"frame": a + 1, "box": [0.2, 0.2, 0.8, 0.8]}, call_id="c3"), "done"]
    out = run(make_agent("full", full_script(inspect=asks))[0], long_clip)
    first, second, crop = out["exchanges"]
    assert first["frames"] == [a] and "added from the extra-frame allowance (15 of 16 left)" in first["text"]
    assert second["frames"] == [b] and "(14 of 16 left)" in second["text"]
    assert crop["frames"] == [a + 1] and crop["text"].startswith(f"frame {a + 1} crop")


def test_spent_allowance_shows_the_nearest_allowed_frame(tmp_path):
    long_clip = moving_square(tmp_path / "long.mp4", frames=120)
    probe = run(make_agent("full")[0], long_clip, run_id="probe")
    sample, outside = probe["sample"], _outside(probe["sample"], 120, 20)
    asks = [tool_call("view_frames", {"frames": outside[:16]}, call_id="c1"),
            tool_call("view_crop", {"frame": outside[16], "box": [0.2, 0.2, 0.8, 0.8]}, call_id="c2"), "done"]
    out = run(make_agent("full", full_script(inspect=asks), frame_budget=40)[0], long_clip)
    views, crop = out["exchanges"]
    assert views["frames"] == sorted(outside[:16]) and "(0 of 16 left)" in views["text"]
    nearest = min(sample + outside[:16], key=lambda k: (abs(k - outside[16]), k))  # the extras count
    assert crop["frames"] == [nearest]
    assert f"showing the nearest allowed frames [{nearest}]" in crop["text"]
    assert crop["text"].startswith(f"frame {nearest} crop")


def test_nearby_extra_is_bounded_by_the_design_allowance():
    # DESIGN §3 / README: a long clip shows at most 16 frames beyond its sample; nearby_extra=100 used to be
    # accepted and silently widened the access policy of a run still labelled with a paper preset
    assert AgentConfig(nearby_extra=0).nearby_extra == 0
    assert AgentConfig(nearby_extra=NEARBY_EXTRA_LIMIT).nearby_extra == NEARBY_EXTRA_LIMIT
    for bad in (-1, NEARBY_EXTRA_LIMIT + 1, 100):
        with pytest.raises(ValueError, match=f"nearby_extra must be in 0..{NEARBY_EXTRA_LIMIT}"):
            AgentConfig(nearby_extra=bad)


def test_allowance_note_counts_only_the_extra_frames_the_budget_lets_through(tmp_path):
    """The frame budget cuts a request after the allowance: an extra frame it cut was never shown and is not
    spent, so the note neither names it as added nor counts it (it said "[a, b] added (14 of 16 left)" while
    neither was shown and the next request still had 16)."""
    long_clip = moving_square(tmp_path / "long.mp4", frames=120)
    probe = run(make_agent("full")[0], long_clip, run_id="probe")
    sample, outside = probe["sample"], _outside(probe["sample"], 120, 40)
    a, b, c = outside[5], outside[25], outside[35]
    asks = [tool_call("view_frames", {"frames": [sample[0], a, b]}, call_id="c1"),
            tool_call("view_frames", {"frames": [c]}, call_id="c2"), "done"]
    out = run(make_agent("full", full_script(inspect=asks), frame_budget=2)[0], long_clip)
    first, second = out["exchanges"]
    assert first["frames"] == [sample[0], a] and "frame budget: showing 2 of 3 frames" in first["text"]
    assert f"frames [{a}] added from the extra-frame allowance (15 of 16 left)" in first["text"], first["text"]
    assert second["frames"] == [] and "frame budget: showing 0 of 1 frames" in second["text"]
    assert "added from the extra-frame allowance" not in second["text"], second["text"]


def test_surprise_frames_in_reflect_do_not_spend_the_inspection_allowance(tmp_path):
    # decision (graph.nodes.reflect): the paper limits verification to 16 extra frames; WMReward's visual reflection
    # is a separate module, so a long clip whose inspection spent the allowance still shows the surprise windows
    long_clip = moving_square(tmp_path / "long.mp4", frames=120)
    probe = run(make_agent("full")[0], long_clip, run_id="probe")
    outside = _outside(probe["sample"], 120, 40)[20:36]
    asks = [tool_call("view_frames", {"frames": outside}, call_id="c1"), "done"]
    out = run(make_agent("full", full_script(inspect=asks), frame_budget=40)[0], long_clip)
    allowed = set(out["sample"]) | {f for e in out["exchanges"] for f in e["frames"]}
    assert len(allowed - set(out["sample"])) == 16  # the allowance is spent
    reflect = next(s for s in out["steps"] if s["node"] == "reflect")
    surprise = {15, 16, 20, 23}  # FakeSurprise's window 8..23: its last context frame and 3 predicted frames
    assert surprise - allowed and surprise <= set(reflect["frames"]), reflect["frames"]


def test_viewing_sample_frames_again_costs_nothing_from_the_allowance(tmp_path):
    """The initial sample is free on a long clip: a re-look at sampled frames leaves all 16 extra frames."""
    long_clip = moving_square(tmp_path / "long.mp4", frames=120)
    probe = run(make_agent("full")[0], long_clip, run_id="probe")
    sampled, a = probe["sample"][:4], _outside(probe["sample"], 120, 10)[5]
    asks = [tool_call("view_frames", {"frames": sampled}, call_id="c1"),
            tool_call("view_frames", {"frames": [a]}, call_id="c2"), "done"]
    out = run(make_agent("full", full_script(inspect=asks))[0], long_clip)
    first, second = out["exchanges"]
    assert first["frames"] == sampled
    assert second["frames"] == [a] and "(15 of 16 left)" in second["text"]


@pytest.mark.parametrize(("n", "any_frame"), [(81, True), (82, False)])
def test_access_text_tells_the_model_the_policy_of_its_clip_length(n, any_frame):
    """The prompt's access policy follows the same 81-frame threshold the tools enforce."""
    from graph.nodes.evidence import access_text

    text = access_text(n, [0, 10, n - 1], NEARBY_EXTRA_LIMIT)
    assert (text == f"any frame 0..{n - 1}") is any_frame
    assert ("at most 16 extra frames" in text) is not any_frame
