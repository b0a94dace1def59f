"""`raa eval reward|report|world-model` and `raa report RUN_ID` through typer, with scripted models."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import typer
from graph_scripts import FakeSurprise, full_script, moving_square, uniform_clip
from typer.testing import CliRunner

import evals.eval_cli as eval_cli
import graph.commands as graph_commands
from evals.judge import RewardJudge
from graph.context import AgentTools
from graph.reward_format import reward_text
from graph.testing import ScriptedChatModel
from tools.motion import LKTracker

runner = CliRunner()


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # rich tables unclipped in the captured output
    for name, value in (("RAA_BASE_URL", "http://127.0.0.1:9/v1"), ("RAA_MODEL", "scripted"),
                        ("RAA_API_KEY", "EMPTY"), ("RAA_CACHE_PATH", str(tmp_path / "cache.sqlite")),
                        ("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite")),
                        ("RAA_ENDPOINT_WAIT_S", "0")):  # scripted models: base_url is never called
        monkeypatch.setenv(name, value)
    script = full_script(vqa=lambda messages, n: {"answer": "yes"})
    model = ScriptedChatModel(script)
    monkeypatch.setattr(graph_commands, "make_chat_model", lambda settings: model)
    monkeypatch.setattr(eval_cli, "make_tools", lambda: AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    rows = [{"path": moving_square(tmp_path / "a.mp4").name, "instruction": "push the red block to the right",
             "label": "progress", "pattern": "partial"},
            {"path": uniform_clip(tmp_path / "b.mp4").name, "instruction": "push the red block to the right",
             "label": "failure", "pattern": "uniform"}]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return tmp_path, model


def test_eval_reward_uses_the_inspect_mode_setting(env, monkeypatch):
    _, model = env
    monkeypatch.setenv("RAA_INSPECT_MODE", "plan")
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "visual_verify"])
    assert result.exit_code == 0, result.output
    assert len(model.calls_for("plan")) == 1 and model.calls_for("inspect") == []  # the uniform clip: no calls


def test_eval_reward_then_report(env, monkeypatch):
    root, _ = env
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct,full",
                                               "--concurrency", "2"])
    assert result.exit_code == 0, result.output
    assert "calls/clip" in result.output and "Full Reward Agent" in result.output
    assert "no judge endpoint configured" in result.output  # judge unset: rows stay unjudged
    assert "4 output(s) could not be judged; first: " in result.output  # the reason, not only in results.jsonl
    rows = [json.loads(x) for x in (root / "ev" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["judge"]["status"] == "unjudged" for r in rows)
    assert {(r["preset"], r["label"], r["reward"]) for r in rows} >= {("direct", "failure", 0.0),
                                                                      ("full", "failure", 0.0)}
    table = (root / "ev" / "table.md").read_text()
    assert re.search(r"\| Direct base-model scoring \| not judged \(N = 2\) \| 0 / 1 \| 0 / 1 \|", table)

    judge_model = ScriptedChatModel({"judge": [{"reasonable": True, "rationale": "ok"}]})
    monkeypatch.setattr(eval_cli, "make_judge", lambda s: RewardJudge.from_settings(s, model=judge_model))
    again = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "full,direct"])
    assert again.exit_code == 0, again.output
    assert "scored 0, re-judged 4" in again.output and len(judge_model.calls) == 4
    assert "| Full Reward Agent | 2 / 2 (100.0%) |" in (root / "ev" / "table.md").read_text()

    index = runner.invoke(eval_cli.eval_app, ["report", "ev"])
    assert index.exit_code == 0, index.output
    html = (root / "ev" / "index.html").read_text()
    assert html.count('class="run-link"') == 4

    app = typer.Typer()
    app.command("report")(eval_cli.report_command)
    app.command("noop")(lambda: None)  # keep typer in multi-command mode, like graph/cli.py
    run_id = rows[0]["run_id"]
    one = runner.invoke(app, ["report", run_id, "--out", "one.html"])
    assert one.exit_code == 0, one.output
    assert (root / "one.html").is_file()
    assert 'id="gate"' in (root / "one.html").read_text()
    missing = runner.invoke(app, ["report", "run-missing"])
    assert missing.exit_code == 1 and "run-missing" in missing.output


def test_eval_report_names_a_row_it_cannot_count(tmp_path):
    """A hand-edited results.jsonl row (reward "0.9") ended `raa eval report` in a TypeError traceback."""
    ev = tmp_path / "ev"
    ev.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": "0.9", "status": "scored"}
    (ev / "results.jsonl").write_text(json.dumps(row) + "\n")
    result = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2, result.output
    assert "field 'reward' must be a finite number or null, got '0.9'" in result.output
    assert not (ev / "index.html").exists()


@pytest.mark.parametrize("text", ['{"presets": ["full"], "paths": ["a.mp4"', '["full"]',
                                  '{"presets": ["full"], "paths": "a.mp4"}', '{"presets": [["full"]], "paths": []}'])
def test_eval_report_names_a_summary_it_cannot_read(tmp_path, text):
    """A summary.json cut short or edited by hand ended `raa eval report` in a JSONDecodeError (or
    AttributeError, TypeError) traceback, or silently indexed every row of results.jsonl."""
    ev = tmp_path / "ev"
    ev.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": 0.9, "status": "scored"}
    (ev / "results.jsonl").write_text(json.dumps(row) + "\n")
    (ev / "summary.json").write_text(text)
    result = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "summary.json" in result.output and not (ev / "index.html").exists()


def test_eval_report_names_a_reports_folder_it_cannot_write(tmp_path):
    """`raa eval report DIR` with DIR/reports a file ended in a FileExistsError traceback; now one error
    line naming the problem, exit 2."""
    from graph.tracing import open_saver

    ev = tmp_path / "ev"
    ev.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": 0.9, "status": "scored",
           "run_id": "r1"}
    (ev / "results.jsonl").write_text(json.dumps(row) + "\n")
    traces = tmp_path / "traces.sqlite"
    open_saver(traces).conn.close()
    (ev / "reports").write_text("a file where the reports folder goes")
    result = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(traces)])
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit) and result.output.startswith("error: cannot write the report")
    assert "reports" in result.output


def test_eval_report_keeps_a_summary_without_paths(tmp_path):
    """summary.json written before it named the run's clips scopes nothing: every row is indexed."""
    ev = tmp_path / "ev"
    ev.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": 0.9, "status": "scored"}
    (ev / "results.jsonl").write_text(json.dumps(row) + "\n")
    (ev / "summary.json").write_text('{"presets": ["full"], "clips": 1}')
    result = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 0, result.output
    assert "a.mp4" in (ev / "index.html").read_text()


def test_eval_reward_input_errors(env):
    bad = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "full,best"])
    assert bad.exit_code == 2 and "unknown preset" in bad.output
    nofile = runner.invoke(eval_cli.eval_app, ["reward", "-m", "nope.jsonl", "-o", "ev"])
    assert nofile.exit_code == 2 and "manifest not found" in nofile.output


def test_eval_reward_needs_an_endpoint(env, monkeypatch):
    monkeypatch.delenv("RAA_BASE_URL")
    out = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev"])
    assert out.exit_code == 2 and "RAA_BASE_URL" in out.output


def test_eval_reward_checks_the_judge_endpoint_first(env, monkeypatch):
    """A judge that does not answer is named at start (before, every row spent the judge's retries and
    was left unjudged); the agent's endpoint check is skipped here (scripted model)."""
    from tests.openai_stub import OpenAIStub

    monkeypatch.setenv("RAA_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAA_JUDGE_MODEL", "judge-m")
    monkeypatch.setenv("RAA_JUDGE_API_KEY", "EMPTY")
    real = eval_cli._backbone_settings

    def settings(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the agent's own check stays off
        return dataclasses.replace(real(*args, **kwargs), endpoint_wait_s=0.3)

    monkeypatch.setattr(eval_cli, "_backbone_settings", settings)
    out = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "decomposed"])
    assert out.exit_code == 2 and "the judge endpoint http://127.0.0.1:9/v1 did not answer" in out.output
    assert "RAA_JUDGE_BASE_URL" in out.output and not (env[0] / "ev" / "results.jsonl").exists()
    with OpenAIStub([]) as stub:  # answers /models with no list: "cannot tell", so the run goes on
        monkeypatch.setenv("RAA_JUDGE_BASE_URL", stub.base_url)
        out = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "decomposed"])
    assert out.exit_code == 0 and "did not answer" not in out.output, out.output


def test_world_model_command(env):
    root, model = env
    manifest = root / "vqa.jsonl"
    manifest.write_text(json.dumps({"path": "a.mp4", "task": "push", "questions": [
        {"question": "Does the block move right?", "answer": "yes"},
        {"question": "Does the block fly?", "answer": "no"}]}) + "\n")
    out = runner.invoke(eval_cli.eval_app, ["world-model", "-m", "vqa.jsonl", "-o", "wm"])
    assert out.exit_code == 0, out.output
    report = json.loads((root / "wm" / "vqa.json").read_text())
    assert report["questions"] == 2 and report["correct"] == 1 and report["domain"] == 50.0
    assert "Domain" in out.output and "No answer" in out.output and len(model.calls_for("vqa")) == 2


def test_eval_reward_table_fits_80_columns(env, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets",
                                               "audit_no_gate,full"])
    assert result.exit_code == 0, result.output
    table = result.output.split("Reward reliability")[1].split("(rows by preset id")[0]
    assert max(len(line) for line in table.splitlines()) <= 80
    rows = [line.split() for line in table.splitlines() if line.strip().startswith(("audit_no_gate", "full"))]
    assert [r[0] for r in rows] == ["audit_no_gate", "full"]  # one line per preset, ids never folded
    assert "Scope audit and repair (no failure gate)" in (Path("ev") / "table.md").read_text()


def test_eval_reward_stops_at_start_when_a_presets_tool_cannot_load(env, monkeypatch, tmp_path):
    """V-JEPA 2 weights that are not there: before, every clip of every WMReward preset ran and became an
    ineligible row with the same tool fault (17 of 18 clips of the small suite). Now: exit 2 at once,
    naming the tool and the presets that use it; nothing is scored."""
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    settings = ToolSettings(vjepa_model=str(tmp_path / "no-such-vjepa"))
    monkeypatch.setattr(eval_cli, "make_tools", lambda: Toolbox(settings))
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct,wmreward,full"])
    assert result.exit_code == 2, result.output
    assert "the surprise tool cannot load" in result.output and "no-such-vjepa" in result.output
    assert "presets wmreward, full use it" in result.output
    assert not (env[0] / "ev" / "results.jsonl").exists()
    monkeypatch.setattr(eval_cli, "make_tools", lambda: Toolbox(settings))  # presets without WMReward still run
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct"])
    assert result.exit_code == 0, result.output


def test_eval_reward_progress_lines_round_rewards_but_rows_keep_them(env, monkeypatch):
    """The progress lines printed the raw float (`reward=0.9749999999999999`); they now show it as the reports
    and the judge do (`reward_text`: 3 decimals, a tiny positive one in scientific notation), while
    results.jsonl keeps the reward as computed."""
    root, _ = env
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct,full"])
    assert result.exit_code == 0, result.output
    shown = re.findall(r"^\[\d+/4\] .* reward=(\S+) judge=", result.output, flags=re.MULTILINE)
    assert len(shown) == 4 and all(re.fullmatch(r"\d\.\d{3}|-", s) for s in shown), shown
    rows = [json.loads(x) for x in (root / "ev" / "results.jsonl").read_text().splitlines()]
    assert sorted(shown) == sorted(reward_text(r["reward"]) for r in rows)
    assert all(r["reward"] is None or isinstance(r["reward"], float) for r in rows)


@pytest.mark.parametrize("command", ["reward", "world-model"])
def test_an_output_folder_that_is_a_file_is_one_error_line_before_any_call(env, command):
    """`--out` naming an existing file: `raa eval reward` raised FileExistsError with a traceback, and
    `raa eval world-model` did so only after asking every question (the report was lost). Now both exit 2
    at start, naming the folder, and no model is called."""
    root, model = env
    (root / "vqa.jsonl").write_text(json.dumps({"path": "a.mp4", "questions": [
        {"question": "Does the block move right?", "answer": "yes"}]}) + "\n")
    (root / "taken").write_text("a file, not a folder")
    args = ["reward", "-m", "m.jsonl", "--presets", "direct"] if command == "reward" else ["world-model", "-m",
                                                                                         "vqa.jsonl"]
    result = runner.invoke(eval_cli.eval_app, [*args, "-o", "taken"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert "error: cannot use --out taken" in result.output and "Traceback" not in result.output
    assert model.calls_for("vqa") == [] and model.calls_for("direct") == []
    assert (root / "taken").read_text() == "a file, not a folder"


def test_run_report_to_a_folder_is_one_error_line(env):
    """`raa report RUN --out DIR` with DIR an existing folder ended in an IsADirectoryError traceback; now
    exit 2 naming the path (the page is still written when --out names a file)."""
    root, _ = env
    assert runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct"]).exit_code == 0
    run_id = json.loads((root / "ev" / "results.jsonl").read_text().splitlines()[0])["run_id"]
    app = typer.Typer()
    app.command("report")(eval_cli.report_command)
    app.command("noop")(lambda: None)  # keep typer in multi-command mode, like graph/cli.py
    (root / "pages").mkdir()
    result = runner.invoke(app, ["report", run_id, "--out", "pages"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit) and "error: cannot write pages" in result.output
    assert runner.invoke(app, ["report", run_id, "--out", "pages/one.html"]).exit_code == 0
    assert 'id="gate"' in (root / "pages" / "one.html").read_text()


REAL_MAKE_TOOLS = eval_cli.make_tools  # the env fixture replaces it with scripted tools


def test_a_bad_tool_setting_is_one_error_line(env, monkeypatch):
    """RAA_MOTION_BACKEND=bogus ended `raa eval reward` in a ToolSettingsError traceback (exit 1), where `raa
    score` / `score-batch` say it in one line with exit 2; now so does `raa eval reward`, before any call."""
    _, model = env
    monkeypatch.setattr(eval_cli, "make_tools", REAL_MAKE_TOOLS)
    monkeypatch.setenv("RAA_MOTION_BACKEND", "bogus")
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit) and "error: invalid RAA_* setting: RAA_MOTION_BACKEND" in result.output
    assert model.calls == []


def test_world_model_decodes_greedily_whatever_raa_temperature_says(env, monkeypatch):
    """The paper's VQA protocol is greedy (the README said the command decoded at RAA_TEMPERATURE: it never did)."""
    root, model = env
    seen = []
    monkeypatch.setattr(graph_commands, "make_chat_model", lambda settings: seen.append(settings.temperature) or model)
    monkeypatch.setenv("RAA_TEMPERATURE", "0.7")
    (root / "vqa.jsonl").write_text(json.dumps({"path": "a.mp4", "questions": [
        {"question": "Does the block move right?", "answer": "yes"}]}) + "\n")
    assert runner.invoke(eval_cli.eval_app, ["world-model", "-m", "vqa.jsonl", "-o", "wm"]).exit_code == 0
    assert seen == [0.0]


def test_world_model_without_a_single_answer_reports_no_accuracy(env):
    """Every question failed (here: videos that do not decode; an endpoint down reads the same): the command
    printed "Domain ... 0.00" and exited 0, a score computed from no answer. Now it says no question was
    answered and why, writes vqa.json with domain null, prints no accuracy, and exits 3 (no result, as `raa
    score` on an ineligible result)."""
    root, model = env
    (root / "bad.mp4").write_bytes(b"not a video")
    (root / "vqa.jsonl").write_text(json.dumps({"path": "bad.mp4", "task": "push", "questions": [
        {"question": "Does the block move right?", "answer": "yes"},
        {"question": "Does the block fly?", "answer": "no"}]}) + "\n")
    out = runner.invoke(eval_cli.eval_app, ["world-model", "-m", "vqa.jsonl", "-o", "wm"])
    assert out.exit_code == 3, (out.output, out.exception)
    assert "no question was answered (2 of 2 had no answer): no Domain accuracy" in out.output
    assert re.search(r"video: \w+Error: 2 questions, first: video: ", out.output), out.output
    assert "0.00" not in out.output and "Accuracy" not in out.output  # no table, no figure
    report = json.loads((root / "wm" / "vqa.json").read_text())
    assert report["domain"] is None and report["failed"] == 2 and report["by_task"]["push"]["accuracy"] is None
    assert model.calls_for("vqa") == []


def test_world_model_with_some_answers_counts_the_rest_as_incorrect(env):
    root, _ = env
    (root / "bad.mp4").write_bytes(b"not a video")
    rows = [{"path": "a.mp4", "task": "push", "questions": [{"question": "Does the block move right?", "answer": "yes"}]},
            {"path": "bad.mp4", "task": "fly", "questions": [{"question": "Does the block fly?", "answer": "no"}]}]
    (root / "vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = runner.invoke(eval_cli.eval_app, ["world-model", "-m", "vqa.jsonl", "-o", "wm"])
    assert out.exit_code == 0, (out.output, out.exception)
    assert re.search(r"Domain\W+2\W+1\W+1\W+50\.00", out.output), out.output
    assert re.search(r"fly\W+1\W+0\W+1\W+-", out.output), out.output  # no answer in this task: no accuracy
    assert "1 question had no answer (counted as incorrect)" in out.output and "video: " in out.output  # not "1 questions"


def test_eval_reward_records_its_manifest_as_an_absolute_path(env, monkeypatch):
    """summary.json / started.json recorded `-m` as typed ("m.jsonl"): `raa eval report` run from another folder
    named a manifest, and printed a command to finish a stopped run, that pointed nowhere."""
    root, _ = env
    result = runner.invoke(eval_cli.eval_app, ["reward", "-m", "m.jsonl", "-o", "ev", "--presets", "direct"])
    assert result.exit_code == 0, result.output
    for name in ("summary.json", "started.json"):
        assert json.loads((root / "ev" / name).read_text())["manifest"] == str((root / "m.jsonl").resolve())


def test_world_model_names_the_model_when_it_takes_no_temperature_0(env, monkeypatch):
    """`raa eval world-model` decodes greedily whatever RAA_TEMPERATURE says, so a model that takes only its default
    temperature (OpenAI's reasoning models) must be named, not RAA_TEMPERATURE=1: that setting changes nothing here,
    and the rerun it asked for faulted alike."""
    import httpx
    import openai

    root, _ = env
    body = {"error": {"message": "Unsupported value: 'temperature' does not support 0 with this model. Only the "
                                 "default (1) value is supported.", "type": "invalid_request_error",
                      "param": "temperature", "code": "unsupported_value"}}
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions", json={"messages": [], "temperature": 0})
    rejected = openai.BadRequestError(body["error"]["message"], response=httpx.Response(400, request=request),
                                      body=body["error"])
    errors = _world_model_errors(root, monkeypatch, rejected)
    assert errors and all("settings" in e and "RAA_MODEL" in e and "RAA_TEMPERATURE" not in e for e in errors), errors


def test_world_model_names_no_agent_setting_when_the_server_takes_fewer_images(env, monkeypatch):
    """`raa eval world-model` sends each question's fixed frames (`evals.vqa.VQA_FRAMES`), read by none of the agent's
    settings: a server taking fewer images per request must not be told to lower AgentConfig.max_images_per_call,
    observe_frames or frame_budget (the backbone's own names), which change nothing here."""
    import httpx
    import openai

    root, _ = env
    words = "At most 4 image(s) may be provided in one request."
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions", json={"messages": []})
    rejected = openai.BadRequestError(f"Error code: 400 - {words}", response=httpx.Response(400, request=request),
                                      body={"message": words, "type": "BadRequestError", "code": 400})
    errors = _world_model_errors(root, monkeypatch, rejected)
    assert errors and all("settings" in e and "fewer images" in e and "AgentConfig" not in e
                          and "observe_frames" not in e for e in errors), errors


def _world_model_errors(root, monkeypatch, rejected: Exception) -> list[str]:
    """The result errors of `raa eval world-model` on one question whose every model call raises `rejected`."""
    model = ScriptedChatModel({"vqa": [rejected] * 4})
    monkeypatch.setattr(graph_commands, "make_chat_model", lambda settings: model)
    (root / "vqa.jsonl").write_text(json.dumps({"path": "a.mp4", "task": "push", "questions": [
        {"question": "Does the block move right?", "answer": "yes"}]}) + "\n")
    runner.invoke(eval_cli.eval_app, ["world-model", "-m", "vqa.jsonl", "-o", "wm"])
    return [r["error"] for r in json.loads((root / "wm" / "vqa.json").read_text())["results"]]
