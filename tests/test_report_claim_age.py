"""`raa report` and `raa eval report` read a run as `raa trace` does: `write_run_report` and `link_reports` read
the trace with the 6 h default claim age whatever RAA_FOREIGN_CLAIM_MAX_AGE_S said, and the page's header showed
the result's status only, so a run in flight with its steps saved (durability "async") read "incomplete" there
while `raa trace` said it was running; one claimed by a crashed host was "still running" to `raa report`."""

from __future__ import annotations

import datetime as dt

from typer.testing import CliRunner

from tests.test_claim_age_setting import _foreign_claims
from tests.test_retention import _traces

NOW = dt.datetime.now(dt.UTC)


def test_raa_report_of_a_claimed_run_without_a_trace_ages_the_claim_as_configured(tmp_path):
    from graph.cli import app
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    open_saver(db).conn.close()
    _foreign_claims(db, [("r-crashed", dt.timedelta(minutes=10))])
    for age, said in ((None, "has no trace yet"), ("300", "died, no trace saved")):
        env = {"RAA_TRACES_PATH": str(db)} | ({} if age is None else {"RAA_FOREIGN_CLAIM_MAX_AGE_S": age})
        res = CliRunner().invoke(app, ["report", "r-crashed", "--out", str(tmp_path / "r.html")], env=env)
        assert res.exit_code == 1 and said in res.output, (age, res.output)


def test_a_report_says_a_run_in_flight_with_steps_saved_is_running(tmp_path):
    from evals.report import write_run_report
    from evals.report_links import link_reports

    db = tmp_path / "traces.sqlite"
    _traces(db, [("r-flight", NOW - dt.timedelta(minutes=1), "incomplete")])
    _foreign_claims(db, [("r-flight", dt.timedelta(minutes=10))])
    for age, status in ((3600.0, "running"), (300.0, "incomplete")):
        page = write_run_report("r-flight", tmp_path / f"{status}.html", traces_path=db,
                                claim_max_age_s=age).read_text()
        assert f'<span class="badge {status}">{status}</span>' in page, (age, page[:2000])
        assert ("crashed-node-17" in page) == (status == "running")
        out = tmp_path / f"index-{status}"
        out.mkdir()
        assert link_reports(["r-flight"], out, db, claim_max_age_s=age).links == {"r-flight": "reports/r-flight.html"}
        assert f'<span class="badge {status}">{status}</span>' in (out / "reports" / "r-flight.html").read_text()
