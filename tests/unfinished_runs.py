"""The run an evaluation folder records as not finished, asked as `raa eval report` asks it: started.json read by
`evals.eval_runs.started_run`, summary.json read once by `evals.report_index.read_summary` (`write_eval_index`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evals.eval_runs import SUMMARY, started_run, unfinished
from evals.report_index import read_summary


def unfinished_run(out: Path) -> dict[str, Any] | None:
    """The started record of the run in `out` that `raa eval report` calls unfinished; None when it calls none."""
    return unfinished(started_run(out), read_summary(out / SUMMARY))
