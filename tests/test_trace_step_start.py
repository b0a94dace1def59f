"""`raa trace` shows when each step started (its StepRecord's `started`, UTC), not only how long it took: the
side-by-side observe / contract steps, a wait before a stage, and the gaps between steps could not be told."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner

from graph.cli import app
from graph.trace_text import step_row
from graph.tracing import open_saver


class _State(TypedDict, total=False):
    video: str
    steps: Annotated[list[dict[str, Any]], operator.add]


STEPS = [{"node": "quality", "started": "2026-12-06T03:41:46.123456+00:00", "duration_s": 0.25, "decision": "usable"},
         {"node": "observe", "started": "2026-12-06T03:41:47.500000+00:00", "duration_s": 1.5, "decision": "3 events"},
         {"node": "assess", "duration_s": 0.5, "decision": "3 judgments"}]  # an older trace: no start recorded


def _db(tmp_path):
    def node(s: _State) -> dict:
        return {"steps": STEPS}

    g = StateGraph(_State)
    g.add_node("all", node)
    g.add_edge(START, "all")
    g.add_edge("all", END)
    db = tmp_path / "traces.sqlite"
    g.compile(checkpointer=open_saver(db)).invoke({"video": "a.mp4"}, {"configurable": {"thread_id": "run-s"}})
    return db


def test_step_row_has_the_start_time() -> None:
    assert step_row(0, STEPS[0])["started"] == "03:41:46.123"
    assert step_row(2, STEPS[2])["started"] == ""
    assert step_row(0, {**STEPS[0], "started": "not a time"})["started"] == "not a time"  # as written, not hidden


def test_trace_prints_each_steps_start_time_wide_and_narrow(tmp_path) -> None:
    db = _db(tmp_path)
    for columns in ("200", "80"):
        res = CliRunner().invoke(app, ["trace", "run-s", "--db", str(db)], env={"COLUMNS": columns})
        assert res.exit_code == 0, res.output
        assert "03:41:46.123" in res.output and "03:41:47.500" in res.output, (columns, res.output)
        assert "2026-12-06" in res.output, (columns, res.output)  # the date, once, with the run's first start


def test_every_frame_a_step_used_is_shown() -> None:
    """`raa trace` cut a step's frames to the first 12 ("... (+4)"): a repair step's last evidence frames, the
    ones most worth checking, were not shown. Runs of consecutive frames are written as ranges instead."""
    frames = [0, 1, 3, 5, 7, 9, 12, 14, 17, 18, 20, 23, 25, 27, 29, 31]
    assert step_row(0, {"node": "repair", "frames": frames})["frames"] == "0,1,3,5,7,9,12,14,17,18,20,23,25,27,29,31"
    assert step_row(0, {"node": "quality", "frames": [*range(16), *range(17, 33)]})["frames"] == "0-15,17-32"
    assert step_row(0, {"node": "reflect", "frames": [4, 5, 6, 9, 10]})["frames"] == "4-6,9,10"
