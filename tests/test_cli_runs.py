"""`raa runs` and `raa trace` (graph.cli.app) over trace databases written by small graphs and scripted agent
runs: listing, filters, console widths, markup in model text, unknown run ids."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graph.cli import app
from graph.schemas import RewardResult
from tests.test_tracing import _graph

runner = CliRunner()


def test_runs_and_trace_read_the_trace_database(monkeypatch, tmp_path) -> None:
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    saver = open_saver(db)
    _graph(saver).invoke({"video": "/clips/a.mp4", "instruction": "pick the cube"},
                         {"configurable": {"thread_id": "run-aaa"}})
    _graph(saver, finish=False).invoke({"video": "/clips/b.mp4"}, {"configurable": {"thread_id": "run-bbb"}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["runs"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert res.output.index("run-bbb") < res.output.index("run-aaa")
    assert "a.mp4" in res.output and "0.620" in res.output and "incomplete" in res.output

    res = runner.invoke(app, ["trace", "run-aaa"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.index("quality") < out.index("tool_call") < out.index("R = 0.62")
    assert "view_crop" in out and "x0 >= x1" in out and "pick the cube" in out


def test_runs_filters_and_says_why(monkeypatch, tmp_path) -> None:
    from graph.tracing import open_saver
    from tests.test_tracing import _runs_of_each_status

    db = tmp_path / "traces.sqlite"
    _runs_of_each_status(open_saver(db))
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["runs", "--status", "ineligible"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "run-3" in res.output and "run-1" not in res.output and "run-2" not in res.output
    assert "[assess] timeout: no reply in 120 s" in res.output  # the why column
    res = runner.invoke(app, ["runs", "--preset", "decomposed"], env={"COLUMNS": "200"})
    assert "run-2" in res.output and "R2 not met" in res.output and "run-3" not in res.output
    res = runner.invoke(app, ["runs", "--status", "zero", "--preset", "full"])
    assert res.exit_code == 0 and "no runs with status zero, preset full" in res.output
    res = runner.invoke(app, ["runs", "--status", "failed"])
    assert res.exit_code == 2 and "--status must be one of scored, zero, ineligible, incomplete" in res.output
    res = runner.invoke(app, ["runs", "--json", "--preset", "full"])
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert [(r["run_id"], r["status"], r["reward"]) for r in rows] == [("run-3", "ineligible", None),
                                                                       ("run-1", "scored", 0.7)]
    assert rows[0]["reasons"] == ["[assess] timeout: no reply in 120 s"] and rows[1]["video"] == "1.mp4"
    res = runner.invoke(app, ["trace", "run-2", "--json"])
    run = json.loads(res.output)
    assert run["status"] == "zero" and run["values"]["result"]["reasons"] == ["failure established: R2 not met"]
    assert [s["node"] for s in run["values"]["steps"]] == ["quality", "tool_call", "gate"]


def test_model_text_in_brackets_is_printed_not_read_as_style(monkeypatch, tmp_path) -> None:
    """rich markup dropped "[red block]" and "[assess]" from tables (and a stray "[/x]" can raise)."""
    from graph.schemas import RewardResult
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    res = RewardResult(reward=0.0, status="zero", reasons=["[assess] the [red block] never moved [/x]"], run_id="r",
                       preset="full")
    _graph(open_saver(db), result=res, decision="zero: [red block] stayed at x=[0.1]").invoke(
        {"video": "/clips/[take 2].mp4"}, {"configurable": {"thread_id": "run-br"}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    out = runner.invoke(app, ["runs"], env={"COLUMNS": "250"}).output
    assert "[assess] the [red block] never moved [/x]" in out and "[take 2].mp4" in out
    out = runner.invoke(app, ["trace", "run-br"], env={"COLUMNS": "250"}).output
    assert "zero: [red block] stayed at x=[0.1]" in out and "[take 2].mp4" in out


def test_narrow_console_keeps_run_ids_and_trace_fields_whole(monkeypatch, tmp_path) -> None:
    """At 80 columns (a pipe, a small terminal) `raa runs` still prints the whole run id to copy, and
    `raa trace` switches from the nine-column table to one block per step with unbroken values."""
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    run_id = "run-0123456789ab-long-enough-to-be-cut"
    _graph(open_saver(db)).invoke({"video": "/clips/a_rather_long_clip_name.mp4", "instruction": "pick the cube"},
                                  {"configurable": {"thread_id": run_id}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["runs"], env={"COLUMNS": "80"})
    assert res.exit_code == 0 and run_id in res.output, res.output

    res = runner.invoke(app, ["trace", run_id], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "[0] quality  0.01s" in lines and any(line.startswith("[1] tool_call") for line in lines)
    assert any("decision" in line and "R = 0.62" in line for line in lines)  # one step's decision, on one line
    assert "view_crop" in res.output and "x0 >= x1" in res.output and "┃" not in res.output

    wide = runner.invoke(app, ["trace", run_id], env={"COLUMNS": "250"})
    assert wide.exit_code == 0 and "┃" in wide.output and "[0] quality" not in wide.output


def test_unknown_run_id_names_the_runs_it_may_have_meant(monkeypatch, tmp_path) -> None:
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    for rid in ("run-abc123", "run-abd999"):
        _graph(open_saver(db)).invoke({"video": "/clips/a.mp4", "instruction": "x"}, {"configurable": {"thread_id": rid}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["trace", "run-abc"])  # cut short when copied: not resolved, but named
    assert res.exit_code == 1 and "did you mean run-abc123?" in res.output and "run-abd999" not in res.output
    res = runner.invoke(app, ["trace", "run-ab"])
    assert res.exit_code == 1 and "run-abc123" in res.output and "run-abd999" in res.output
    res = runner.invoke(app, ["trace", "zzz"])
    assert res.exit_code == 1 and "did you mean" not in res.output
    res = runner.invoke(app, ["report", "run-abc", "--traces", str(db)])
    assert res.exit_code == 1 and "did you mean run-abc123?" in res.output


def test_trace_unknown_run_exits_1(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "none.sqlite"))
    res = runner.invoke(app, ["trace", "run-nope"])
    assert res.exit_code == 1 and "run-nope" in res.output
    res = runner.invoke(app, ["runs"])
    assert res.exit_code == 0 and "no runs yet" in res.output


def test_runs_at_80_columns_keeps_each_run_on_one_line(monkeypatch, tmp_path) -> None:
    """The date, the preset (longest: no_visual_verify) and the status no longer break mid-word ("no_wmrew" /
    "ard") in a pipe or a small terminal; the video name is cut with an ellipsis."""
    import re

    from graph_scripts import FakeSurprise, full_script, moving_square

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver
    from tools.motion import LKTracker

    db = tmp_path / "traces.sqlite"
    agent = build_reward_agent(AgentConfig(preset="no_visual_verify"),
                               backbone=Backbone(ScriptedChatModel(full_script()), retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()), checkpointer=open_saver(db))
    clip = moving_square(tmp_path / "a_rather_long_clip_name_from_a_sweep.mp4")
    run_ids = ["run-0123456789ab", "run-ba9876543210"]
    for run_id in run_ids:
        agent.invoke({"video": str(clip), "instruction": "push the red block to the right"},
                     {"configurable": {"thread_id": run_id}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["runs"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    for run_id in run_ids:
        row = next(line for line in lines if run_id in line)
        assert "no_visual_verify" in row and "scored" in row and re.search(r"\d\d-\d\d \d\d:\d\d", row), row
        assert re.search(r"\b0\.\d{3}\b", row), row  # graph.reward_format: 3 decimals
        assert "a_rather_" in row, row  # the start of the clip name, on the run's line


def test_runs_leaves_out_the_why_column_where_it_would_crop_the_table(monkeypatch, tmp_path) -> None:
    """With demo-length run ids the ruled table plus a 20-character "why" was wider than 110-145 columns, and
    rich cropped its right side (reasons cut to a few letters, no closing border)."""
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    run_id = "demo-013_failure_uniform_push-full-0123456789ab"
    result = RewardResult(reward=0.0, status="zero", reasons=["quality: spatially uniform content"], run_id=run_id,
                          preset="no_wmreward")
    _graph(open_saver(db), result=result).invoke({"video": "clip.mp4", "preset": "no_wmreward"},
                                                 {"configurable": {"thread_id": run_id}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    for columns in (110, 130, 200):
        out = runner.invoke(app, ["runs"], env={"COLUMNS": str(columns)}).output
        assert run_id in out and max(len(line) for line in out.splitlines()) <= columns, out
        header = next(line for line in out.splitlines() if "run id" in line)
        assert ("why" in header) == ("quality: spatially uniform content" in out) == (columns == 200), (columns, out)


def test_long_video_names_are_cut_so_each_run_stays_on_one_line_and_why_is_never_cropped(monkeypatch,
                                                                                           tmp_path) -> None:
    """The video column folded long clip names onto 2-3 lines per run (README: below 110 columns each run
    stays on one line); from 111 columns the "why" shrank with the video under its 20 characters, and rich
    kept it by cropping the table's right side (no closing border)."""
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    run_ids = ["run-0123456789ab", "run-ba9876543210", "run-aaaabbbbcccc"]
    for i, run_id in enumerate(run_ids):
        result = RewardResult(reward=0.0, status="zero", reasons=["quality: spatially uniform content"],
                              run_id=run_id, preset="full")
        _graph(open_saver(db), result=result).invoke(
            {"video": f"/clips/demo-{i:03d}_failure_uniform_push_from_a_long_sweep.mp4", "preset": "full"},
            {"configurable": {"thread_id": run_id}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    for columns in (80, 100, 110, 112, 120, 160):
        out = runner.invoke(app, ["runs", "--limit", "3"], env={"COLUMNS": str(columns)}).output
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= columns, (columns, out)
        video_lines = [line for line in lines if "demo-0" in line or "sweep" in line or ".mp4" in line]
        assert len(video_lines) == 3 and all(any(r in line for r in run_ids) for line in video_lines), (columns, out)
        header = next(line for line in lines if "run id" in line)
        assert ("why" in header) == (columns >= 112), (columns, out)
        if columns >= 110:  # the ruled table: its right border is there (nothing cropped)
            assert all(line.rstrip().endswith(("┃", "│", "┓", "┩", "┘")) for line in lines[1:] if line.strip()), out


def test_runs_of_a_database_without_runs_says_so(monkeypatch, tmp_path) -> None:
    """A trace database with no runs (just created, or every run pruned) ended `raa runs` in a TypeError from
    the table's column widths."""
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    open_saver(db)  # the tables, no run
    for columns in ("200", "80"):
        res = runner.invoke(app, ["runs", "--db", str(db)], env={"COLUMNS": columns})
        assert res.exit_code == 0 and res.exception is None, res.output
        assert f"no runs in {db}" in res.output
    res = runner.invoke(app, ["runs", "--db", str(db), "--json"])
    assert res.exit_code == 0 and res.stdout == ""  # the message goes to stderr


def test_control_characters_and_emoji_codes_in_model_text_are_shown_not_obeyed(monkeypatch, tmp_path) -> None:
    """Model text (a decision, a reason, a tool summary) and the clip's path reached the terminal as they were:
    an escape sequence in them cleared the screen or recoloured everything after it, and rich turned ":x:" into
    an emoji in tables. They are printed with the control characters written out (\\x1b) and codes kept."""
    from rich.console import Console

    from graph import commands
    from graph.trace_text import describe_update
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    res = RewardResult(reward=0.0, status="zero", reasons=["R2 \x1b[31mnot met\x1b[0m :x:\x07"], run_id="r",
                       preset="full")
    _graph(open_saver(db), result=res, decision="zero \x1b[2J:x:").invoke(
        {"video": "/clips/a\x1b]0;title\x07.mp4", "instruction": "push \x1b[1mit"},
        {"configurable": {"thread_id": "run-esc"}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    for args, columns in ((["trace", "run-esc"], "250"), (["trace", "run-esc"], "80"), (["runs"], "250")):
        out = runner.invoke(app, args, env={"COLUMNS": columns}, color=True).output  # color: as on a terminal
        assert "\x1b" not in out and "\x07" not in out, (args, columns, out)
        assert "R2 \\x1b[31mnot met\\x1b[0m :x:\\x07" in out, (args, columns, out)
        assert "a\\x1b]0;title\\x07.mp4" in out, (args, columns, out)
        if args[0] == "trace":
            assert "zero \\x1b[2J:x:" in out and "push \\x1b[1mit" in out, (args, columns, out)
    line = describe_update("gate", {"steps": [{"node": "gate", "decision": "zero \x1b[2J:x:"}]})
    assert line == "gate (): zero \\x1b[2J:x:"
    console = Console(record=True, width=200, markup=False, emoji=False)
    console.print(commands._result_table(res))
    assert "R2 \\x1b[31mnot met\\x1b[0m :x:\\x07" in console.export_text()
    assert commands._out.render_str(":x: [b]").plain == ":x: [b]"


def test_trace_header_names_the_preset_of_a_run_whose_state_lacks_it(monkeypatch, tmp_path) -> None:
    """A run that fails in the quality step (a missing clip) never writes "preset" into its state, only into its
    result: `raa runs` named the preset, `raa trace` printed "preset=-"."""
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    result = RewardResult(reward=None, status="ineligible", reasons=["quality: video: not found"], run_id="run-q",
                          preset="no_wmreward")
    _graph(open_saver(db), result=result).invoke({"video": "gone.mp4"}, {"configurable": {"thread_id": "run-q"}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["trace", "run-q"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "preset=no_wmreward" in res.output


def test_every_trace_command_takes_traces_and_db(monkeypatch, tmp_path) -> None:
    """`raa report` and `raa eval report` took `--traces` (and `--db`), `raa runs`, `raa trace` and `raa prune`
    only `--db`: the name one command taught was refused by the next. Both names now work in each."""
    from graph.tracing import open_saver

    db = tmp_path / "elsewhere.sqlite"
    _graph(open_saver(db)).invoke({"video": "/clips/a.mp4", "instruction": "pick the cube"},
                                  {"configurable": {"thread_id": "run-aaa"}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "default.sqlite"))  # not there: only the option finds runs
    for name in ("--traces", "--db"):
        res = runner.invoke(app, ["runs", "--json", name, str(db)])
        assert res.exit_code == 0 and '"run_id": "run-aaa"' in res.output, (name, res.output)
        res = runner.invoke(app, ["trace", "run-aaa", "--json", name, str(db)])
        assert res.exit_code == 0 and "pick the cube" in res.output, (name, res.output)
        res = runner.invoke(app, ["prune", "--keep", "0", "--dry-run", name, str(db)])
        assert res.exit_code == 0 and f"1 of 1 runs in {db} match" in res.output, (name, res.output)
