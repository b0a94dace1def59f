"""A JSON integer longer than Python's int conversion limit (`sys.get_int_max_str_digits`, 4300 digits: a hand edit)
makes `json.loads` raise a plain ValueError, not JSONDecodeError. The readers below caught only JSONDecodeError, so
such a number in a file a user can edit let a traceback out where invalid JSON gets the reader's own answer: the
score-batch manifest (a bad line), `raa generate`'s generate.json (no earlier settings), a policy export's
export.json (ExportError), `raa eval report`'s summary.json (SummaryError) and started.json (no record). Each now
parses through `tools.jsonl.parsed_line`, which turns it into a JSONDecodeError."""

from __future__ import annotations

import json
import sys

import pytest

LONG = "9" * (sys.get_int_max_str_digits() + 1)
HUGE = '{"x": ' + LONG + "}"


def test_a_manifest_line_with_a_too_long_number_is_a_bad_line(tmp_path):
    from graph.batch import read_manifest

    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"path": "a.mp4", "instruction": "push", "n": ' + LONG + '}\n{broken\n')
    items = read_manifest(manifest, "full")
    assert [item["error"].split(" (")[0] for item in items] == ["line 1: not valid JSON", "line 2: not valid JSON"]
    assert "a number of more than" in items[0]["error"], items[0]["error"]


def test_generate_json_with_a_too_long_number_is_read_as_no_settings(tmp_path):
    from training.generate_folder import SETTINGS_FILE, GenerateError, claim_folder

    for name, text in (("broken", "{broken"), ("long", HUGE)):
        out = tmp_path / name
        out.mkdir()
        (out / SETTINGS_FILE).write_text(text)
        (out / "manifest.jsonl").write_text('{"path": "videos/a.mp4"}\n')
        with pytest.raises(GenerateError, match=r"other settings \(differing: \['a'\]\); choose another --out"):
            claim_folder(out, {"a": 1})


def test_export_json_with_a_too_long_number_is_an_export_error(tmp_path):
    from training.export_folder import EXPORT_FILE, ExportError, read_export

    (tmp_path / EXPORT_FILE).write_text(HUGE)
    with pytest.raises(ExportError, match=rf"^{tmp_path / EXPORT_FILE}: not valid JSON \(a number of more than"):
        read_export(tmp_path)


def test_a_summary_with_a_too_long_number_is_a_summary_error(tmp_path):
    from evals.report_index import SummaryError, read_summary

    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"presets": ["full"], "paths": ["a.mp4"]})[:-1] + ', "clips": ' + LONG + "}")
    with pytest.raises(SummaryError, match=rf"^{summary} is not valid JSON \(a number of more than"):
        read_summary(summary)


def test_a_started_record_with_a_too_long_number_is_no_record(tmp_path):
    from evals.eval_runs import STARTED
    from tests.unfinished_runs import unfinished_run

    (tmp_path / STARTED).write_text(json.dumps({"run": "abc", "manifest": "m.jsonl"})[:-1] + ', "clips": ' + LONG + "}")
    assert unfinished_run(tmp_path) is None
    (tmp_path / STARTED).write_text(json.dumps({"run": "abc", "manifest": "m.jsonl", "clips": 1}))
    assert unfinished_run(tmp_path) is not None  # the same record, readable, is a run not finished


def test_generate_json_that_is_not_utf8_is_read_as_no_settings(tmp_path):
    """A generate.json saved as Latin-1 (a hand edit) let UnicodeDecodeError out of `claim_folder`: it is
    answered as invalid JSON is, an earlier call with unknown settings."""
    from training.generate_folder import SETTINGS_FILE, GenerateError, claim_folder

    (tmp_path / SETTINGS_FILE).write_bytes(b'{"a": "caf\xe9"}')
    (tmp_path / "manifest.jsonl").write_text('{"path": "videos/a.mp4"}\n')
    with pytest.raises(GenerateError, match=r"other settings \(differing: \['a'\]\); choose another --out"):
        claim_folder(tmp_path, {"a": 1})


def test_export_json_that_is_not_utf8_is_an_export_error(tmp_path):
    """A Latin-1 export.json let UnicodeDecodeError out of `read_export`: it is an ExportError as invalid JSON is."""
    from training.export_folder import EXPORT_FILE, ExportError, read_export

    (tmp_path / EXPORT_FILE).write_bytes(b'{"format": "caf\xe9"}')
    with pytest.raises(ExportError, match=rf"^{tmp_path / EXPORT_FILE}: not valid JSON \(not UTF-8 text \(byte 0xe9 "
                                          r"at line 1 column 16\): save the file as UTF-8\)$"):
        read_export(tmp_path)


def test_generate_json_with_a_byte_order_mark_is_its_settings(tmp_path):
    """`parsed_file` reads as the repo's other readers do (`tools.jsonl.read_text`): a leading byte-order mark (a
    Windows editor's save) is skipped, where `read_text()` kept it and the folder was refused as other settings."""
    from training.generate_folder import SETTINGS_FILE, claim_folder

    (tmp_path / SETTINGS_FILE).write_bytes(b'\xef\xbb\xbf{"a": 1}')
    (tmp_path / "manifest.jsonl").write_text('{"path": "videos/a.mp4"}\n')
    claim_folder(tmp_path, {"a": 1})
    assert (tmp_path / SETTINGS_FILE).read_bytes().startswith(b"\xef\xbb\xbf")  # claimed as it was, not rewritten
