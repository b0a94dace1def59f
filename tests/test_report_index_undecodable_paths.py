"""`raa eval report` on an evaluation of a clip whose file name is not UTF-8 (bytes Python reads back as lone
surrogates; `raa eval reward` scores and records it, its rows being ASCII JSON) crashed with a
UnicodeEncodeError writing index.html: every piece of data on a page is now written with such characters as
escapes (`evals.report_html.esc`), as fault messages are (`graph.schemas.escaped_surrogates`)."""

from __future__ import annotations

import json

from evals.report_html import esc
from evals.report_index import write_eval_index


def test_esc_writes_lone_surrogates_as_escapes():
    assert esc("clip\udcff<1>.mp4") == "clip\\udcff&lt;1&gt;.mp4"
    assert esc("plain \"é\"") == "plain &quot;é&quot;"


def test_the_index_of_a_clip_with_an_undecodable_name_is_written(tmp_path):
    row = {"path": str(tmp_path / "clip\udcff.mp4"), "instruction": "put <b>it</b> & go", "label": "ordinary",
           "pattern": "x", "task": "", "preset": "full", "reward": 0.5, "status": "scored", "reasons": [],
           "notes": [], "run_id": "r1", "usage": {}, "judge": {"status": "judged", "reasonable": True}}
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
    html = write_eval_index(tmp_path).read_text(encoding="utf-8")
    assert "clip\\udcff.mp4" in html and "put &lt;b&gt;it&lt;/b&gt; &amp; go" in html
