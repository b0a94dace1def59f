"""The batch summary's "ineligible (LABEL)" lines: a bad input counts as "input" whichever stage found it.

An empty instruction is found by the quality node, so its reason reads "quality: input: instruction is empty ...";
the summary grouped by the text before the first colon and counted it as "ineligible (quality)", beside the
clips that could not be decoded, while a manifest line with no instruction field counted as "(input)".
"""

from __future__ import annotations

import json

from graph.batch_output import RowWriter


def _ineligible(reason: str) -> str:
    return json.dumps({"key": reason, "result": {"status": "ineligible", "reward": None, "reasons": [reason]}})


def test_an_input_fault_of_any_stage_counts_as_input(tmp_path):
    writer = RowWriter(tmp_path / "out.jsonl")
    for reason in ("input: manifest line 5: not valid JSON", "quality: input: instruction is empty or whitespace only",
                   "quality: video: VideoDecodeError: c.mp4: cannot be opened", "assess: timeout: no reply"):
        writer.write(_ineligible(reason), "ineligible")
    assert {label: n for label, (n, _) in writer.faults.items()} == {"input": 2, "quality": 1, "assess": 1}
    assert writer.faults["input"][1] == "input: manifest line 5: not valid JSON"


def test_a_recorded_input_fault_counts_as_input(tmp_path):
    writer = RowWriter(tmp_path / "out.jsonl")
    reason = "quality: input: instruction is empty or whitespace only"
    row = {"key": "k", "result": {"status": "ineligible", "reward": None, "reasons": [reason],
                                  "faults": [{"stage": "quality", "kind": "input", "message": "instruction is empty"}]}}
    writer.write(json.dumps(row), "ineligible")
    assert {label: n for label, (n, _) in writer.faults.items()} == {"input": 1}
