"""Self-contained HTML report of one reward-agent run (`raa report RUN_ID`).

The run is read from the checkpoint database (`graph.tracing.read_trace`, thread id = run id); frames are
re-decoded from the clip path stored in the state (`tools.video`) and inlined as JPEG data URLs. Sections
(element ids in brackets): header [run-header], result [result], gate with its inputs and the rule it applied
(`evals.report_gate`) [gate], sampled frames with the requirements citing them, then the other frames the
page links to [frames], requirement judgments [judgments], task-blind observation [observation], inspection
tool calls with crops and track overlays [inspection], automatic motion evidence [motion], the surprise curve
across windows as inline SVG [surprise, surprise-curve], reports of extra evidence tools when the run had any
[extra-evidence], audit rounds [audits], final check [final-check], faults and notes [faults], the step trace [steps].

Decisions where the issue was silent:
- Every section is always present; a module the preset did not run says so, so pages of different presets
  line up.
- Point tracks are not stored in the checkpoint (only references and the text summary), so overlays are
  re-tracked for display over the same frames with the tracker passed in (default: Lucas-Kanade, cheap and
  weight-free) and labelled as such. A tracking failure shows the plain frames with the error.
- When the clip cannot be decoded any more (moved or deleted), the page still renders with the text parts
  and says why the images are missing.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evals.report_frame_section import frame_link, frames_section
from evals.report_frames import FrameStore, load_frames, track_span, wanted_indices
from evals.report_gate import gate_section
from evals.report_html import badge, esc, figure, fmt, line_chart, page, section, table
from graph.config import PRESETS, SWITCHES, AgentConfig, preset_switches
from graph.nodes.tracking import grid_side, track_frames
from graph.reward_format import reward_text
from graph.routes import expected_nodes
from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S
from graph.trace_text import assessment_stages, audit_round_text
from tools.jsonl import write_text_atomic

if TYPE_CHECKING:  # pragma: no cover
    from graph.tracing import RunTrace
    from tools.motion import MotionTracker

WIDE_SIDE = 384


def _header(trace: RunTrace) -> str:
    v = trace.values
    result = v.get("result") or {}
    status = trace.status  # as `raa trace` says it: "running" for a run in flight with its steps saved
    reasons = "".join(f"<li>{esc(r)}</li>" for r in trace.reasons)
    usage = ", ".join(f"{k} {n}" for k, n in (v.get("usage") or result.get("usage") or {}).items())
    head = (f"<div id=\"run-header\"><h1>Reward agent run <code>{esc(trace.run_id)}</code></h1>"
            f"<div class=\"muted\">preset <b>{esc(v.get('preset') or result.get('preset'))}</b> · "
            f"checkpoint {esc(trace.updated)} · video <code>{esc(v.get('video'))}</code></div>"
            f"<p><b>Instruction:</b> {esc(v.get('instruction'))}</p></div>")
    body = (f"<div class=\"reward\">{reward_text(result.get('reward'))}</div>{badge(status)}"
            + table(["T", "P", "V", "failure", "unverifiable"],
                    [[fmt(result.get("T")), fmt(result.get("P")), fmt(result.get("V")), str(result.get("failure")),
                      str(result.get("unverifiable"))]])
            + (f"<ul>{reasons}</ul>" if reasons else "") + f"<div class=\"muted\">usage: {esc(usage)}</div>")
    return head + section("result", "Result", body)


def _gate(trace: RunTrace) -> str:
    cfg = _config(trace.values)
    return gate_section(trace, None if cfg is None else cfg.switches()["failure_gate"])


def _status(assessment: dict[str, Any], rid: str) -> str:
    """The status `assessment` gives requirement `rid` ("-" when it has no judgment of it)."""
    return str(next((j.get("status") for j in assessment.get("judgments") or [] if j.get("requirement_id") == rid),
                    "-"))


def _judgments(v: dict[str, Any], store: FrameStore, steps: list[dict[str, Any]]) -> str:
    contract = v.get("contract") or {}
    assessment = v.get("assessment") or {}
    history = v.get("assessments") or []
    if not assessment:
        return section("judgments", "Requirement judgments", "<p class=\"muted\">no structured assessment "
                       "(direct scoring or the run stopped early)</p>" + _direct(v))
    reqs = {r.get("id"): r for r in contract.get("requirements") or []}
    stages = assessment_stages(steps, len(history)) or [""] * len(history)  # who set each status
    rows = []
    for j in assessment.get("judgments") or []:
        rid = str(j.get("requirement_id"))
        req = reqs.get(rid, {})
        thumbs = "".join(f"<a href=\"#frame-{int(f)}\"><img src=\"{esc(u)}\" style=\"width:64px\" alt=\"f\"></a>"
                         for f in j.get("evidence_frames") or [] if (u := store.url(f, 96)))
        past = " → ".join(f"{stage}: {_status(a, rid)}" if stage else _status(a, rid)
                          for a, stage in zip(history, stages, strict=True))
        rows.append([f"<span id=\"req-{esc(rid)}\">{esc(rid)}</span>", esc(req.get("kind", "")),
                     esc("yes" if req.get("essential", True) else "no"), esc(req.get("text", "")),
                     badge(j.get("status")), esc(fmt(j.get("confidence"), 2)), esc(j.get("rationale")),
                     " ".join(frame_link(f) for f in j.get("evidence_frames") or []) + "<br>" + thumbs, esc(past)])
    levels = table(["rubric", "level (1..5)", "rationale"],
                   [["physical", str(assessment.get("physical_level")), str(assessment.get("physical_rationale"))],
                    ["visual", str(assessment.get("visual_level")), str(assessment.get("visual_rationale"))]])
    return section("judgments", "Requirement judgments (final assessment)",
                   table(["id", "kind", "essential", "requirement", "status", "conf.", "rationale", "evidence",
                          "history"], rows, raw=True) + levels)


def _direct(v: dict[str, Any]) -> str:
    d = v.get("direct") or {}
    return f"<p>Direct score {reward_text(d.get('reward'))}: {esc(d.get('rationale'))}</p>" if d else ""


def _config(v: dict[str, Any]) -> AgentConfig | None:
    """The run's agent config as far as its state tells: the preset, with the switches it was built with (runs
    recorded before switches were kept give the preset's)."""
    if v.get("preset") not in PRESETS:
        return None
    switches: dict[str, Any] = {k: bool(x) for k, x in (v.get("switches") or {}).items() if k in SWITCHES}
    return AgentConfig(preset=v["preset"], **switches)


def _overridden(v: dict[str, Any]) -> bool:
    """True when the run's switches differ from its preset's."""
    cfg = _config(v)
    return cfg is not None and cfg.switches() != preset_switches(cfg.preset)


def _wired(v: dict[str, Any]) -> list[str] | None:
    """The nodes the run's graph had, or None when the state does not say which preset it ran."""
    cfg = _config(v)
    return None if cfg is None else expected_nodes(cfg.resolved())


def _absent(v: dict[str, Any], steps: list[dict], node: str) -> str:
    """Why a section's stage left nothing in the state: it failed, was skipped after an earlier fault, was not
    reached, or is not in the preset."""
    fault = next((f for f in v.get("faults") or [] if f.get("stage") == node), None)
    if fault is not None:
        text = f"failed ({fault.get('kind')}): {fault.get('message')} (see Faults)"
    elif any(s.get("node") == node for s in steps):
        text = "skipped: a fault was recorded before this stage (see Faults)"
    elif (wired := _wired(v)) is not None and node not in wired:
        text = "not run in this preset" if not _overridden(v) else "not run (its module was switched off for this run)"
    elif v.get("faults") or v.get("zero"):
        text = "not reached: the run ended before this stage"
    elif wired is not None and v.get("result") is None:  # no result, no fault: it stopped between two steps
        text = "not reached: the run stopped before this stage (interrupted, or a time-travel fork not resumed yet)"
    else:
        text = "not run (its module is off in this run's config)"
    return f"<p class=\"muted\">{esc(text)}</p>"


def _observation(v: dict[str, Any], steps: list[dict]) -> str:
    obs = v.get("observation") or {}
    if not obs:
        return section("observation", "Task-blind observation", _absent(v, steps, "observe"))
    events = [[f"{frame_link(e.get('start_frame', 0))}–{frame_link(e.get('end_frame', 0))}",
               esc(e.get("description"))] for e in obs.get("events") or []]
    return section("observation", "Task-blind observation",
                   f"<p>{esc(obs.get('summary'))}</p>" + table(["frames", "event"], events, raw=True)
                   + f"<p class=\"muted\">visual issues: {esc(', '.join(obs.get('visual_issues') or []) or 'none')}</p>")


def _overlay_figs(store: FrameStore, tracked: list[int], shown: list[int], points: Any,
                  tracker: MotionTracker | None, prefix: str, query_frame: int | None = None) -> str:
    """Frames `shown` of `tracked` with tracks drawn: of `points` (fractions of the frame, on `query_frame`,
    the first tracked frame when None or not decoded), or of a grid without points (queried on several frames,
    as the agent's grid tracks are: `tools.motion.grid`)."""
    from tools.motion import build_tracker, draw_tracks_resized
    from tools.motion.grid import track_window_grid
    from tools.video import encode_jpeg_data_url, resize_long_side, uniform_indices

    have = [int(f) for f in tracked if int(f) in store.frames]
    if len(have) < 2:
        return "<p class=\"muted\">not enough decoded frames to draw tracks</p>"
    arr = np.stack([store.frames[f] for f in have])
    h, w = arr.shape[1:3]
    pos = [have.index(f) for f in shown if f in have] or uniform_indices(len(have), min(4, len(have)))
    small = [resize_long_side(arr[k], WIDE_SIDE) for k in pos]  # drawn at the shown size, so lines stay visible
    try:
        trk = tracker or build_tracker("lk")
        pts = [p for p in points or [] if isinstance(p, list | tuple) and len(p) == 2]
        query_t = float(have.index(query_frame)) if query_frame in have else 0.0
        queries = (np.array([[query_t, min(max(float(x), 0.0), 1.0) * (w - 1), min(max(float(y), 0.0), 1.0) * (h - 1)]
                             for x, y in pts], np.float32) if pts else None)
        # a grid as the agent tracks it: first, middle and last frame (tools.motion.grid), at most the short
        # side (a fixed 8 refused clips under 8 pixels: "overlay unavailable")
        tracks = trk.track(arr, queries=queries) if queries is not None else track_window_grid(trk, arr, grid_side(h, w))
        small = list(draw_tracks_resized(small, tracks, pos, (h, w)))
        note = f"point tracks over frames {have[0]}..{have[-1]} ({len(have)} frames), re-computed for display"
    except Exception as exc:  # noqa: BLE001 - show the frames without overlay
        note = f"overlay unavailable: {type(exc).__name__}: {exc}"
    figs = [figure(encode_jpeg_data_url(frame, 80), esc(store.label(have[k])),
                   fig_id=f"{prefix}-f{have[k]}", wide=True) for k, frame in zip(pos, small, strict=True)]
    return f"<p class=\"muted\">{esc(note)}</p><div class=\"grid\">{''.join(figs)}</div>"


def _inspection(v: dict[str, Any], store: FrameStore, tracker: MotionTracker | None) -> str:
    exchanges = v.get("exchanges") or []
    if not exchanges:
        plan = v.get("plan") or {}
        msg = "no inspection tool calls" + (f"; plan: {plan.get('rationale')}" if plan else "")
        return section("inspection", "Inspection", f"<p class=\"muted\">{esc(msg)}</p>")
    parts = []
    for k, ex in enumerate(exchanges):
        name = str(ex.get("name"))
        frames = [int(f) for f in ex.get("frames") or []]
        head = (f"<h3>round {esc(ex.get('round'))} · <code>{esc(name)}</code></h3>"
                f"<div class=\"muted\">args: <code>{esc(json.dumps(ex.get('args') or {}))}</code></div>"
                f"<pre style=\"white-space:pre-wrap\">{esc(ex.get('text'))}</pre>")
        if ex.get("overlay") or name == "track_motion":
            args = ex.get("args") or {}
            span = track_span(args)  # None: the model's frame numbers were not numbers, nothing was tracked
            tracked = track_frames(store.total, *span) if store.total and span is not None else []
            # the points as the run tracked them (converted to fractions, clamped) when the record has them
            points = ex["points"] if "points" in ex else args.get("points")
            body = (f"<div id=\"track-{k}\">" + _overlay_figs(store, tracked, frames, points, tracker, f"track-{k}",
                                                              ex.get("query_frame")) + "</div>")
        else:
            box = ex.get("box")
            figs = [figure(u, esc(store.label(f)) + (" (crop)" if box else ""), fig_id=f"{'crop' if box else 'view'}"
                           f"-{k}-{f}", wide=bool(box)) for f in frames if (u := store.url(f, WIDE_SIDE, box))]
            body = f"<div class=\"grid\">{''.join(figs)}</div>"
        parts.append(f"<div class=\"exchange\" id=\"exchange-{k}\">{head}{body}</div>")
    return section("inspection", f"Inspection ({len(exchanges)} tool calls)", "".join(parts))


def _motion(v: dict[str, Any], store: FrameStore, tracker: MotionTracker | None) -> str:
    m = v.get("motion") or {}
    if not m:
        return section("motion", "Motion evidence", "<p class=\"muted\">no automatic motion run "
                       "(track_motion calls, if any, are under Inspection)</p>")
    return section("motion", "Motion evidence", f"<pre style=\"white-space:pre-wrap\">{esc(m.get('summary'))}</pre>"
                   + _overlay_figs(store, list(m.get("frames") or []), [], None, tracker, "motion"))


def _surprise(v: dict[str, Any], steps: list[dict]) -> str:
    s = v.get("surprise") or {}
    if not s:
        return section("surprise", "WMReward surprise", _absent(v, steps, "surprise"))
    windows = s.get("windows") or []
    if s.get("status") != "ok" or not windows:
        return section("surprise", "WMReward surprise", f"<p class=\"muted\">status {esc(s.get('status'))}: "
                       f"no windows ({esc(s.get('num_frames'))} frames)</p>")
    tops = {(w.get("start"), w.get("end")) for w in s.get("top") or []}
    hi = [i for i, w in enumerate(windows) if (w.get("start"), w.get("end")) in tops]
    chart = line_chart([float(w.get("start", 0)) for w in windows], [float(w.get("surprise", 0)) for w in windows],
                       chart_id="surprise-curve", highlight=hi, x_label="window start frame", y_label="surprise")
    rows = [[f"{esc(w.get('start'))}–{esc(w.get('end'))}", esc(fmt(w.get("surprise"), 4))] for w in s.get("top") or []]
    return section("surprise", "WMReward surprise across windows",
                   chart + f"<p>mean {fmt(s.get('mean'), 4)}; most surprising windows (red):</p>"
                   + table(["frames", "surprise"], rows, raw=True))


def _extra(v: dict[str, Any], store: FrameStore) -> str:
    """Reports of the run's extra evidence tools (tools.extra); nothing when it had none."""
    reports = v.get("extra_evidence") or []
    if not reports:
        return ""
    rows = []
    for r in reports:
        values = ", ".join(f"{esc(k)}={esc(fmt(x, 4))}" for k, x in (r.get("values") or {}).items())
        thumbs = "".join(f"<a href=\"#frame-{int(f)}\"><img src=\"{esc(u)}\" style=\"width:64px\" alt=\"f\"></a>"
                         for f in r.get("frames") or [] if (u := store.url(f, 96)))
        rows.append([esc(r.get("tool")), esc(r.get("summary")), values,
                     " ".join(frame_link(f) for f in r.get("frames") or []) + "<br>" + thumbs])
    return section("extra-evidence", f"Extra evidence tools ({len(reports)})",
                   "<p class=\"muted\">shown to reflect as claims to check; never part of the reward</p>"
                   + table(["tool", "summary", "values", "frames"], rows, raw=True))


def _audits(v: dict[str, Any], steps: list[dict]) -> str:
    audits = v.get("audits") or []
    if not audits:
        return section("audits", "Scope audit", _absent(v, steps, "audit"))
    rows = [[str(k + 1), badge("clean" if a.get("clean") else "issues", "met" if a.get("clean") else "not_met"),
             esc("; ".join(a.get("missing_requirements") or [])), esc("; ".join(a.get("invented_conditions") or [])),
             esc("; ".join(a.get("contradictions") or []))] for k, a in enumerate(audits)]
    repairs = [[esc(audit_round_text(s.get("audit_round"))), esc(s.get("decision")),  # rounds from 1, as decisions
                " ".join(frame_link(f) for f in s.get("frames") or [])] for s in steps if s.get("node") == "repair"]
    return section("audits", f"Scope audit ({len(audits)} rounds, {v.get('repair_rounds', 0)} repairs)",
                   table(["round", "verdict", "missing", "invented", "contradictions"], rows, raw=True)
                   + (table(["repair round", "decision", "frames re-viewed"], repairs, raw=True) if repairs else ""))


def _final_check(v: dict[str, Any], steps: list[dict]) -> str:
    fc = v.get("final_check") or {}
    if not fc:
        return section("final-check", "Final check", _absent(v, steps, "final_check"))
    return section("final-check", "Final check", table(
        ["failure established", "essential unverifiable", "rationale", "frames"],
        [[esc(fc.get("failure_established")), esc(fc.get("essential_unverifiable")), esc(fc.get("rationale")),
          " ".join(frame_link(f) for f in fc.get("evidence_frames") or [])]], raw=True))


def _faults(v: dict[str, Any]) -> str:
    rows = [[esc(f.get("stage")), esc(f.get("kind")), esc(f.get("message"))] for f in v.get("faults") or []]
    notes = "".join(f"<li>{esc(n)}</li>" for n in v.get("notes") or [])
    body = (table(["stage", "kind", "message"], rows, raw=True) if rows else "<p class=\"muted\">no faults</p>")
    return section("faults", "Faults and notes", body + (f"<ul>{notes}</ul>" if notes else ""))


def _steps(steps: list[dict]) -> str:
    from graph.trace_text import step_row

    cols = ["#", "node", "duration", "decision", "frames", "crops", "tools", "audit", "gate"]
    rows = [[step_row(i, s)[c] for c in cols] for i, s in enumerate(steps)]
    return section("steps", f"Step trace ({len(steps)} steps)", table(cols, rows))


def render_run_report(trace: RunTrace, *, tracker: MotionTracker | None = None,
                      store: FrameStore | None = None) -> str:
    """The HTML page of one run (frames decoded from the state's video path unless `store` is given)."""
    v = trace.values
    stamp = (v.get("meta") or {}).get("file")  # the file the run judged: another one now shows no frames
    store = store if store is not None else load_frames(v.get("video"), wanted_indices(v), stamp)
    body = (_header(trace) + _gate(trace) + frames_section(v, store, trace.steps) + _judgments(v, store, trace.steps)
            + _observation(v, trace.steps) + _inspection(v, store, tracker) + _motion(v, store, tracker)
            + _surprise(v, trace.steps) + _extra(v, store)
            + _audits(v, trace.steps)
            + _final_check(v, trace.steps) + _faults(v) + _steps(trace.steps))
    return page(f"Run {trace.run_id}", body)


def safe_name(run_id: str) -> str:
    """A file name for a run id: the id itself when it is one already (generated ids are), else its cleaned
    form plus 8 hex of its hash, so two ids that clean alike ("a/b", "a b") never share a report file."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id)[:120] or "run"
    if cleaned == run_id:
        return cleaned
    return f"{cleaned}-{hashlib.sha256(run_id.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def write_run_report(run_id: str, out: str | Path | None, *, traces_path: str | Path,
                     tracker: MotionTracker | None = None, claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> Path:
    """Read `run_id` from the trace database and write its report (default runs/reports/<run_id>.html);
    `claim_max_age_s`: when another host's claim is stale, as `raa trace` reads it (`graph.tracing.read_trace`)."""
    from graph.tracing import open_saver, read_trace

    if not Path(traces_path).is_file():
        from graph.tracing import RunNotFoundError, no_database

        raise RunNotFoundError(no_database(Path(traces_path)))
    saver = open_saver(traces_path, read_only=True)
    try:
        trace = read_trace(saver, run_id, claim_max_age_s)
    finally:
        saver.conn.close()
    path = Path(out) if out is not None else Path("runs/reports") / f"{safe_name(run_id)}.html"
    if path.is_dir():  # named here: renamed over it, the error would name the temporary file
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    # through a temporary file, as the index pages: a write cut by a full disk keeps the page it replaces
    write_text_atomic(path, render_run_report(trace, tracker=tracker))
    return path
