"""The frames section of a run's HTML report (`evals.report`): the sampled frames with the requirements
citing them, then every other frame the page links to (`frame_link`), each figure with its ``frame-N`` anchor."""

from __future__ import annotations

from typing import Any

from evals.report_frames import FrameStore
from evals.report_html import esc, figure, section


def frame_link(i: int) -> str:
    """A link to the figure of frame `i` on the page (`frames_section` gives every linked frame one)."""
    return f"<a href=\"#frame-{int(i)}\">{int(i)}</a>"


def _citations(v: dict[str, Any]) -> dict[int, list[str]]:
    cites: dict[int, list[str]] = {}
    for j in (v.get("assessment") or {}).get("judgments") or []:
        for f in j.get("evidence_frames") or []:
            cites.setdefault(int(f), []).append(str(j.get("requirement_id")))
    return cites


def _linked_frames(v: dict[str, Any], steps: list[dict]) -> set[int]:
    """Every frame the page links to as #frame-N (`frame_link` and the judgments' thumbnails): evidence of
    the final judgments and of the final check, observed events, frames a repair re-viewed, extra tools'
    frames."""
    linked = {int(f) for j in (v.get("assessment") or {}).get("judgments") or [] for f in j.get("evidence_frames") or []}
    linked |= {int(f) for f in (v.get("final_check") or {}).get("evidence_frames") or []}
    for e in (v.get("observation") or {}).get("events") or []:
        linked |= {int(e.get("start_frame", 0)), int(e.get("end_frame", 0))}
    linked |= {int(f) for s in steps if s.get("node") == "repair" for f in s.get("frames") or []}
    linked |= {int(f) for r in v.get("extra_evidence") or [] for f in r.get("frames") or []}
    return linked


def _frame_figure(i: int, store: FrameStore, caption: str) -> str:
    return figure(u, caption, fig_id=f"frame-{i}") if (u := store.url(i)) else f"<figure id=\"frame-{i}\">{caption}</figure>"


def frames_section(v: dict[str, Any], store: FrameStore, steps: list[dict]) -> str:
    """The sampled frames, then the frames the page links to that are not in the sample (seen during
    inspection, re-viewed by a repair): a #frame-N link to one of those went nowhere."""
    cites = _citations(v)

    def caption(i: int) -> str:
        refs = " ".join(f"<a href=\"#req-{esc(r)}\">{esc(r)}</a>" for r in cites.get(int(i), []))
        return esc(store.label(i)) + (f"<br>cited by {refs}" if refs else "")

    sample = [int(i) for i in v.get("sample") or []]
    figs = [_frame_figure(i, store, caption(i)) for i in sample]
    others = sorted(_linked_frames(v, steps) - set(sample))
    note = f"<p class=\"muted\">{esc(store.error)}</p>" if store.error else ""
    extra = (f"<h3>Other frames cited ({len(others)}, not in the sample)</h3><div class=\"grid\">"
             + "".join(_frame_figure(i, store, caption(i)) for i in others) + "</div>" if others else "")
    return section("frames", f"Sampled frames ({len(sample)})",
                   note + f"<div class=\"grid\">{''.join(figs)}</div>" + extra)
