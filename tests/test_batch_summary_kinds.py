"""The summary `raa score-batch` prints after its counts groups the ineligible rows by stage *and* fault kind: grouped
by stage alone, one clip the model refused followed by every clip of an endpoint that went down read
"ineligible (observe): 100, first: observe: refused: ...", as if the model had refused them all, and the outage
(which --retry-ineligible fixes) was not named."""

from __future__ import annotations

import json

from graph.batch_output import RowWriter
from graph.run_results import ineligible_result
from graph.schemas import Fault


def _line(key: str, reason: str, faults: list[Fault]) -> str:
    result = ineligible_result("full", reason, faults=faults)
    return json.dumps({"key": key, "result": result.model_dump(mode="json")})


def test_ineligible_rows_are_counted_by_stage_and_kind(tmp_path) -> None:
    writer = RowWriter(tmp_path / "out.jsonl")
    refused = Fault(stage="observe", kind="refused", message="the model declined")
    down = Fault(stage="observe", kind="transport", message="APIConnectionError after 5 attempts")
    writer.write(_line("a", refused.reason(), [refused]), "ineligible")
    for i in range(3):
        writer.write(_line(f"b{i}", down.reason(), [down]), "ineligible")
    writer.write(_line("c", "input: manifest line 7: not valid JSON (Expecting value at column 1)", []),
                 "ineligible")
    writer.write(_line("d", "batch: the worker process scoring this clip died (signal 9) on each of 2 attempts",
                       []), "ineligible")
    assert writer.faults == {
        "observe: refused": (1, "observe: refused: the model declined"),
        "observe: transport": (3, "observe: transport: APIConnectionError after 5 attempts"),
        "input": (1, "input: manifest line 7: not valid JSON (Expecting value at column 1)"),
        "batch": (1, "batch: the worker process scoring this clip died (signal 9) on each of 2 attempts"),
    }


def test_removed_lines_say_only_what_was_removed(tmp_path):
    """Only zero rows of changed clips removed read "0 ineligible row(s) removed ..." beside them: a retry that
    removed no ineligible row said it removed some kind of row twice, once falsely."""
    from graph.batch_resume import removed_lines

    out = tmp_path / "out.jsonl"
    changed, = removed_lines({"retry": 0, "changed": 2, "updated": 0}, out)
    assert changed.startswith("2 zero row(s) whose clip changed") and "ineligible" not in changed, changed
    assert removed_lines({"retry": 3, "changed": 0, "updated": 0}, out) == [
        f"3 ineligible row(s) removed from {out} to score again"]
    assert len(removed_lines({"retry": 1, "changed": 1, "updated": 0}, out)) == 2
    assert removed_lines({"retry": 0, "changed": 0, "updated": 0}, out) == [
        f"0 ineligible row(s) removed from {out} to score again"]  # nothing removed: said, as before
