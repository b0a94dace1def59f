"""`raa demo` (the README's `make demo`): renders sample clips, runs the model-free evidence, and
scores only when an endpoint is configured; without one it says how to connect and scores nothing."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from graph.cli import app

runner = CliRunner()


def test_demo_without_endpoint_explains_how_to_connect(tmp_path) -> None:
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "2"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "RAA_BASE_URL" in res.output and "vllm serve" in res.output
    assert "No reward was computed" in res.output
    assert "(`make demo` or `raa demo`) again" in res.output  # it said `make demo` to `raa demo --out X` users too
    assert "Reward agent" not in res.output and "raa trace run-" not in res.output
    assert (tmp_path / "manifest.jsonl").is_file()
    # the layout of `raa make-clips --out`: the clips were in OUT/clips/clips/ (a suite inside OUT/clips)
    assert len(list((tmp_path / "clips").glob("*.mp4"))) == 2 and not (tmp_path / "clips" / "clips").exists()
    assert len(list((tmp_path / "overlays").glob("*.png"))) == 2


@pytest.mark.parametrize("columns", ["220", "80"])
def test_demo_with_endpoint_scores_and_writes_reports(tmp_path, monkeypatch, columns) -> None:
    import graph.commands as commands
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import full_script

    model = ScriptedChatModel(full_script())
    monkeypatch.setattr(commands, "make_chat_model", lambda settings: model)
    monkeypatch.setenv("RAA_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAA_MODEL", "scripted")
    monkeypatch.setenv("RAA_API_KEY", "EMPTY")
    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite"))
    monkeypatch.setenv("RAA_CACHE_PATH", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("RAA_INSPECT_MODE", "plan")  # the README's Qwen2.5-VL setting
    monkeypatch.setenv("RAA_ENDPOINT_WAIT_S", "0")  # scripted model: the base url is never asked
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "2", "--preset", "no_wmreward"],
                        env={"COLUMNS": columns})
    assert res.exit_code == 0, res.output
    assert model.calls, "the scripted backbone was never called"
    assert model.calls_for("inspect") == [] and len(model.calls_for("plan")) >= 1
    reports = sorted((tmp_path / "reports").glob("*.html"))
    assert len(reports) == 2 and all(p.stat().st_size > 1000 for p in reports)
    table_lines = [line for line in res.output.splitlines() if not line.startswith("report:")]
    for run_id in (p.stem for p in reports):  # whole in the table, even at 80 columns, to copy into raa trace
        assert any(re.search(rf"\b{run_id}\b", line) for line in table_lines), res.output
    assert "raa trace RUN_ID" in res.output
    names = [json.loads(line)["name"] for line in (tmp_path / "manifest.jsonl").read_text().splitlines()]
    if columns == "80":  # the clip's number and pattern, on one line
        assert any(re.search(r"^\s*000 success\s", line) for line in table_lines), res.output
    else:
        assert any(names[0] in line for line in table_lines), res.output


def test_demo_stops_at_start_when_the_presets_tool_cannot_load(tmp_path, monkeypatch) -> None:
    """An endpoint but no V-JEPA 2 weights (a newcomer's first run offline): before, every clip became an
    ineligible row carrying the same load error; now one error line, how to score without the tool, exit 2."""
    import graph.commands as commands
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import full_script

    model = ScriptedChatModel(full_script())
    monkeypatch.setattr(commands, "make_chat_model", lambda settings: model)
    for name, value in (("RAA_BASE_URL", "http://127.0.0.1:9/v1"), ("RAA_MODEL", "scripted"), ("RAA_API_KEY", "EMPTY"),
                        ("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite")), ("RAA_CACHE_PATH", "off"),
                        ("RAA_ENDPOINT_WAIT_S", "0"), ("RAA_VJEPA_MODEL", str(tmp_path / "no-such-vjepa"))):
        monkeypatch.setenv(name, value)
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "1"], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "surprise tool load failure" in res.output and "no-such-vjepa" in res.output
    assert "a preset without that tool, e.g. --preset no_wmreward (no V-JEPA 2)" in res.output
    assert model.calls == [] and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("var", ["RAA_TIMEOUT_S", "RAA_QUALITY_MIN_FRAMES"])
def test_demo_with_a_setting_that_does_not_parse_is_one_error_line(tmp_path, var) -> None:
    # like every other command: exit 2 with the message, before any clip is rendered (was a traceback)
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "1"], env={var: "abc"})
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.output.startswith("error: ") and var in res.output and not (tmp_path / "clips").exists()


def test_demo_that_cannot_render_is_one_error_line(tmp_path, monkeypatch) -> None:
    # a fresh clone on a machine without a GL context: `raa make-clips` says so in one line, the demo
    # ended in a RenderError traceback before any clip was written
    import evals.clipsuite as clipsuite
    from evals.scenes import RenderError

    def no_gl(*args, **kwargs):
        raise RenderError("could not create an OpenGL context; set MUJOCO_GL=egl (or osmesa)")

    monkeypatch.setattr(clipsuite, "render_clip", no_gl)
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "1"])
    assert not isinstance(res.exception, RenderError), res.exception
    assert res.exit_code == 1 and "error: could not create an OpenGL context" in res.output, res.output
    assert not (tmp_path / "overlays").exists()


@pytest.mark.parametrize("under", [False, True])
def test_demo_into_a_file_is_a_usage_error(tmp_path, under) -> None:
    # `raa make-clips --out FILE` is a usage error (exit 2, ClipSuiteRequestError: refused before rendering); the
    # demo read every ClipSuiteError as a failed render (exit 1), this refusal included. It then printed
    # "Rendering the labelled sample clips into FILE/clips ..." before the error: --out is checked first, with
    # `raa make-clips`'s own refusal (evals.eval_cli_common.out_dir)
    (tmp_path / "a_file").write_text("not a folder")
    out = tmp_path / "a_file" / "demo" if under else tmp_path / "a_file"
    res = runner.invoke(app, ["demo", "--out", str(out), "--limit", "1"])
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.output.startswith(f"error: cannot use --out {out}: "), res.output
    assert "(it must be a folder)" in res.output and "Rendering" not in res.output, res.output
    assert (tmp_path / "a_file").read_text() == "not a folder"


def test_demo_renders_again_when_the_manifest_lacks_clips(tmp_path) -> None:
    # a render whose clips all failed leaves an empty manifest (make_clips writes the ones that rendered):
    # the next demo "re-used" it and ended in an IndexError; a partial one was re-used with clips missing
    (tmp_path / "manifest.jsonl").write_text("")
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "1"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, (res.output, res.exception)
    assert "Re-using" not in res.output and "1 clips, manifest" in res.output
    assert len(list((tmp_path / "overlays").glob("*.png"))) == 1


def test_demo_refuses_a_negative_seed(tmp_path) -> None:
    # as `raa make-clips --seed`: the suite's seed is >= 0 (a ValueError traceback from the suite before)
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--seed", "-1"])
    assert res.exit_code == 2 and "--seed" in res.output and not (tmp_path / "clips").exists()


@pytest.mark.slow
def test_demo_does_not_reuse_clips_of_another_seed(tmp_path) -> None:
    # the clip folder is a cache of one suite: clips rendered with --seed 0 were re-used for --seed 1 (the
    # manifest only had to list enough rows), so the demo showed seed 0's clips under seed 1
    from evals.clipsuite import load_manifest, suite_specs

    def run(seed: int):
        res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "1", "--seed", str(seed)],
                            env={"COLUMNS": "200"})
        assert res.exit_code == 0, (res.output, res.exception)
        return res.output

    run(0)
    assert [r["seed"] for r in load_manifest(tmp_path)] == [suite_specs("small", 0)[0].seed]
    out = run(1)
    assert "Re-using" not in out and "rendered with other settings" in out
    assert [r["seed"] for r in load_manifest(tmp_path)] == [suite_specs("small", 1)[0].seed]
    assert "Re-using" in run(1)  # the same suite again: its clips are kept
    (tmp_path / load_manifest(tmp_path)[0]["path"]).unlink()  # a listed clip that is gone
    out = run(1)
    assert "Re-using" not in out and "1 clips, manifest" in out and "undecodable" not in out
    (tmp_path / "manifest.jsonl").write_text("not json\n")  # a broken cache: replaced, not an error
    out = run(1)
    assert "unreadable manifest" in out and "1 clips, manifest" in out


def test_cached_rows_serve_only_clips_the_suite_renders_so(tmp_path) -> None:
    # no rendering: the cache's decision alone (another size is another suite too; a listed clip that is gone
    # is missing, not foreign)
    from evals.clipsuite import SUITE_VERSION, suite_specs
    from graph.demo import _cache_misses

    suite = suite_specs("small", 0)
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"x")
    row = {"name": suite[0].name, "seed": suite[0].seed, "frames": suite[0].frames, "width": 128, "height": 128,
           "path": str(clip), "suite_version": SUITE_VERSION}
    assert _cache_misses([row], suite, suite[:1], 128) == ([], None)
    missing, foreign = _cache_misses([{**row, "width": 256, "height": 256}], suite, suite[:1], 128)
    assert missing == [suite[0].name] and "256x256" in foreign
    assert _cache_misses([{**row, "path": str(tmp_path / "gone.mp4")}], suite, suite[:2], 128) == \
        ([suite[0].name, suite[1].name], None)
    assert _cache_misses([{**row, "seed": suite[0].seed + 1}], suite, suite[:1], 128)[1].startswith(suite[0].name)
    # an older clip generator rendered other clips for the same seed (make_clips would refuse to merge them)
    old = {k: v for k, v in row.items() if k != "suite_version"}
    missing, foreign = _cache_misses([old], suite, suite[:1], 128)
    assert missing == [suite[0].name] and "suite version None" in foreign


def test_demo_prints_an_out_folder_with_brackets_as_written(tmp_path) -> None:
    """Paths went through rich markup: a folder named "run [v2]" lost its "[v2]" (taken for a style tag)."""
    out = tmp_path / "run [v2]"
    res = runner.invoke(app, ["demo", "--out", str(out), "--limit", "1"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert f"Rendering the labelled sample clips into {out / 'clips'}" in res.output
    assert f"manifest {out / 'manifest.jsonl'}" in res.output
    assert f"Track overlays: {out / 'overlays'}/" in res.output


def test_demo_scores_with_the_settings_it_read_at_start(tmp_path, monkeypatch) -> None:
    """`_score` read the environment a second time: settings changed after the demo read them (here, while the
    clips were rendered and measured) were the ones it scored with. Each is read once, at the edge."""
    import graph.commands as commands
    import graph.context as context
    import graph.demo as demo
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import full_script

    model = ScriptedChatModel(full_script())
    scored_with, tools_with = [], []
    monkeypatch.setattr(commands, "make_chat_model", lambda settings: scored_with.append(settings) or model)
    loaded_toolbox = context.loaded_toolbox
    monkeypatch.setattr(context, "loaded_toolbox",
                        lambda tool_settings, config: tools_with.append(tool_settings) or loaded_toolbox(tool_settings,
                                                                                                         config))
    for name, value in (("RAA_BASE_URL", "http://127.0.0.1:9/v1"), ("RAA_MODEL", "scripted"), ("RAA_API_KEY", "EMPTY"),
                        ("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite")), ("RAA_CACHE_PATH", "off"),
                        ("RAA_ENDPOINT_WAIT_S", "0"), ("RAA_VJEPA_MODEL", "given/vjepa")):
        monkeypatch.setenv(name, value)
    evidence_table = demo._evidence_table

    def then_the_environment_changes(*args) -> None:
        evidence_table(*args)
        monkeypatch.setenv("RAA_MODEL", "changed-later")
        monkeypatch.setenv("RAA_VJEPA_MODEL", "changed/later")

    monkeypatch.setattr(demo, "_evidence_table", then_the_environment_changes)
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "1", "--preset", "no_wmreward"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert [s.model for s in scored_with] == ["scripted"] and "(scripted)" in res.output, res.output
    assert [t.vjepa_model for t in tools_with] == ["given/vjepa"]


def test_demo_shows_a_tiny_positive_reward_as_positive(tmp_path, monkeypatch) -> None:
    """The demo's table printed the reward with `:.3f`: a scored 0.0004 (positive for F+) read "0.000", as if
    zero. It is written by the shared rule (`graph.reward_format.reward_text`), as `raa score` writes it."""
    import graph
    import graph.commands as commands
    from graph.schemas import RewardResult
    from graph.testing import ScriptedChatModel

    async def scored(items, config, **kwargs) -> list[RewardResult]:
        return [RewardResult(reward=0.0004, status="scored", T=0.5, P=0.5, V=0.5, run_id=f"run-tiny{i}")
                for i, _ in enumerate(items)]

    monkeypatch.setattr(graph, "ascore_videos", scored)
    monkeypatch.setattr(commands, "make_chat_model", lambda settings: ScriptedChatModel([]))
    for name, value in (("RAA_BASE_URL", "http://127.0.0.1:9/v1"), ("RAA_MODEL", "scripted"), ("RAA_API_KEY", "EMPTY"),
                        ("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite")), ("RAA_CACHE_PATH", "off"),
                        ("RAA_ENDPOINT_WAIT_S", "0")):
        monkeypatch.setenv(name, value)
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--limit", "1", "--preset", "no_wmreward"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    row = next(line for line in res.output.splitlines() if "run-tiny0" in line and "report" not in line)
    assert "4.00e-04" in row and "0.000 " not in row, res.output
