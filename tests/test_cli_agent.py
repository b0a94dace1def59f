"""The agent CLI (`raa score`, `score-batch`) driven through graph.cli.app (`runs` and `trace`: test_cli_runs.py;
score-batch resuming and --retry-ineligible: test_cli_score_batch.py).

Commands run against a local OpenAI-compatible stub server (RAA_* set with monkeypatch.setenv: the CLI
is the edge) or, for full agent runs, with the `make_chat_model` seam returning a scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph.cli import app
from tests.cli_agent_helpers import _clip, _env, _scripted, runner
from tests.openai_stub import OpenAIStub, StubReply


@pytest.mark.parametrize("args", [["score", "clip.mp4", "-i", "pick up the cube"],
                                  ["score-batch", "manifest.jsonl"]])
def test_score_without_endpoint_exits_with_help(args, monkeypatch) -> None:
    monkeypatch.setenv("RAA_MODEL", "some-model")
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    text = res.output
    for name in ("RAA_BASE_URL", "RAA_API_KEY", "vllm serve", "--limit-mm-per-prompt", "export RAA_BASE_URL="):
        assert name in text
    assert "unset: RAA_BASE_URL, RAA_API_KEY" in text  # RAA_MODEL was set


def test_bad_setting_is_a_clear_error(monkeypatch, tmp_path) -> None:
    """A command stops at a bad setting it uses (raa runs uses only RAA_TRACES_PATH: tests/test_db_commands_settings.py)."""
    monkeypatch.setenv("RAA_TIMEOUT_S", "soon")
    res = runner.invoke(app, ["score", str(tmp_path / "clip.mp4"), "-i", "pick up the cup"])
    assert res.exit_code == 2 and "RAA_TIMEOUT_S" in res.output


def test_read_manifest_and_resume_keys(tmp_path) -> None:
    from graph.batch import done_keys, item_key, read_manifest, read_output

    (tmp_path / "m.jsonl").write_text('{"path": "a.mp4", "instruction": "x", "label": "ordinary"}\n\n'
                                      'not json\n{"path": "b.mp4"}\n')
    items = read_manifest(tmp_path / "m.jsonl", "full")
    assert [it["line"] for it in items] == [1, 3, 4]
    assert items[0]["error"] is None and items[0]["path"] == str((tmp_path / "a.mp4").resolve())
    assert items[0]["manifest"] == {"label": "ordinary"}
    assert "line 3" in items[1]["error"] and "instruction" in items[2]["error"]
    assert items[0]["key"] == item_key(items[0]["path"], "x", "full") != item_key(items[0]["path"], "x", "direct")
    assert items[0]["draw"] == 0 and item_key(items[0]["path"], "x", "full", 0) == items[0]["key"]
    drawn = read_manifest(tmp_path / "m.jsonl", "full", 2)[0]
    assert drawn["draw"] == 2 and drawn["key"] == item_key(drawn["path"], "x", "full", 2) != items[0]["key"]
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps({"key": "k1"}) + "\n" + '{"key": "k2", "resu')  # torn last line
    assert done_keys(read_output(out)) == {"k1"}


def test_manifest_with_a_bom_and_misnamed_fields(tmp_path) -> None:
    from graph.batch import read_manifest

    # saved by a Windows editor: byte-order mark, CRLF; rows naming the clip "video" and the task "prompt"
    (tmp_path / "m.jsonl").write_bytes('\ufeff{"path": "a.mp4", "instruction": "x"}\r\n'
                                       '{"video": "b.mp4", "instruction": "x"}\r\n'
                                       '{"path": "c.mp4", "prompt": "x"}\r\n{"clip": "d.mp4"}\r\n'.encode())
    items = read_manifest(tmp_path / "m.jsonl", "full")
    assert items[0]["error"] is None and items[0]["path"] == str((tmp_path / "a.mp4").resolve())
    assert items[1]["error"].endswith("(rename 'video' to 'path')")
    assert items[2]["error"].endswith("(rename 'prompt' to 'instruction')")
    assert items[3]["error"].endswith("(rename 'clip' to 'path'; 'instruction' is missing)")


def test_bad_manifest_lines_say_what_is_wrong(tmp_path) -> None:
    """A line that is not JSON said only json's "Expecting value: line 1 column 1 (char 0)" after "manifest line
    2", two line numbers for one line and no word of JSON; a row missing one field named both."""
    from graph.batch import read_manifest

    (tmp_path / "m.jsonl").write_text('{"path": "a.mp4", "instruction": "x"}\nnot json\n{"path": "b.mp4"}\n'
                                      '{"instruction": "x"}\n{"path": 3, "instruction": "x"}\n')
    items = read_manifest(tmp_path / "m.jsonl", "full")
    assert items[1]["error"] == "line 2: not valid JSON (Expecting value at column 1)"
    assert items[2]["error"].endswith("('instruction' is missing)")
    assert items[3]["error"].endswith("('path' is missing)")
    assert items[4]["error"].endswith("('path' is not a string)")


def test_clips_written_relative_to_the_working_directory_get_a_warning(tmp_path) -> None:
    from graph.batch import misplaced_paths, read_manifest

    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "a.mp4").write_bytes(b"x")
    (tmp_path / "lists").mkdir()
    manifest = tmp_path / "lists" / "m.jsonl"  # paths written relative to tmp_path, where the command runs
    manifest.write_text('{"path": "clips/a.mp4", "instruction": "x"}\n{"path": "clips/gone.mp4", "instruction": "x"}\n')
    items = read_manifest(manifest, "full")
    warning = misplaced_paths(manifest, items, tmp_path)
    assert warning is not None and warning.startswith("1 clip(s) are not where the manifest points")
    assert "line 1 'clips/a.mp4'" in warning and "gone" not in warning
    assert misplaced_paths(manifest, items, tmp_path / "lists") is None  # run from the manifest's folder
    (tmp_path / "lists" / "clips").mkdir()
    (tmp_path / "lists" / "clips" / "a.mp4").write_bytes(b"x")  # now where the manifest points
    assert misplaced_paths(manifest, read_manifest(manifest, "full"), tmp_path) is None


# ------------------------------------------------------------- full agent runs (need graph-core's API)
def test_score_through_http_server_fault_is_ineligible(monkeypatch, tmp_path) -> None:
    pytest.importorskip("graph.builder")
    clip = _clip(tmp_path / "a.mp4")
    with OpenAIStub(responder=lambda body: StubReply(status=500)) as stub:
        _env(monkeypatch, tmp_path, stub.base_url)
        res = runner.invoke(app, ["score", clip, "-i", "push the block right", "--json", "--preset", "no_wmreward"])
    assert res.exit_code == 3, res.output
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["reward"] is None and result["status"] == "ineligible"
    assert any("transport" in r for r in result["reasons"])
    assert len(stub.requests) >= 2  # retried before giving up
    assert "raa trace" in res.output


def test_score_uniform_clip_is_zero_without_model_calls(monkeypatch, tmp_path) -> None:
    pytest.importorskip("graph.builder")
    clip = _clip(tmp_path / "u.mp4", uniform=True)
    with OpenAIStub() as stub:
        _env(monkeypatch, tmp_path, stub.base_url)
        res = runner.invoke(app, ["score", clip, "-i", "push the block", "--json", "--stream", "--preset", "no_wmreward"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["reward"] == 0.0 and result["status"] == "zero"
    assert stub.requests == []
    assert "quality" in res.output  # streamed node update
    run = runner.invoke(app, ["trace", result["run_id"]], env={"COLUMNS": "200"})
    assert run.exit_code == 0 and "quality" in run.output and "gate" in run.output


def test_score_scripted_success_then_runs_and_trace(monkeypatch, tmp_path) -> None:
    pytest.importorskip("graph.builder")
    from tests.graph_scripts import moving_square

    model = _scripted(monkeypatch, tmp_path)
    clip = moving_square(tmp_path / "m.mp4")
    res = runner.invoke(app, ["score", str(clip), "-i", "push the red block to the right",
                              "--preset", "visual_verify"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "scored" in res.output and "raa trace run-" in res.output
    run_id = res.output.split("raa trace ")[1].split()[0]
    assert len(model.calls) >= 4
    runs = runner.invoke(app, ["runs"], env={"COLUMNS": "200"})
    assert run_id in runs.output and "visual_verify" in runs.output and "scored" in runs.output
    trace = runner.invoke(app, ["trace", run_id], env={"COLUMNS": "250"})
    assert trace.exit_code == 0
    out = trace.output
    order = [out.index(f"│ {node} ") for node in ("observe", "assess", "tool_call", "reflect", "gate")]
    assert order == sorted(order)
    assert "view_frames" in out and "T=1.000" in out


@pytest.mark.parametrize("command", ["score", "score-batch"])
def test_inspect_mode_setting_reaches_the_cli_agents(command, monkeypatch, tmp_path) -> None:
    """RAA_INSPECT_MODE=plan (servers without tool calling): the CLI's agents inspect with one plan and
    never send a tool-calling request."""
    pytest.importorskip("graph.builder")
    from tests.graph_scripts import moving_square

    model = _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_INSPECT_MODE", "plan")
    clip = moving_square(tmp_path / "m.mp4")
    if command == "score":
        res = runner.invoke(app, ["score", str(clip), "-i", "push the red block to the right", "--json",
                                  "--preset", "visual_verify"])
        status = json.loads(res.stdout.strip().splitlines()[-1])["status"]
    else:
        manifest = tmp_path / "manifest.jsonl"
        manifest.write_text(json.dumps({"path": "m.mp4", "instruction": "push the red block to the right"}) + "\n")
        res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(tmp_path / "r.jsonl"),
                                  "--preset", "visual_verify"])
        status = json.loads((tmp_path / "r.jsonl").read_text())["result"]["status"]
    assert res.exit_code == 0, res.output
    assert status == "scored"
    assert len(model.calls_for("plan")) == 1 and model.calls_for("inspect") == []


def test_score_missing_video_and_bad_preset(monkeypatch, tmp_path) -> None:
    pytest.importorskip("graph.builder")
    model = _scripted(monkeypatch, tmp_path)
    res = runner.invoke(app, ["score", str(tmp_path / "nope.mp4"), "-i", "push", "--json", "--preset", "no_wmreward"])
    assert res.exit_code == 3, res.output
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["reward"] is None and "nope.mp4" in " ".join(result["reasons"])
    assert model.calls == []
    res = runner.invoke(app, ["score", str(tmp_path / "nope.mp4"), "-i", "push", "--preset", "best"])
    assert res.exit_code == 2 and "unknown preset 'best'" in res.output


def test_a_draw_scores_anew_and_a_repeated_draw_reads_the_cache(monkeypatch, tmp_path) -> None:
    """`--draw K` (score and score-batch): another draw calls the model again for the same clip; the same draw
    again is served from the on-disk stage cache; draw 0 is the default."""
    from tests.graph_scripts import moving_square

    model = _scripted(monkeypatch, tmp_path)
    clip = moving_square(tmp_path / "m.mp4")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"path": "m.mp4", "instruction": "push the red block to the right"}) + "\n")
    calls = []
    for out, draw in (("d0.jsonl", []), ("d0b.jsonl", ["--draw", "0"]), ("d1.jsonl", ["--draw", "1"]),
                      ("d1b.jsonl", ["--draw", "1"])):
        res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(tmp_path / out), "--preset",
                                  "visual_verify", *draw])
        assert res.exit_code == 0 and "scored=1" in res.output, res.output
        calls.append(len(model.calls))
    assert calls[0] > 0 and calls[1] == calls[0] and calls[2] > calls[1] and calls[3] == calls[2]
    shared = tmp_path / "draws.jsonl"  # draws of one manifest in one output: each its own row, each resumable
    for draw, expected in (("0", "1 to score"), ("1", "1 to score"), ("1", "1 already in")):
        res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(shared), "--preset", "visual_verify",
                                  "--draw", draw])
        assert res.exit_code == 0 and expected in res.output, res.output
    rows = [json.loads(line) for line in shared.read_text().splitlines()]
    assert [r["draw"] for r in rows] == [0, 1] and rows[0]["key"] != rows[1]["key"]
    assert rows[0]["key"] == json.loads((tmp_path / "d0.jsonl").read_text())["key"]  # draw 0 keeps its key
    assert len(model.calls) == calls[3]  # both draws were in the stage cache already
    res = runner.invoke(app, ["score", str(clip), "-i", "push the red block to the right", "--preset",
                              "visual_verify", "--draw", "2", "--json"])
    assert res.exit_code == 0 and len(model.calls) > calls[3], res.output


def test_score_stops_before_any_model_call_when_the_presets_tool_cannot_load(monkeypatch, tmp_path) -> None:
    """`raa score` (default preset full) without V-JEPA 2 weights made the model calls, then exited 3 with the
    load error in the reasons; it now stops at start, as score-batch does, naming a preset without the tool."""
    from tests.graph_scripts import moving_square

    model = _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_VJEPA_MODEL", str(tmp_path / "no-such-vjepa"))
    res = runner.invoke(app, ["score", str(moving_square(tmp_path / "m.mp4")), "-i", "push the block"])
    assert res.exit_code == 2 and "no-such-vjepa" in res.output and "--preset no_wmreward" in res.output
    assert model.calls == []



def test_stream_fix_counts_are_the_results_notes(monkeypatch, tmp_path) -> None:
    """`--stream` prints "N judgment fix(es) noted" per stage; those are the notes `RewardResult.notes` carries
    (a reviewer saw the line beside empty notes: the two must describe the same dropped judgments)."""
    pytest.importorskip("graph.builder")
    import re

    from graph import commands
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import assessment, full_script, moving_square

    a = assessment()
    a["judgments"][0]["evidence_frames"] = [5, 40, 99]
    a["judgments"].append({"requirement_id": "R9", "status": "met", "evidence_frames": [1], "rationale": "x"})
    # a repeat of R1 with its status (a contradicting one is re-asked: graph/schemas.py)
    a["judgments"].append({"requirement_id": "R1", "status": "met", "evidence_frames": [1], "rationale": "x"})
    monkeypatch.setattr(commands, "make_chat_model", lambda settings: ScriptedChatModel(full_script(assess=[a])))
    _env(monkeypatch, tmp_path)
    clip = moving_square(tmp_path / "m.mp4")
    res = runner.invoke(app, ["score", str(clip), "-i", "push the red block to the right", "--json", "--stream",
                              "--preset", "no_wmreward"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout.strip().splitlines()[-1])
    printed = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+) \([^)]*\): .*?; (\d+) judgment fix\(es\) noted",
                                                    res.output, re.MULTILINE)}
    assert printed.get("assess") == 3
    for stage, n in printed.items():
        assert sum(1 for note in result["notes"] if note.startswith(f"{stage}: ")) == n
    assert result["reasons"][-len(result["notes"]):] == result["notes"]


def test_score_with_traces_in_memory_does_not_point_at_raa_trace(monkeypatch, tmp_path) -> None:
    """RAA_TRACES_PATH=:memory: keeps the trace only while the process runs; `raa score` still printed
    "trace: raa trace RUN_ID", a command that then said there is no trace database."""
    pytest.importorskip("graph.builder")
    clip = _clip(tmp_path / "u.mp4", uniform=True)  # zero without a model call
    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_TRACES_PATH", ":memory:")
    res = runner.invoke(app, ["score", clip, "-i", "push the block", "--json", "--preset", "no_wmreward"])
    assert res.exit_code == 0, res.output
    assert "raa trace run-" not in res.output, res.output
    assert "trace kept in memory only (RAA_TRACES_PATH=:memory:)" in res.output, res.output


def test_score_of_a_missing_clip_without_endpoint_settings_stops_on_the_settings_first(monkeypatch, tmp_path) -> None:
    """README ("CLI and tracing"): a missing clip's ineligible result (exit 3) comes before the endpoint wait only
    with the endpoint's variables set; unset, `raa score` stops with the settings error (exit 2), as the README now
    says (it read as if a missing clip always gave 3 at once)."""
    for name in ("RAA_BASE_URL", "RAA_MODEL", "RAA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite"))
    res = runner.invoke(app, ["score", str(tmp_path / "nope.mp4"), "-i", "push", "--preset", "no_wmreward"])
    assert res.exit_code == 2, res.output
    assert "unset: RAA_BASE_URL, RAA_MODEL, RAA_API_KEY" in res.output
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "while `RAA_BASE_URL`, `RAA_MODEL` or `RAA_API_KEY` is unset, any `score`" in readme
