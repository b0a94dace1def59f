"""The ineligible rows `raa score-batch` writes itself carry a fault, like every row the agent writes: a bad manifest
line an "input" fault of stage "manifest", a clip whose worker died or hung on each attempt a "batch" fault, kind
"timeout" (every attempt ran past --run-timeout) or "internal" (a worker died). They had reasons and no faults, so
`evals.compare` and `evals.draws` (`Fault.outage`) counted a dead worker's row as the agent's verdict on the clip,
though `--retry-ineligible` (which they say fills the outages) scores it again; their reasons now read as their
fault's ("stage: kind: message") and the summary groups them by it."""

from __future__ import annotations

import json

from evals.table_rows import outage
from graph.batch import read_manifest, write_bad_lines
from graph.batch_deaths import death_fault
from graph.batch_output import RowWriter, fault_kind
from graph.batch_retry import retryable

HUNG = "did not finish within 3 s (its worker process was killed)"
DIED = "died (signal 9)"


def test_a_bad_manifest_lines_row_has_the_input_fault_its_reason_reads(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('\nnot json\n')
    writer = RowWriter(tmp_path / "out.jsonl")
    assert write_bad_lines(read_manifest(manifest, "full"), writer) == []
    row = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
    result = row["result"]
    assert [(f["stage"], f["kind"]) for f in result["faults"]] == [("manifest", "input")], result
    assert result["reasons"] == [f"manifest: input: {result['faults'][0]['message']}"]
    assert result["faults"][0]["message"].startswith("line 2: ")
    assert fault_kind(result)[0] == "input"  # a bad input whichever stage found it
    assert not outage(result) and not retryable(result)


def test_a_clip_whose_worker_died_or_hung_is_an_outage_of_the_batch():
    for causes, kind in (([HUNG] * 2, "timeout"), ([DIED] * 2, "internal"), ([HUNG, DIED], "internal")):
        fault = death_fault(causes)
        assert (fault.stage, fault.kind) == ("batch", kind), fault
        assert "2 attempts" in fault.message and not fault.message.startswith("batch")
        row = {"status": "ineligible", "reward": None, "reasons": [fault.reason()],
               "faults": [fault.model_dump(mode="json")]}
        assert outage(row) and retryable(row) and fault_kind(row)[0] == f"batch: {kind}"
