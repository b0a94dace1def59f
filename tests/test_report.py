"""HTML reports: one agent run (`raa report`) and an evaluation index (`raa eval report`), end to end
with a scripted backbone, real LK tracks and traces in a SQLite checkpoint database; browser checks in
headless Chromium (marked `browser`, skipped when chromium is missing)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from graph_scripts import CLEAN_AUDIT, full_script, moving_square, tool_call, uniform_clip

from evals.judge import JudgeSettings, RewardJudge
from evals.reliability import run_reward_eval
from evals.report import render_run_report, write_run_report
from evals.report_index import write_eval_index
from evals.reward_scorer import AgentScorer, EvalClip
from graph.backbone import Backbone
from graph.builder import default_checkpointer
from graph.context import AgentTools
from graph.testing import ScriptedChatModel
from graph.tracing import RunNotFoundError, open_saver, read_trace
from tests.disk_faults import half_then_full_disk
from tools.motion import LKTracker

RUN_IDS = ("run-section", "run-header", "result", "gate", "frames", "judgments", "observation", "inspection",
           "motion", "surprise", "audits", "final-check", "faults", "steps")


class WindowsSurprise:
    """SurpriseScorer fake: six windows, the fourth most surprising."""

    def score(self, frames):
        from tools.surprise import SurpriseEvidence, SurpriseWindow

        ws = [SurpriseWindow(start=s, end=s + 15, frames=list(range(s, s + 16)), surprise=v)
              for s, v in zip(range(0, 12, 2), (0.1, 0.15, 0.12, 0.6, 0.2, 0.18), strict=True)]
        return SurpriseEvidence(status="ok", windows=ws, top=[ws[3], ws[4]], mean=float(np.mean([w.surprise for w in ws])),
                                num_frames=len(frames))


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    clips = [EvalClip(str(moving_square(root / "push.mp4")), "push the red block to the right", "ordinary",
                      "success", "push"),
             EvalClip(str(uniform_clip(root / "flat.mp4")), "push the red block to the right", "failure",
                      "uniform", "push")]
    script = full_script(
        inspect=[tool_call("view_crop", {"frame": 10, "box": [0.1, 0.3, 0.7, 0.7]}, "c1"),
                 tool_call("track_motion", {"start_frame": 0, "end_frame": 32, "points": [[0.3, 0.5]]}, "c2"),
                 "The crop and the tracks confirm R1 and R2."],
        audit=[{"missing_requirements": ["R3"], "invented_conditions": [], "contradictions": []}, CLEAN_AUDIT])
    model = ScriptedChatModel(script)
    traces = root / "traces.sqlite"
    scorer = AgentScorer(backbone=Backbone(model, max_retries=0, retry_wait=(0.0, 0.0)),
                         tools=AgentTools(tracker=LKTracker(), surprise=WindowsSurprise()),
                         checkpointer=default_checkpointer(traces), max_concurrency=2)
    judge = RewardJudge.from_settings(JudgeSettings(), model=ScriptedChatModel(
        {"judge": [{"reasonable": True, "rationale": "fits the frames"}]}))
    out = asyncio.run(run_reward_eval(clips, ["full", "direct"], root / "eval", scorer, judge))
    return root, traces, out


def _trace(traces: Path, run_id: str):
    saver = open_saver(traces)
    try:
        return read_trace(saver, run_id)
    finally:
        saver.conn.close()


def test_run_report_has_every_section_and_inlined_images(evaluation):
    root, traces, out = evaluation
    row = next(r for r in out.rows if r["preset"] == "full" and r["label"] == "ordinary")
    assert row["status"] == "scored", row["reasons"]
    path = write_run_report(row["run_id"], root / "one.html", traces_path=traces)
    html = path.read_text()
    for section_id in RUN_IDS[1:]:
        assert f'id="{section_id}"' in html, section_id
    assert 'id="surprise-curve"' in html and "<polyline" in html
    assert html.count("data:image/jpeg;base64,") >= 32  # 32 sampled frames at least, all inline
    assert "src=\"http" not in html and "file://" not in html  # self-contained
    assert re.search(r'id="crop-\d+-10"', html)  # the inspected crop of frame 10
    assert re.search(r'id="track-\d+-f\d+"', html)  # track overlays
    assert 'id="req-R1"' in html and 'href="#req-R1"' in html  # frames link to the judgments citing them
    assert "repair" in html and "R3" in html  # the audit round that found R3 missing, then the repair


def test_report_without_video_still_renders(evaluation):
    _, traces, out = evaluation
    row = next(r for r in out.rows if r["preset"] == "full" and r["label"] == "ordinary")
    trace = _trace(traces, row["run_id"])
    trace.values["video"] = "/nonexistent/clip.mp4"
    html = render_run_report(trace)
    assert "frames unavailable" in html and 'id="judgments"' in html and "data:image" not in html


def test_report_of_a_refused_track_call_with_non_numeric_frames_renders(evaluation):
    """The model's raw args of an invalid track_motion call went to int(): "start_frame": "begin" crashed
    the whole run report (and `raa eval report` with it)."""
    _, traces, out = evaluation
    row = next(r for r in out.rows if r["preset"] == "full" and r["label"] == "ordinary")
    trace = _trace(traces, row["run_id"])
    trace.values["exchanges"] = [*trace.values.get("exchanges", []),
                                 {"round": 0, "call_id": "bad", "name": "track_motion", "frames": [], "box": None,
                                  "overlay": False, "args": {"start_frame": "begin", "end_frame": None},
                                  "text": "invalid arguments for track_motion: ..."}]
    html = render_run_report(trace)
    assert "invalid arguments for track_motion" in html and "&quot;begin&quot;" in html


def test_unknown_run_raises(evaluation, tmp_path):
    _, traces, _ = evaluation
    with pytest.raises(RunNotFoundError):
        write_run_report("run-nope", tmp_path / "x.html", traces_path=traces)
    with pytest.raises(RunNotFoundError):
        write_run_report("run-nope", tmp_path / "x.html", traces_path=tmp_path / "missing.sqlite")


def test_eval_index_links_every_run(evaluation):
    root, traces, out = evaluation
    written = []
    index = write_eval_index(root / "eval", traces_path=traces, on_report=written.append)
    html = index.read_text()
    assert 'id="table2"' in html and 'id="clip-table"' in html
    assert "Full Reward Agent" in html and "Direct base-model scoring" in html
    links = re.findall(r'class="run-link" href="(reports/[^"]+)"', html)
    assert len(links) == 4 and len(written) == 4  # 2 clips x 2 presets
    assert all((root / "eval" / link).is_file() for link in links)
    again = write_eval_index(root / "eval", traces_path=traces, on_report=written.append)
    assert len(written) == 4 and again == index  # existing reports are kept
    # without the database (a copied folder, another machine) the reports already written are still linked
    plain = write_eval_index(root / "eval", traces_path=None).read_text()
    assert re.findall(r'class="run-link" href="(reports/[^"]+)"', plain) == links
    assert "no trace database given or found: 4 run reports linked" in plain and len(written) == 4


# --- headless Chromium -------------------------------------------------------------------------------

def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browser(html: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on ``html`` under `tests.launches.launch`: its zygote, renderer and GPU processes held the
    output pipes, so past ``subprocess.run``'s timeout (which killed the browser process alone) they lived on and
    ``run`` read the pipes for ever; now every process of it is killed and the test fails."""
    from tests.launches import launch

    exe = _chromium()
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp / 'profile'}", "--window-size=1280,2000", *args, html.resolve().as_uri()]
    return launch(cmd, timeout=120, what="headless chromium")


def _check_page(html: Path, tmp: Path, ids: tuple[str, ...], images: int) -> None:
    from PIL import Image

    shot = tmp / f"{html.stem}.png"  # kept in pytest's tmp dir for a look
    _browser(html, tmp, f"--screenshot={shot}")
    assert shot.is_file(), "chromium wrote no screenshot"
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert pixels.shape[0] >= 1000 and pixels.std() > 10.0, f"blank-looking screenshot (std {pixels.std():.1f})"
    dom = _browser(html, tmp, "--dump-dom").stdout
    missing = [i for i in ids if f'id="{i}"' not in dom]
    assert not missing, f"elements missing from the rendered DOM: {missing}"
    assert dom.count("<img") >= images


@pytest.mark.browser
def test_reports_render_in_headless_chromium(evaluation, tmp_path):
    if _chromium() is None:
        pytest.skip("chromium is not installed")
    root, traces, out = evaluation
    row = next(r for r in out.rows if r["preset"] == "full" and r["label"] == "ordinary")
    page = write_run_report(row["run_id"], tmp_path / "run.html", traces_path=traces)
    _check_page(page, tmp_path, RUN_IDS[1:] + ("surprise-curve",), images=32)
    index = write_eval_index(root / "eval", traces_path=traces)
    _check_page(index, tmp_path, ("eval-header", "table", "table2", "extras", "clips", "clip-table"), images=2)


def test_empty_sections_say_why(evaluation):
    """A section whose stage left nothing says whether it failed, was not reached or is not in the preset."""
    _, traces, out = evaluation
    rows = {(r["preset"], r["label"]): r for r in out.rows}
    zeroed = render_run_report(_trace(traces, rows[("full", "failure")]["run_id"]))
    assert zeroed.count("not reached: the run ended before this stage") >= 3  # observation, surprise, audits
    for label in ("ordinary", "failure"):  # a zeroed clip of a preset without those stages: not in the preset
        direct = render_run_report(_trace(traces, rows[("direct", label)]["run_id"]))
        assert direct.count("not run in this preset") >= 3 and "not reached" not in direct
    # a run of full built with WMReward switched off (AgentConfig(preset="full", wmreward=False)), zeroed:
    # its surprise section is off by the override, not "not reached", though the preset label says full
    overridden = _trace(traces, rows[("full", "failure")]["run_id"])
    overridden.values["switches"] = {**overridden.values["switches"], "wmreward": False}
    page = render_run_report(overridden)
    assert page.count("not run (its module was switched off for this run)") == 1
    assert page.count("not reached: the run ended before this stage") == zeroed.count("not reached") - 1
    # a run stopped mid-way (a killed process with per-step checkpoints, a fork not resumed): wired stages
    # not reached, not "switched off"
    stopped = _trace(traces, rows[("full", "ordinary")]["run_id"])
    for key in ("audits", "final_check", "result"):
        stopped.values.pop(key, None)
    stopped.steps = [st for st in stopped.steps if st["node"] not in ("audit", "repair", "final_check", "gate")]
    page = render_run_report(stopped)
    assert page.count("not reached: the run stopped before this stage") >= 2 and "module is off" not in page
    trace = _trace(traces, rows[("full", "ordinary")]["run_id"])
    trace.values.pop("surprise")
    trace.values["faults"] = [{"stage": "surprise", "kind": "tool", "message": "surprise run: CUDA out of memory"}]
    failed = render_run_report(trace)
    assert "failed (tool): surprise run: CUDA out of memory (see Faults)" in failed


def test_report_track_overlays_use_the_points_as_tracked(tmp_path):
    """The report re-tracked a track_motion call from its raw args on the first tracked frame: per-mille
    points were clamped to the frame's corner, and a reversed stretch's points sat on the wrong frame."""
    from graph_scripts import make_agent, run

    from graph.tracing import read_trace

    class Recording(LKTracker):
        def __init__(self):
            super().__init__()
            self.queries = []

        def track(self, frames, *, grid_size=None, queries=None):
            self.queries.append(None if queries is None else np.array(queries))
            return super().track(frames, grid_size=grid_size, queries=queries)

    call = tool_call("track_motion", {"start_frame": 30, "end_frame": 10, "points": [[300, 500]]})
    agent, _ = make_agent("full", full_script(inspect=[call, "The tracks confirm R1."]), coordinates="per_mille")
    out = run(agent, moving_square(tmp_path / "m.mp4"))
    ex = out["exchanges"][0]
    assert ex["points"] == [[0.3, 0.5]] and ex["query_frame"] == 30
    tracker = Recording()
    html = render_run_report(read_trace(agent.checkpointer, "run-test"), tracker=tracker)
    assert re.search(r'id="track-0-f\d+"', html)
    (q,) = [q for q in tracker.queries if q is not None]
    tracked = 30 - 10 + 1
    h = w = 128  # moving_square's frames
    assert q.shape == (1, 3) and q[0, 0] == tracked - 1  # frame 30, the stretch's last tracked frame
    assert q[0, 1] == pytest.approx(0.3 * (w - 1)) and q[0, 2] == pytest.approx(0.5 * (h - 1))


def test_run_ids_that_clean_alike_get_their_own_report_files():
    """"a/b" and "a b" both became a_b.html: one run's report overwrote (or stood in for) the other's."""
    from evals.report import safe_name

    assert safe_name("run-0123456789ab") == "run-0123456789ab"  # generated ids keep their plain name
    names = {safe_name(r) for r in ("a/b", "a b", "a_b", "", "x" * 200, "x" * 201)}
    assert len(names) == 6 and all("/" not in n and " " not in n for n in names)


def test_a_run_report_cut_by_a_full_disk_leaves_the_page_it_replaces(evaluation, monkeypatch):
    """`raa report` writes through a temporary file: a write that fails half way (a full disk) left a cut page."""
    root, traces, out = evaluation
    row = next(r for r in out.rows if r["preset"] == "full" and r["label"] == "ordinary")
    page = root / "kept.html"
    page.write_text("<!DOCTYPE html><html><body>the earlier page</body></html>\n")
    monkeypatch.setattr(Path, "write_text", half_then_full_disk)
    with pytest.raises(OSError):
        write_run_report(row["run_id"], page, traces_path=traces)
    monkeypatch.undo()
    assert page.read_text() == "<!DOCTYPE html><html><body>the earlier page</body></html>\n"
    assert [p.name for p in root.iterdir() if p.name.startswith(".kept")] == []
