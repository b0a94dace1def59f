"""How a reward is written for people: one rule for the console (`raa score`, `raa runs`, `raa trace`), the
eval reports and the judge's prompt.

Decision: it lives in graph/ (not evals/) because evals imports graph and graph's commands must not import
evals; `evals.report_html`, `evals.report`, `evals.report_index` and `evals.judge` import it from here.
"""

from __future__ import annotations


def reward_text(value: float | None) -> str:
    """A reward (or a mean of rewards) with 3 decimals, or a dash; a positive one that would read "0.000" (a
    direct score of 0.0004) in scientific notation: F+ counts it as positive, so no page, console or judge may
    show it as a zero. The judge's prompt, the index, the run report and the CLI all show rewards this way."""
    if value is None:
        return "-"
    shown = f"{value:.3f}"
    return f"{value:.2e}" if value > 0 and float(shown) == 0 else shown
