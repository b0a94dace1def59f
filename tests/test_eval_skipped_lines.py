"""`raa eval compare`, `raa eval draws` and `raa eval world-model` refused a whole file over one damaged line
(a torn write, a hand edit), while `raa eval reward` skipped its bad results.jsonl lines. Now each reads the good
rows and reports every skipped line as PATH:N with its reason (stderr, and `skipped_lines` in the JSON); it exits
non-zero only when nothing is left to compare. Rows that contradict each other are still refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals import eval_cli
from evals.compare import CompareError, compare
from evals.draws import DrawsError, summarize_draws
from evals.vqa import VQAManifestError, load_vqa_manifest, read_vqa_manifest
from graph.cli import app
from tests.test_eval_cli import env  # noqa: F401 - the fixture
from tests.test_eval_compare import _scores
from tests.test_eval_draws import _draws
from tools.jsonl import LineError, SkippedLine, usable_rows

runner = CliRunner()


def _damage(path: Path) -> Path:
    """`path` with a torn line (2), a row whose status and reward disagree (3) and a Latin-1 line (4) after its
    first row; the rest of its rows follow."""
    first, *rest = path.read_text().splitlines()
    wrong = json.loads(first)
    wrong["result"] = {**wrong["result"], "status": "scored", "reward": "0.9"}
    with path.open("wb") as fh:
        fh.write((first + "\n" + first[:25] + "\n" + json.dumps(wrong) + "\n").encode())
        fh.write(b'{"path": "caf\xe9.mp4"}\n')
        fh.write("".join(line + "\n" for line in rest).encode())
    return path


def test_usable_rows_keeps_the_good_lines_and_names_each_bad_one(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n{torn\n[1, 2]\n\xff\xfe\n{"a": 2}\r\n')

    def parse(where, value):
        if not isinstance(value, dict):
            raise LineError(f"{where}: not an object")
        return value["a"]

    rows, skipped = usable_rows(f, parse)
    assert rows == [1, 2]  # the byte-order mark skipped, the blank line no row
    assert [s.line for s in skipped] == [f"{f}:3", f"{f}:4", f"{f}:5"]
    assert skipped[0].reason.startswith("not valid JSON")
    assert skipped[1] == SkippedLine(f"{f}:4", "not an object")  # the reader's reason, its place not repeated
    assert skipped[2].reason.startswith("not UTF-8 text (byte 0xff at column 1)")


def test_compare_reads_the_good_rows_and_reports_the_skipped_lines(tmp_path):
    a = _damage(_scores(tmp_path, "a", {"k1": 0.8, "k2": 0.5, "k3": 0.6}))
    b = _scores(tmp_path, "b", {"k1": 0.4, "k2": 0.5, "k3": 0.2})
    c = compare(a, b)
    assert (c.a.rows, c.pairs, c.n) == (3, 3, 3) and c.mean_diff == pytest.approx((0.4 + 0.0 + 0.4) / 3)
    assert [s.line for s in c.a.skipped_lines] == [f"{a}:2", f"{a}:3", f"{a}:4"]
    assert c.a.skipped_lines[0].reason.startswith("not valid JSON")
    assert "needs a finite number as its reward" in c.a.skipped_lines[1].reason
    assert c.a.skipped_lines[2].reason.startswith("not UTF-8 text (byte 0xe9")
    assert c.b.skipped_lines == [] and c.as_dict()["a"]["skipped_lines"][0] == {
        "line": f"{a}:2", "reason": c.a.skipped_lines[0].reason}
    # contradictions are no damage: still refused
    twice = tmp_path / "twice.jsonl"
    twice.write_text(b.read_text() * 2)
    with pytest.raises(CompareError, match="appears twice"):
        compare(twice, b)
    # nothing usable at all: an error naming each line
    junk = tmp_path / "junk.jsonl"
    junk.write_text("{torn\nnot json\n")
    with pytest.raises(CompareError, match=r"no usable row(.|\n)*junk.jsonl:1: not valid JSON(.|\n)*junk.jsonl:2"):
        compare(junk, b)


def test_compare_cli_lists_skipped_lines_and_fails_only_without_pairs(tmp_path):
    a = _damage(_scores(tmp_path, "a", {"k1": 0.8, "k2": 0.5}))
    b = _scores(tmp_path, "b", {"k1": 0.4, "k2": 0.5})
    out = tmp_path / "c.json"
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--json", str(out)])
    assert res.exit_code == 0, (res.output, res.exception)
    assert f"skipped {a}:2: not valid JSON" in res.stderr and f"skipped {a}:3: " in res.stderr
    assert "3 lines skipped" in res.stderr and "n = 2" in res.stdout
    assert [s["line"] for s in json.loads(out.read_text())["a"]["skipped_lines"]] == [f"{a}:2", f"{a}:3", f"{a}:4"]
    other = _damage(_scores(tmp_path, "other", {"k7": 0.3}))  # its good row pairs with nothing in b
    res = runner.invoke(app, ["eval", "compare", str(other), str(b)])
    assert res.exit_code == 2 and "no pair to compare, and 3 line(s) were skipped" in res.stderr


def test_draws_reads_the_good_rows_and_reports_the_skipped_lines(tmp_path):
    path = _damage(_draws(tmp_path))
    s = summarize_draws(path)
    assert (s.rows, s.clips) == (8, 4)  # every row of the undamaged file, once
    assert [x.line for x in s.skipped_lines] == [f"{path}:2", f"{path}:3", f"{path}:4"]
    twice = tmp_path / "twice.jsonl"
    twice.write_text(path.read_text(errors="replace").splitlines()[0] + "\n" + path.read_text(
        errors="replace").splitlines()[0] + "\n")
    with pytest.raises(DrawsError, match="appears twice"):
        summarize_draws(twice)
    out = tmp_path / "d.json"
    res = runner.invoke(app, ["eval", "draws", str(path), "--json", str(out)])
    assert res.exit_code == 0, (res.output, res.exception)
    assert f"skipped {path}:3: a row with status 'scored' needs a finite number" in res.stderr
    assert len(json.loads(out.read_text())["skipped_lines"]) == 3


def test_vqa_manifest_skips_a_bad_line_and_still_refuses_a_question_asked_twice(tmp_path):
    m = tmp_path / "m.jsonl"
    good = {"path": "a.mp4", "questions": [{"question": "Does it move?", "answer": "yes"}]}
    m.write_text(json.dumps(good) + "\n{oops\n" + json.dumps({"path": "b.mp4", "questions": [
        {"question": "x?", "answer": "maybe"}]}) + "\n")
    items, skipped = read_vqa_manifest(m)
    assert [Path(i.path).name for i in items] == ["a.mp4"]
    assert [(s.line, s.reason[:14]) for s in skipped] == [(f"{m}:2", "not valid JSON"), (f"{m}:3", "answer must be")]
    with pytest.raises(VQAManifestError, match=r"m\.jsonl:2: not valid JSON"):
        load_vqa_manifest(m)  # the strict reader stays strict
    m.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(VQAManifestError, match="appears twice"):
        read_vqa_manifest(m)


def test_world_model_reports_skipped_manifest_lines(env):  # noqa: F811 - the fixture
    root, _ = env
    (root / "vqa.jsonl").write_text(json.dumps({"path": "a.mp4", "questions": [
        {"question": "Does the block move right?", "answer": "yes"}]}) + "\n{torn\n")
    out = runner.invoke(eval_cli.eval_app, ["world-model", "-m", "vqa.jsonl", "-o", "wm"])
    assert out.exit_code == 0, (out.output, out.exception)
    assert "skipped " in out.stderr and "vqa.jsonl:2: not valid JSON" in out.stderr
    report = json.loads((root / "wm" / "vqa.json").read_text())
    assert report["questions"] == 1 and [s["line"].rsplit(":", 1)[1] for s in report["skipped_lines"]] == ["2"]
