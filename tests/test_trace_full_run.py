"""`raa score --stream` and `raa trace` over one scripted full-preset run through graph.cli.app: an inspect
round calling view_frames, view_crop and track_motion, WMReward surprise on, an audit -> repair -> audit loop,
and a run ended ineligible by a tool fault. Each item the issue lists for a trace is asserted on the printed
trace (wide table, narrow blocks and --json): steps in order, node, duration, decision, frames and crops,
tool summaries, numbered audit rounds, gate inputs; and the stream's lines are printed as nodes finish."""

from __future__ import annotations

import json
import re
import sys

from langchain_core.messages import AIMessage
from typer.testing import CliRunner

from graph.cli import app
from tests.graph_scripts import (
    CLEAN_AUDIT,
    FailingTracker,
    FakeSurprise,
    assessment,
    canonical,
    full_script,
    moving_square,
)
from tests.test_cli_agent import _env

runner = CliRunner()
CONTRADICTION = {"missing_requirements": [], "invented_conditions": [],
                 "contradictions": ["R3 rationale says smooth but frames show a jump"]}
CALLS = [{"id": "a", "name": "view_frames", "args": {"frames": [10, 20]}, "type": "tool_call"},
         {"id": "b", "name": "view_crop", "args": {"frame": 16, "box": [0.1, 0.2, 0.6, 0.7]}, "type": "tool_call"},
         {"id": "c", "name": "track_motion", "args": {"start_frame": 0, "end_frame": 32, "points": []},
          "type": "tool_call"}]
NODES = ["quality", "contract", "observe", "assess", "inspect", "tool_call", "inspect", "surprise", "reflect",
         "audit", "repair", "audit", "final_check", "gate"]


def _score(monkeypatch, tmp_path, tracker=None, **script):
    """Score the moving-square clip (preset full, --stream --json) with a slow scripted model and fake tools;
    returns (CliRunner result, stderr captured when reflect's model call began, run id)."""
    from graph import AgentTools, commands
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    seen: dict[str, str] = {}

    def reflect(messages, k):  # what the stream had printed when this later stage started
        sys.stderr.flush()
        seen["reflect"] = sys.stderr.buffer.getvalue().decode() if hasattr(sys.stderr.buffer, "getvalue") else ""
        return assessment()

    model = ScriptedChatModel(full_script(inspect=[AIMessage(content="", tool_calls=CALLS), "confirmed"],
                                          reflect=reflect, **script), delay_s=0.02)
    tools = AgentTools(tracker=tracker or LKTracker(), surprise=FakeSurprise())
    monkeypatch.setattr(commands, "make_chat_model", lambda settings: model)
    monkeypatch.setattr(commands, "loaded_tools", lambda settings, preset: tools)
    _env(monkeypatch, tmp_path)
    clip = moving_square(tmp_path / "m.mp4")
    res = runner.invoke(app, ["score", str(clip), "-i", "push the red block to the right", "--stream", "--json"])
    run_id = json.loads(res.stdout.strip().splitlines()[-1])["run_id"]
    return res, seen.get("reflect"), run_id


def test_full_run_stream_and_trace_show_every_item(monkeypatch, tmp_path) -> None:
    res, at_reflect, run_id = _score(monkeypatch, tmp_path, audit=[CONTRADICTION, CLEAN_AUDIT],
                                     repair=[assessment()])
    assert res.exit_code == 0, res.output
    streamed = [line.split(" (")[0] for line in res.stderr.splitlines() if re.match(r"^\w+ \(\d+\.\d\ds\): ", line)]
    assert canonical(streamed) == NODES, res.stderr  # contract/observe stream as they finish
    # printed as each node finished: the lines before reflect were out when reflect's model call began, none after
    assert at_reflect is not None and at_reflect.startswith("quality ("), at_reflect
    before = [line.split(" (")[0] for line in at_reflect.splitlines()]
    assert canonical(before) == NODES[:NODES.index("reflect")], at_reflect
    assert "tool_call (" in res.stderr and "crops=f16[0.10,0.20,0.60,0.70]" in res.stderr
    assert "audit=1" in res.stderr and "audit=2" in res.stderr and "gate=eligible=True" in res.stderr

    steps = json.loads(runner.invoke(app, ["trace", run_id, "--json"]).output)["values"]["steps"]
    assert [s["node"] for s in steps] == NODES
    assert all(isinstance(s["duration_s"], float) and s["duration_s"] >= 0 and s["decision"] for s in steps)
    by = {s["node"]: s for s in steps}
    assert by["tool_call"]["crops"] == [{"frame": 16, "box": [0.1, 0.2, 0.6, 0.7], "fallback": False, "reason": None}]
    assert {10, 16, 20}.issubset(by["tool_call"]["frames"]) and by["assess"]["frames"]
    assert by["surprise"]["frames"] == list(range(33))  # the frames the surprise scorer was given
    tools = by["tool_call"]["tool_summaries"]
    assert [t.split("(")[0] for t in tools] == ["view_frames", "view_crop", "track_motion"]
    assert tools[0].endswith(": showing frames [10, 20]") and tools[1].endswith(": frame 16 crop [0.1, 0.2, 0.6, 0.7]")
    assert "tracked frames 0..32" in tools[2] and tools[2].endswith(" ...")  # cut, and says so
    assert by["surprise"]["tool_summaries"][0].startswith("Prediction surprise")
    assert [(s["node"], s["audit_round"]) for s in steps if s["audit_round"] is not None] == \
        [("audit", 0), ("repair", 0), ("audit", 1)]
    assert by["gate"]["gate_inputs"] == {"eligible": True, "failure": False, "unverifiable": False, "gated": True,
                                         "T": 1.0, "P": 1.0, "V": 0.75, "reward": 0.9749999999999999}

    for width, table in (("250", True), ("80", False)):
        out = runner.invoke(app, ["trace", run_id], env={"COLUMNS": width}).output
        if table:
            rows = [line for line in out.splitlines() if re.match(r"^│ \d+ ", line)]
            cells = [[c.strip() for c in row.strip("│").split("│")] for row in rows]
            assert [c[1] for c in cells] == NODES and [c[0] for c in cells] == [str(i) for i in range(len(NODES))]
            assert all(re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", c[2]) for c in cells)  # each step's start (UTC)
            assert all(re.fullmatch(r"\d+\.\d\ds", c[3]) for c in cells)
            assert [c[8] for c in cells if c[8]] == ["1", "1", "2"]  # the rounds counted from 1, as repair decisions
        else:
            heads = re.findall(r"^\[(\d+)\] (\w+)  \d\d:\d\d:\d\d\.\d{3}  \d+\.\d\ds$", out, re.M)
            assert [h[1] for h in heads] == NODES and [int(h[0]) for h in heads] == list(range(len(NODES)))
            assert re.findall(r"^    audit     (\d)$", out, re.M) == ["1", "1", "2"]
            assert "view_crop({'frame': 16, 'box': [0.1, 0.2, 0.6, 0.7]}): frame 16 crop [0.1, 0.2, 0.6, 0.7]" in out
            assert "track_motion({'start_frame': 0, 'end_frame': 32, 'points': []}): tracked frames 0..32" in out
        texts = ("f16[0.10,0.20,0.60,0.70]", "scored: R = 0.975", "reward=0.975", "eligible=True", "V=0.750")
        texts += () if table else ("round 1: view_frames, view_crop, track_motion", "showing frames [10, 20]",
                                   "issues: missing [], invented 0, contradictions 1", "Prediction surprise",
                                   "eligible=True failure=False unverifiable=False gated=True T=1.000 P=1.000 "
                                   "V=0.750 reward=0.975")
        for text in texts:  # the table folds long cells: their whole text is checked in the blocks
            assert text in out, (width, text, out)


def test_trace_of_a_run_a_tool_fault_made_ineligible_shows_the_fault_and_reason(monkeypatch, tmp_path) -> None:
    res, _, run_id = _score(monkeypatch, tmp_path, tracker=FailingTracker())
    assert res.exit_code == 3, res.output
    assert "tool_call (" in res.stderr and "fault (tool): motion run: tracker crashed" in res.stderr
    out = runner.invoke(app, ["trace", run_id], env={"COLUMNS": "80"}).output
    assert "status=ineligible  reward=-" in out
    assert re.findall(r"^\[\d+\] (\w+) ", out, re.M) == ["quality", "contract", "observe", "assess", "inspect",
                                                          "tool_call", "gate"]
    assert "decision  fault (tool): motion run: tracker crashed" in out
    assert "fault: tool_call: tool: motion run: tracker crashed" in out.splitlines()
    assert "reason: tool_call: tool: motion run: tracker crashed" in out.splitlines()
    assert "gate      eligible=False" in out
    run = json.loads(runner.invoke(app, ["trace", run_id, "--json"]).output)
    assert run["status"] == "ineligible" and run["reward"] is None
    assert run["values"]["faults"] == [{"stage": "tool_call", "kind": "tool", "message": "motion run: tracker crashed"}]


def test_trace_json_values_hold_only_state_fields(monkeypatch, tmp_path) -> None:
    """`raa trace --json` printed LangGraph's own channels under "values" (the barrier of observe and contract
    before assess: "join:observe+contract:assess"): they are bookkeeping of the graph, not the run's state."""
    from graph.state import AgentState

    res, _, run_id = _score(monkeypatch, tmp_path)
    assert res.exit_code == 0, res.output
    values = json.loads(runner.invoke(app, ["trace", run_id, "--json"]).output)["values"]
    assert set(values) <= set(AgentState.__annotations__), sorted(set(values) - set(AgentState.__annotations__))
    assert {"video", "instruction", "steps", "result", "contract", "observation"} <= set(values)
