"""JSON the CLI writes (`raa trace --json`, `raa runs --json`, `raa score-batch`'s rows) parses with a strict
parser: a NaN or infinity somewhere in a run's state or a manifest row is written as null, never as the
`NaN` / `Infinity` that Python's json module writes by default and other JSON readers refuse."""

from __future__ import annotations

import json
import math
import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner

from graph.cli import app
from graph.schemas import RewardResult

runner = CliRunner()


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


class _State(TypedDict, total=False):
    video: str
    instruction: str
    steps: Annotated[list[dict[str, Any]], operator.add]
    extra_evidence: list[dict[str, Any]] | None
    result: RewardResult


def _run_with_non_finite_numbers(db) -> None:
    """A traced run whose state holds NaN and infinity where a run's can: an extra evidence tool's named values
    (`tools.extra.EvidenceReport.values`, any float) and a step's duration."""
    from graph.tracing import open_saver

    def node(s: _State) -> dict:
        return {"extra_evidence": [{"tool": "clf", "summary": "s", "frames": [1], "values": {"p": math.nan,
                                                                                               "q": math.inf}}],
                "steps": [{"node": "extra", "duration_s": -math.inf, "decision": "1 report"}],
                "result": RewardResult(reward=0.5, status="scored", run_id="run-nan", preset="full")}

    g = StateGraph(_State)
    g.add_node("extra", node)
    g.add_edge(START, "extra")
    g.add_edge("extra", END)
    g.compile(checkpointer=open_saver(db)).invoke({"video": "/clips/a.mp4", "instruction": "x"},
                                                  {"configurable": {"thread_id": "run-nan"}})


def test_trace_and_runs_json_write_non_finite_numbers_as_null(monkeypatch, tmp_path) -> None:
    db = tmp_path / "traces.sqlite"
    _run_with_non_finite_numbers(db)
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["trace", "run-nan", "--json"])
    assert res.exit_code == 0, res.output
    run = _strict(res.output)
    assert run["values"]["extra_evidence"][0]["values"] == {"p": None, "q": None}
    assert run["values"]["steps"][0]["duration_s"] is None and run["reward"] == 0.5
    res = runner.invoke(app, ["runs", "--json"])
    assert res.exit_code == 0, res.output
    assert [_strict(line)["run_id"] for line in res.output.splitlines()] == ["run-nan"]


def test_batch_rows_write_non_finite_manifest_fields_as_null(tmp_path) -> None:
    """Python's json reads NaN and Infinity in a manifest line; the row used to write them back as such."""
    from graph.batch import RowWriter, read_manifest, result_line
    from graph.run_results import ineligible_result

    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"path": "a.mp4", "instruction": "x", "weight": NaN, "more": [Infinity, 1.5]}\n')
    item = read_manifest(manifest, "full")[0]
    line = result_line(item, ineligible_result("full", "video: video: video file not found"))
    assert _strict(line)["manifest"] == {"weight": None, "more": [None, 1.5]}
    writer = RowWriter(tmp_path / "out.jsonl", scorer={"model": "m", "temperature": 0.0})
    writer.write(line, "ineligible")
    sent = json.dumps({**json.loads(line), "manifest": {"weight": math.nan}})  # as a worker process sent rows
    writer.write(sent, "ineligible")
    rows = [_strict(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["manifest"]["weight"] for r in rows] == [None, None] and rows[0]["scorer"]["model"] == "m"
