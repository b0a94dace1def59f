"""The HTML building blocks of the reports (`evals.report_html`): chart ranges and escaping."""

from __future__ import annotations

import re

from evals.report_html import badge, figure, line_chart, multi_line_chart, page, section, table


def _y_ticks(svg: str) -> list[float]:
    """The two y tick labels of a chart (right-aligned texts left of the plot)."""
    return [float(v) for v in re.findall(r'<text x="46" y="[\d.]+" text-anchor="end" font-size="11">([-\d.e+]+)</text>',
                                         svg)]


def test_y_range_includes_zero_for_all_negative_values():
    """All-negative values had a top tick at their maximum (-1.000), not at 0 as the docstring says."""
    svg = line_chart([0, 1, 2], [-3.0, -2.0, -1.0], chart_id="c")
    assert sorted(_y_ticks(svg)) == [-3.0, 0.0]
    svg = multi_line_chart([("a", [0, 1], [-0.5, -0.25])], chart_id="m")
    assert sorted(_y_ticks(svg)) == [-0.5, 0.0]


def test_y_range_includes_zero_for_positive_and_mixed_values():
    assert sorted(_y_ticks(line_chart([0, 1], [2.0, 3.0], chart_id="c"))) == [0.0, 3.0]
    assert sorted(_y_ticks(line_chart([0, 1], [-1.0, 2.0], chart_id="c"))) == [-1.0, 2.0]
    flat = line_chart([0, 1], [0.0, 0.0], chart_id="c")  # a flat zero series still draws (no division by 0)
    assert "nan" not in flat and "<polyline" in flat


def test_every_piece_of_data_is_escaped():
    evil = '<script>alert("x")</script>\' onload="y'
    html = page(evil, section(evil, evil, table([evil], [[evil]], table_id=evil) + badge(evil)
                              + figure(evil, "cap", fig_id=evil)
                              + line_chart([0], [1.0], chart_id=evil, x_label=evil, y_label=evil)
                              + multi_line_chart([(evil, [0], [1.0])], chart_id=evil, x_label=evil)))
    assert "<script>" not in html and 'onload="y' not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#x27; onload=&quot;y" in html


def test_non_finite_points_are_left_out_of_the_charts():
    """A NaN surprise value went into the SVG as "nan" (an unreadable chart)."""
    from evals.report_html import line_chart, multi_line_chart

    svg = line_chart([0, 1, 2, 3], [0.5, float("nan"), 1.0, float("inf")], chart_id="c", highlight=[2])
    assert "nan" not in svg and "inf" not in svg and svg.count("<circle") == 2 and 'r="5"' in svg
    assert "no data" in line_chart([0], [float("nan")], chart_id="c")
    svg = multi_line_chart([("a", [0, 1], [float("nan"), 0.2]), ("b", [0], [float("nan")])], chart_id="m")
    assert "nan" not in svg and 'class="series"' in svg and ">b<" not in svg


def test_small_values_are_not_shown_as_zero():
    """A learning rate of 1e-5 (or an approx_kl of 3e-7) read "0.000" on its ticks and "y=0.0000" on every point:
    the training report's lr and KL charts could not tell the logged value from 0."""
    svg = line_chart([1, 2], [1e-5, 3e-5], chart_id="lr")
    assert sorted(_y_ticks(svg)) == [0.0, 3e-5]
    assert "y=1e-05" in svg and "y=3e-05" in svg and "y=0.0000" not in svg
    svg = line_chart([1, 2], [-2.5e-7, 0.0], chart_id="kl")
    assert sorted(_y_ticks(svg)) == [-2.5e-7, 0.0] and "y=-2.5e-07" in svg and "y=0.0000" in svg
    assert "y=0.9000" in line_chart([1], [0.9], chart_id="r")  # ordinary values as before
    assert sorted(_y_ticks(line_chart([0, 1], [2.0, 3.0], chart_id="c"))) == [0.0, 3.0]
