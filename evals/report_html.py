"""Small HTML building blocks for the self-contained reports (no template engine, everything escaped).

Decisions: plain f-strings with `html.escape` on every piece of data (no Jinja2 dependency); one inline
stylesheet; charts are inline SVG; images are data URLs, so a report is a single portable file.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330;background:#f6f7f9}
h1{font-size:22px;margin:0 0 6px} h2{font-size:17px;margin:26px 0 8px;border-bottom:2px solid #dde2ea;padding-bottom:4px}
section{background:#fff;border:1px solid #e1e5ec;border-radius:8px;padding:12px 16px;margin:12px 0}
table{border-collapse:collapse;font-size:13px;margin:6px 0} td,th{border:1px solid #dfe3ea;padding:4px 8px;
vertical-align:top;text-align:left} th{background:#eef1f6}
.grid{display:flex;flex-wrap:wrap;gap:8px} figure{margin:0;width:180px;font-size:11px}
figure img{width:180px;border-radius:4px;border:1px solid #ccd3de;display:block}
figure.wide{width:260px} figure.wide img{width:260px}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:12px;font-weight:600;color:#fff}
.met{background:#2e8b57}.partial{background:#d4a017}.not_met{background:#c0392b}.unverifiable{background:#7f8c8d}
.scored{background:#2e8b57}.zero{background:#c0392b}.ineligible{background:#7f8c8d}.incomplete{background:#7f8c8d}
.outage{background:#b9770e}
.yes{color:#2e8b57;font-weight:600}.no{color:#c0392b;font-weight:600}.muted{color:#6b7382}
.reward{font-size:30px;font-weight:700} code{background:#eef1f6;padding:0 3px;border-radius:3px}
"""


def esc(value: object) -> str:
    """HTML-escaped text of any value (None -> empty), its lone surrogates (a clip path that is not UTF-8) written
    as escapes (`graph.schemas.escaped_surrogates`): a page holding one could not be written as UTF-8."""
    from graph.schemas import escaped_surrogates

    return "" if value is None else html.escape(str(escaped_surrogates(str(value))), quote=True)


def page(title: str, body: str) -> str:
    """A complete HTML document with the shared stylesheet."""
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")


def section(section_id: str, title: str, inner: str) -> str:
    """A titled section with an element id (tests look the ids up)."""
    return f"<section id=\"{esc(section_id)}\"><h2>{esc(title)}</h2>{inner}</section>"


def badge(text: object, css: str | None = None, *, title: str | None = None) -> str:
    """A coloured status badge (`title`: its tooltip)."""
    tip = "" if title is None else f" title=\"{esc(title)}\""
    return f"<span class=\"badge {esc(css or text)}\"{tip}>{esc(text)}</span>"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, table_id: str | None = None,
          raw: bool = False) -> str:
    """An HTML table; cells are escaped unless `raw` (then the caller escaped them)."""
    tid = f" id=\"{esc(table_id)}\"" if table_id else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{tid}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure(data_url: str, caption: str, *, fig_id: str | None = None, wide: bool = False) -> str:
    """An inline image with a caption (caption is raw HTML: escape before passing)."""
    fid = f" id=\"{esc(fig_id)}\"" if fig_id else ""
    cls = " class=\"wide\"" if wide else ""
    return f"<figure{fid}{cls}><img src=\"{esc(data_url)}\" alt=\"frame\"><figcaption>{caption}</figcaption></figure>"


def fmt(value: float | None, digits: int = 3) -> str:
    """A number or a dash."""
    return "-" if value is None else f"{value:.{digits}f}"


_PAD_LEFT = 52
"""Left margin of the charts (room for the y ticks)."""


def _num(value: float, spec: str) -> str:
    """``value`` as ``spec``, except a fixed-point spec (``.3f``) for a value that is not 0 and below 0.01 in
    size, which is written with as many significant digits (``.3g``): a learning rate of 1e-5 or an approx_kl
    of 3e-7 read "0.000" on a chart's ticks and points."""
    if spec.endswith("f") and value != 0 and abs(value) < 0.01:
        return f"{value:{spec[:-1]}g}"
    return f"{value:{spec}}"


def _plot_frame(xs: Sequence[float], ys: Sequence[float], *, width: int, height: int, pad_t: int, x_label: str,
                y_label: str | None, y_format: str) -> tuple[Callable[[float], float], Callable[[float], float], str]:
    """The data-to-pixel maps of a chart over the points (xs, ys) and its axes, min/max ticks (y as
    ``y_format``) and labels as SVG; no y label element when ``y_label`` is None. The y range always includes
    0: it runs from min(0, ys) to max(0, ys), so all-negative values hang from a 0 tick at the top as
    all-positive ones stand on a 0 tick at the bottom."""
    pad_l, pad_r, pad_b = _PAD_LEFT, 16, 36
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(0.0, min(ys)), max(0.0, max(ys))
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = y1 if y1 > y0 else y0 + 1e-6

    def px(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * (width - pad_l - pad_r)

    def py(y: float) -> float:
        return height - pad_b - (y - y0) / (y1 - y0) * (height - pad_t - pad_b)

    axes = (f"<line x1=\"{pad_l}\" y1=\"{height - pad_b}\" x2=\"{width - pad_r}\" y2=\"{height - pad_b}\" "
            f"stroke=\"#888\"/><line x1=\"{pad_l}\" y1=\"{pad_t}\" x2=\"{pad_l}\" y2=\"{height - pad_b}\" stroke=\"#888\"/>")
    ticks = (f"<text x=\"{pad_l - 6}\" y=\"{py(y1) + 4:.1f}\" text-anchor=\"end\" font-size=\"11\">{_num(y1, y_format)}</text>"
             f"<text x=\"{pad_l - 6}\" y=\"{py(y0) + 4:.1f}\" text-anchor=\"end\" font-size=\"11\">{_num(y0, y_format)}</text>"
             f"<text x=\"{px(x0):.1f}\" y=\"{height - pad_b + 14}\" font-size=\"11\">{x0:g}</text>"
             f"<text x=\"{px(x1):.1f}\" y=\"{height - pad_b + 14}\" text-anchor=\"end\" font-size=\"11\">{x1:g}</text>"
             f"<text x=\"{(pad_l + width) / 2:.0f}\" y=\"{height - 4}\" text-anchor=\"middle\" font-size=\"12\">"
             f"{esc(x_label)}</text>")
    if y_label is not None:
        ticks += (f"<text transform=\"rotate(-90)\" x=\"{-(height - pad_b + pad_t) / 2:.0f}\" y=\"14\" "
                  f"text-anchor=\"middle\" font-size=\"12\">{esc(y_label)}</text>")
    return px, py, axes + ticks


def _no_data(chart_id: str, width: int) -> str:
    return f"<svg id=\"{esc(chart_id)}\" width=\"{width}\" height=\"40\"><text x=\"8\" y=\"24\">no data</text></svg>"


def _svg(chart_id: str, width: int, height: int, body: str) -> str:
    return (f"<svg id=\"{esc(chart_id)}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" "
            f"viewBox=\"0 0 {width} {height}\" style=\"background:#fff\">{body}</svg>")


def line_chart(xs: Sequence[float], ys: Sequence[float], *, chart_id: str, highlight: Sequence[int] = (),
               width: int = 720, height: int = 220, x_label: str = "", y_label: str = "") -> str:
    """An inline SVG polyline chart; `highlight` are point indices drawn as larger red markers. Points with a
    NaN or infinite coordinate are left out (they went into the SVG as "nan" and broke the axes)."""
    kept = [(i, float(x), float(y)) for i, (x, y) in enumerate(zip(xs, ys, strict=True))
            if math.isfinite(x) and math.isfinite(y)]
    if not kept:
        return _no_data(chart_id, width)
    px, py, frame = _plot_frame([x for _, x, _ in kept], [y for *_, y in kept], width=width, height=height, pad_t=12,
                                x_label=x_label, y_label=y_label, y_format=".3f")
    pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for _, x, y in kept)
    marks = "".join(f"<circle cx=\"{px(x):.1f}\" cy=\"{py(y):.1f}\" r=\"{5 if i in highlight else 2.5}\" "
                    f"fill=\"{'#c0392b' if i in highlight else '#2c5aa0'}\"><title>x={x:g} y={_num(y, '.4f')}</title></circle>"
                    for i, x, y in kept)
    return _svg(chart_id, width, height,
                f"{frame}<polyline fill=\"none\" stroke=\"#2c5aa0\" stroke-width=\"2\" points=\"{pts}\"/>{marks}")


PALETTE = ("#2c5aa0", "#c0392b", "#2e8b57", "#d4a017", "#7d3c98", "#16a085", "#6b7382", "#e67e22")
"""Series colours of `multi_line_chart`, in order (repeating after eight)."""


def multi_line_chart(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *, chart_id: str,
                     width: int = 520, height: int = 200, x_label: str = "") -> str:
    """An inline SVG chart of several (label, xs, ys) polylines on shared axes, with a legend. Series k has
    colour PALETTE[k] whether or not the others have points, so a run keeps its colour across charts."""
    finite = [(label, [(x, y) for x, y in zip(xs, ys, strict=True) if math.isfinite(x) and math.isfinite(y)])
              for label, xs, ys in series]  # as line_chart: a NaN or infinite point is left out
    drawn = [(k, label, [x for x, _ in pts], [y for _, y in pts]) for k, (label, pts) in enumerate(finite) if pts]
    if not drawn:
        return _no_data(chart_id, width)
    pad_t = 12 + 14 * len(drawn)
    height = max(height, pad_t + 36 + 80)
    px, py, frame = _plot_frame([x for *_, xs, _ in drawn for x in xs], [y for *_, ys in drawn for y in ys],
                                width=width, height=height, pad_t=pad_t, x_label=x_label, y_label=None, y_format=".3g")
    lines, legend = [], []
    for row, (k, label, xs, ys) in enumerate(drawn):
        colour = PALETTE[k % len(PALETTE)]
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys, strict=True))
        lines.append(f"<polyline class=\"series\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{pts}\">"
                     f"<title>{esc(label)}</title></polyline>")
        legend.append(f"<text x=\"{_PAD_LEFT + 6}\" y=\"{14 + 14 * row}\" font-size=\"12\" fill=\"{colour}\">{esc(label)}</text>")
    return _svg(chart_id, width, height, frame + "".join(lines) + "".join(legend))
