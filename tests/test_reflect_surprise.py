"""Which WMReward surprise windows reflect shows and which of their frames (graph.nodes.reflect): frames of the
predicted part (with the last context frame for reference), and windows that predict distinct frames, with a
scripted backbone (no network)."""

from __future__ import annotations

import re

from graph_scripts import make_agent, run

# surprise by window start (16-frame windows, stride 2, over the 33-frame clip): neighbours 2..6 share one event
SURPRISE = {0: 0.1, 2: 0.5, 4: 0.6, 6: 0.55, 8: 0.2, 10: 0.1, 12: 0.3, 14: 0.05, 16: 0.4}


class Overlapping:
    """SurpriseScorer fake: every 16-frame window at stride 2 (8 context frames), the top three neighbours."""

    def score(self, frames):
        from tools.surprise import SurpriseEvidence, SurpriseWindow

        ws = [SurpriseWindow(start=s, end=s + 15, frames=list(range(s, s + 16)), surprise=SURPRISE[s])
              for s in range(0, len(frames) - 15, 2)]
        top = sorted(ws, key=lambda w: -w.surprise)[:3]
        return SurpriseEvidence(status="ok", windows=ws, top=top, mean=0.3, num_frames=len(frames))


def surprise_images(call) -> dict[str, list[int]]:
    """Frames of the surprise images a scripted call sent, by window ("4-19"), from their labels."""
    shown: dict[str, list[int]] = {}
    for m in call.messages:
        for b in m.content if not isinstance(m.content, str) else []:
            if b.get("type") == "text" and (hit := re.match(r"frame (\d+) of \d+.*\(surprise window (\d+-\d+)\)",
                                                            b["text"])):
                shown.setdefault(hit[2], []).append(int(hit[1]))
    return shown


def test_reflect_shows_the_predicted_frames_of_a_window(clip):
    """A window's surprise is about its predicted frames (after its 8 context frames): those are shown, with the
    last context frame for reference; 4 frames spread over the whole window showed 2 context frames."""
    agent, model = make_agent("full", surprise=Overlapping(), surprise_windows=1)
    out = run(agent, clip)
    assert out["result"].status == "scored"
    call = model.calls_for("reflect")[0]
    assert surprise_images(call) == {"4-19": [11, 12, 16, 19]}  # context frame 11, predicted 12..19
    assert "frames 4..19 (predicted 12..19): surprise 0.600 (shown: context frame 11, predicted frames [12, 16, 19])" \
        in call.text()


def test_reflect_shows_windows_that_predict_distinct_frames(clip):
    """The second and third most surprising windows (6-21, 2-17) predict frames of the first (4-19): the next
    window shown is the most surprising one whose predicted frames are new (16-31), a distinct event."""
    agent, model = make_agent("full", surprise=Overlapping(), surprise_windows=2)
    run(agent, clip)
    call = model.calls_for("reflect")[0]
    assert list(surprise_images(call)) == ["4-19", "16-31"]
    assert "do not overlap" in call.text()


def test_distinct_windows_is_greedy_by_surprise():
    from graph.nodes.reflect import distinct_windows

    ws = [{"start": s, "end": s + 15, "frames": list(range(s, s + 16)), "surprise": v} for s, v in SURPRISE.items()]
    ev = {"windows": ws[::-1], "top": [], "context_frames": 8}  # order of the list does not matter
    assert [w["start"] for w in distinct_windows(ev, 5)] == [4, 16]  # the clip has room for two distinct events
    assert [w["start"] for w in distinct_windows({**ev, "context_frames": 15}, 3)] == [4, 6, 2]  # 1 predicted each
    assert distinct_windows({"windows": [], "top": ws[:1]}, 2) == ws[:1]  # evidence with only its top windows


class NoTop(Overlapping):
    """A scorer run with RAA_SURPRISE_TOP_K=0: every window scored, none listed in `top`."""

    def score(self, frames):
        return super().score(frames).model_copy(update={"top": []})


def test_reflect_picks_windows_from_all_scored_windows_without_a_top_list(clip):
    """`top` is the scorer's report (RAA_SURPRISE_TOP_K, 0 allowed); reflect chooses its own windows from all
    scored windows. With an empty `top` reflect said "ok, no windows" and showed no surprise feedback at all."""
    agent, model = make_agent("full", surprise=NoTop(), surprise_windows=2)
    run(agent, clip)
    call = model.calls_for("reflect")[0]
    assert list(surprise_images(call)) == ["4-19", "16-31"]
    assert "no windows" not in call.text()
