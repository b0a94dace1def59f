"""`raa eval report` and a results.jsonl row whose label is none of the clip suite's (a hand edit's "failrue", another
tool's row without one): F+ and P0 count rows by label, so such a row stayed in N and R but left n_neg and n_prog
without a word, and a negative clip read as an ordinary one. Refused now like the table's other unusable fields: one
error naming the line and the field, before any page is written. (`raa eval reward` takes each current row's label
from its manifest, which `evals.manifest_rows.check_row` checks.)"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evals import eval_cli


def _folder(tmp_path, label):
    ev = tmp_path / "ev"
    ev.mkdir()
    rows = [{"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": 0.9, "status": "scored"},
            {"path": str(tmp_path / "b.mp4"), "preset": "full", "reward": 0.4, "status": "scored"}]
    rows[1] = rows[1] if label is ... else {**rows[1], "label": label}
    (ev / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ev


@pytest.mark.parametrize("label", ["failrue", 5, None, ...])
def test_a_row_of_no_known_label_is_refused_naming_its_line(tmp_path, label):
    ev = _folder(tmp_path, label)
    res = CliRunner().invoke(eval_cli.eval_app, ["report", str(ev)])
    assert res.exit_code == 2, res.output
    assert f"{ev / 'results.jsonl'}:2: field 'label'" in res.output, res.output
    assert not (ev / "index.html").exists()


def test_rows_of_known_labels_are_reported(tmp_path):
    ev = _folder(tmp_path, "progress")
    res = CliRunner().invoke(eval_cli.eval_app, ["report", str(ev)])
    assert res.exit_code == 0, res.output
    assert (ev / "index.html").is_file()
