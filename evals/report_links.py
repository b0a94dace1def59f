"""Which run report each row of `raa eval report DIR` links to (DIR/reports/<run id>.html).

A report already in DIR/reports is linked whether or not a trace database is at hand: a copied eval folder
rebuilt on another machine lost every link (with a database, reports on disk were linked even for runs it
lacks). The database, when given, writes the reports not there yet (every one with `overwrite`); a run it
lacks or cannot read keeps the report on disk, if any, and is counted in the page's note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evals.eval_views import plural
from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S
from tools.jsonl import write_text_atomic

if TYPE_CHECKING:  # pragma: no cover
    from tools.motion import MotionTracker


@dataclass
class RunLinks:
    """Report links by run id, and what kept a run from having a fresh one."""

    database: bool
    """A trace database was given and found."""
    links: dict[str, str] = field(default_factory=dict)
    """Run id -> link relative to DIR ("reports/<name>.html")."""
    missing: int = 0
    """Runs the database lacks (linked anyway when their report is on disk)."""
    unreadable: list[str] = field(default_factory=list)
    """Runs the database holds but cannot read back (one damaged checkpoint)."""
    unreported: int = 0
    """Runs with no report on disk and no database to write one from."""

    def note(self) -> str:
        """The index header's account of the links."""
        if not self.database:
            text = "no trace database given or found: " + (
                f"{plural(len(self.links), 'run report')} linked from reports/" if self.links else "runs are not linked")
            if self.links and self.unreported:
                text += f"; {plural(self.unreported, 'run')} without a report"
            return text
        text = f"{plural(len(self.links), 'run report')} linked" + (
            f"; {plural(self.missing, 'run')} not found in the trace database" if self.missing else "")
        if self.unreadable:
            shown = ", ".join(self.unreadable[:5]) + (", ..." if len(self.unreadable) > 5 else "")
            text += f"; {plural(len(self.unreadable), 'run')} could not be read ({shown})"
        return text


def link_reports(run_ids: Iterable[str], out: Path, traces_path: str | Path | None, *,
                 tracker: MotionTracker | None = None, overwrite: bool = False,
                 on_report: Callable[[Path], None] | None = None,
                 claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> RunLinks:
    """Link every run of `run_ids` (empty ids skipped) to its report in `out`/reports, writing the reports
    the trace database can give (module docstring); `claim_max_age_s`: as `raa trace` reads a run."""
    from evals.report import safe_name

    ids = list(dict.fromkeys(i for i in run_ids if i))
    if traces_path is None or not Path(traces_path).is_file():
        found = RunLinks(database=False)
        for run_id in ids:
            target = out / "reports" / f"{safe_name(run_id)}.html"
            if target.is_file():
                found.links[run_id] = f"reports/{target.name}"
            else:
                found.unreported += 1
        return found
    from evals.report import render_run_report
    from graph.tracing import RunNotFoundError, UnreadableRunError, open_saver, read_trace

    found = RunLinks(database=True)
    saver = open_saver(traces_path, read_only=True)
    (out / "reports").mkdir(exist_ok=True)
    try:
        for run_id in ids:
            target = out / "reports" / f"{safe_name(run_id)}.html"
            if overwrite or not target.is_file():
                try:
                    trace = read_trace(saver, run_id, claim_max_age_s)
                except RunNotFoundError:
                    found.missing += 1
                    trace = None
                except UnreadableRunError:  # one damaged checkpoint: the other reports and the index still go
                    found.unreadable.append(run_id)
                    trace = None
                if trace is not None:
                    write_text_atomic(target, render_run_report(trace, tracker=tracker))
                    if on_report is not None:
                        on_report(target)
            if target.is_file():
                found.links[run_id] = f"reports/{target.name}"
    finally:
        saver.conn.close()
    return found
