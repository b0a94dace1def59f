"""`raa score-batch` driven through graph.cli.app with the scripted chat model: resuming, isolating bad items,
refusing to mix scorers in one output, and --retry-ineligible (the rest of the agent CLI: test_cli_agent.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph.cli import app
from tests.cli_agent_helpers import _env, _scripted, runner


def test_score_batch_resumes_and_isolates_bad_items(monkeypatch, tmp_path) -> None:
    pytest.importorskip("graph.builder")
    from tests.graph_scripts import garbage_file, moving_square

    _scripted(monkeypatch, tmp_path)
    for i in range(3):
        moving_square(tmp_path / f"c{i}.mp4", seed=i)
    garbage_file(tmp_path / "bad.mp4")
    rows = [{"path": f"c{i}.mp4", "instruction": "push the red block to the right", "label": "ordinary"}
            for i in range(3)] + [{"path": "bad.mp4", "instruction": "push"}]
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    out = tmp_path / "out" / "results.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--concurrency", "3", "--preset", "visual_verify"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(got) == 5
    by_line = {r["line"]: r for r in got}
    assert all(by_line[i]["result"]["status"] == "scored" for i in (1, 2, 3))
    assert by_line[1]["manifest"] == {"label": "ordinary"}
    for line in (4, 5):
        assert by_line[line]["result"]["reward"] is None and by_line[line]["result"]["reasons"]
    assert "input" in by_line[5]["result"]["reasons"][0]
    # the summary names each failing stage and kind (any bad input: "input") with its count and first reason
    assert "ineligible (input): 1, first: manifest: input: line 5: not valid JSON" in res.output, res.output
    assert "ineligible (quality: video): 1, first: quality: video: VideoDecodeError: " in res.output, res.output
    # resume: nothing left to do; a new manifest row is the only new work
    res = runner.invoke(app, args)
    assert "0 to score" in res.output and len(out.read_text().splitlines()) == 5
    moving_square(tmp_path / "c9.mp4", seed=9)
    with manifest.open("a") as fh:
        fh.write(json.dumps({"path": "c9.mp4", "instruction": "push the red block to the right"}) + "\n")
    res = runner.invoke(app, args)
    assert "1 to score" in res.output and len(out.read_text().splitlines()) == 6
    # a line repeating an earlier one in all is scored once, one row; under other fields it takes that line's result
    with manifest.open("a") as fh:
        fh.write(json.dumps({"path": "c0.mp4", "instruction": "push the red block to the right", "label": "x"}) + "\n")
        fh.write(json.dumps(rows[0]) + "\n")
    res = runner.invoke(app, args)
    assert "1 manifest line(s) repeat an earlier one and are scored once: line 8 = line 1" in res.output
    assert ("1 manifest line(s) repeat an earlier one's clip and instruction under another name or other fields: each "
            "gets its own row with that line's result: line 7 = line 1") in res.output, res.output
    assert "0 to score, 1 to take an earlier line's result" in res.output and len(out.read_text().splitlines()) == 7


def _scored_once(monkeypatch, tmp_path):  # noqa: ANN001, ANN202 - pytest fixtures
    """m.mp4 scored once at preset visual_verify into out.jsonl: (the score-batch arguments, out, the result)."""
    from tests.graph_scripts import moving_square

    _scripted(monkeypatch, tmp_path)
    moving_square(tmp_path / "m.mp4")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"path": "m.mp4", "instruction": "push the red block to the right"}) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify"]
    return args, out, runner.invoke(app, args)

def test_score_batch_refuses_to_mix_scorers_in_one_output(monkeypatch, tmp_path) -> None:
    """Rows record model and temperature; resuming into an output another model (or temperature) scored would
    keep its rewards for the skipped items, so it is refused before anything is written."""
    args, out, res = _scored_once(monkeypatch, tmp_path)
    assert res.exit_code == 0 and "1 item, 0 already in" in res.output, res.output  # not "1 items"
    row = json.loads(out.read_text())
    assert row["scorer"] == {"model": "stub-model", "temperature": 0.0, "endpoint": "http://127.0.0.1:9/v1"}
    assert row["result"]["status"] == "scored"
    before = out.read_text()
    for name, value, said in (("RAA_MODEL", "other-model", "this run uses model 'other-model' at temperature 0.0"),
                              ("RAA_TEMPERATURE", "0.7", "this run uses model 'stub-model' at temperature 0.7")):
        monkeypatch.setenv(name, value)
        res = runner.invoke(app, [*args, "--retry-ineligible"])
        assert res.exit_code == 2, res.output
        assert "holds 1 reward row(s) scored by model 'stub-model' at temperature 0.0 (first: line 1)" in res.output
        assert said in res.output and "another output" in res.output and out.read_text() == before
        monkeypatch.delenv(name)
        _env(monkeypatch, tmp_path)
    legacy = {k: v for k, v in row.items() if k != "scorer"}  # a row from before rows said their scorer
    out.write_text(json.dumps(legacy) + "\n")
    monkeypatch.setenv("RAA_MODEL", "other-model")
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output, res.output


def test_retry_ineligible_rescoring_only_what_a_rerun_can_fix(monkeypatch, tmp_path) -> None:
    """A batch scored against a dead endpoint wrote ineligible rows that every resume skipped."""
    from graph.batch import read_manifest
    from graph.batch_retry import retryable
    from tests.graph_scripts import garbage_file, moving_square

    model = _scripted(monkeypatch, tmp_path)
    for i in range(2):
        moving_square(tmp_path / f"c{i}.mp4", seed=i)
    garbage_file(tmp_path / "bad.mp4")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"path": p, "instruction": "push the red block to the right"}) + "\n"
                                for p in ("c0.mp4", "c1.mp4", "bad.mp4")))
    items = read_manifest(manifest, "visual_verify")
    earlier = [{"status": "ineligible", "reasons": ["observe: transport: APIConnectionError after 5 attempts"]},
               {"status": "scored", "reward": 0.5, "T": 0.5, "P": 0.5, "V": 0.5},
               {"status": "ineligible", "reasons": ["quality: video: bad.mp4: cannot be opened as a video"]}]
    out = tmp_path / "results.jsonl"
    out.write_text("".join(json.dumps({**{k: it[k] for k in ("key", "line", "path", "instruction", "preset",
                                                              "manifest")}, "result": r}) + "\n"
                           for it, r in zip(items, earlier, strict=True)))
    assert [retryable(r) for r in earlier] == [True, False, False]
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify"]
    assert "0 to score" in runner.invoke(app, args).output  # a plain resume skips the dead-endpoint row
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0, res.output
    assert "1 ineligible row(s) removed" in res.output and "1 to score" in res.output
    assert "scored=1 zero=0 ineligible=0  usage: calls=" in res.output  # this invocation's rows and model use
    rows = {r["path"]: r["result"] for r in map(json.loads, out.read_text().splitlines())}
    assert len(out.read_text().splitlines()) == 3  # one row per item
    assert rows[str((tmp_path / "c0.mp4").resolve())]["status"] == "scored"
    assert rows[str((tmp_path / "c1.mp4").resolve())]["reward"] == 0.5  # untouched
    assert "video" in rows[str((tmp_path / "bad.mp4").resolve())]["reasons"][0]  # not retried: same video
    assert len(model.calls_for("observe")) == 1


def test_retry_ineligible_rescores_a_clip_that_was_missing_and_exists_now(monkeypatch, tmp_path) -> None:
    """A manifest scored before its clips were all rendered kept "video file not found" rows for good:
    --retry-ineligible counted them as final video faults."""
    from tests.graph_scripts import moving_square

    model = _scripted(monkeypatch, tmp_path)
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"path": p, "instruction": "push the red block to the right"}) + "\n"
                                for p in ("late.mp4", "gone.mp4")))
    out = tmp_path / "results.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify", "--retry-ineligible"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "ineligible=2" in res.output, res.output
    first = [json.loads(line)["result"] for line in out.read_text().splitlines()]
    assert all(r["reasons"][0].endswith("video file not found") for r in first), first
    moving_square(tmp_path / "late.mp4")
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "1 ineligible row(s) removed" in res.output and "1 to score" in res.output
    rows = {Path(r["path"]).name: r["result"] for r in map(json.loads, out.read_text().splitlines())}
    assert rows["late.mp4"]["status"] == "scored" and rows["gone.mp4"]["status"] == "ineligible"
    assert len(rows) == 2 and len(model.calls_for("observe")) == 1


def test_a_manifest_folder_is_named_a_folder(monkeypatch, tmp_path) -> None:
    """A folder given as the manifest was reported as "manifest not found" (it is there); the error now says it
    is a folder and, where the folder holds one, names its manifest.jsonl. Nothing is written."""
    _env(monkeypatch, tmp_path)
    folder = tmp_path / "clips"
    folder.mkdir()
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["score-batch", str(folder), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert f"manifest {folder} is a folder; give the manifest file's path" in res.output, res.output
    assert "not found" not in res.output and not out.exists()
    (folder / "manifest.jsonl").write_text("")
    res = runner.invoke(app, ["score-batch", str(folder), "--out", str(out)])
    assert res.exit_code == 2 and f"e.g. {folder / 'manifest.jsonl'}" in res.output, res.output
    res = runner.invoke(app, ["score-batch", str(tmp_path / "nope.jsonl"), "--out", str(out)])
    assert res.exit_code == 2 and "manifest not found" in res.output, res.output


def test_a_resume_says_how_many_skipped_rows_a_retry_could_fix(monkeypatch, tmp_path) -> None:
    """A plain resume skips every item already in the output, the ones a dead endpoint made ineligible too, and
    said nothing about them: "0 to score", as if the batch were complete. It now counts them and names
    --retry-ineligible (rows ineligible for bad input or video are not counted: a rerun fails them again)."""
    from graph.batch import read_manifest
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    manifest = square_batch(tmp_path, 3)
    earlier = [{"status": "ineligible", "reasons": ["observe: transport: APIConnectionError after 5 attempts"]},
               {"status": "ineligible", "reasons": ["quality: video: c1.mp4: cannot be opened as a video"]},
               {"status": "scored", "reward": 0.5, "T": 0.5, "P": 0.5, "V": 0.5}]
    out = tmp_path / "results.jsonl"
    out.write_text("".join(json.dumps({**{k: it[k] for k in ("key", "line", "path", "instruction", "preset",
                                                              "manifest")}, "result": r}) + "\n"
                           for it, r in zip(read_manifest(manifest, "visual_verify"), earlier, strict=True)))
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output, res.output
    assert (f"1 of the rows already in {out} ineligible for a reason a rerun can fix: --retry-ineligible scores it "
            "again") in res.output
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "1 to score" in res.output and "a rerun can fix" not in res.output, res.output


def test_a_resume_against_another_endpoint_is_refused(monkeypatch, tmp_path) -> None:
    """A served model name says little about the weights (vLLM serves any `--served-model-name`): a resume against
    another server under the same name kept the first server's rewards for the skipped items beside the new
    server's, as the stage cache once did (graph/cache.py). One server written two ways is one endpoint, and a
    row that recorded no endpoint (written before rows did) is taken as matching."""
    args, out, res = _scored_once(monkeypatch, tmp_path)
    assert res.exit_code == 0, res.output
    row = json.loads(out.read_text())
    assert row["scorer"]["endpoint"] == "http://127.0.0.1:9/v1"
    before = out.read_text()
    monkeypatch.setenv("RAA_BASE_URL", "http://finetune-host:8000/v1")
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "http://127.0.0.1:9/v1" in res.output and "http://finetune-host:8000/v1" in res.output, res.output
    assert out.read_text() == before
    monkeypatch.setenv("RAA_BASE_URL", "HTTP://127.0.0.1:9/v1/")  # the same server
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output, res.output
    legacy = {**row, "scorer": {"model": "stub-model", "temperature": 0.0}}  # written before rows named endpoints
    out.write_text(json.dumps(legacy) + "\n")
    monkeypatch.setenv("RAA_BASE_URL", "http://finetune-host:8000/v1")
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output, res.output


def test_a_run_that_ends_with_outage_rows_names_retry_ineligible(monkeypatch, tmp_path) -> None:
    """A run whose endpoint dropped out mid-batch ended with "ineligible (observe: transport): 2" and nothing
    about --retry-ineligible: only a later plain resume named it. The run now says it too, in the resume's words
    (`graph.batch_resume.fixable_lines`), and a run that ends with none says nothing of it."""
    import httpx
    import openai

    from tests.graph_scripts import full_script, square_batch

    model = _scripted(monkeypatch, tmp_path)
    manifest = square_batch(tmp_path, 2)
    down = openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
    model.script["observe"] = [down]
    out = tmp_path / "results.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "ineligible (observe: transport): 2" in res.output, res.output
    assert (f"2 of the rows already in {out} ineligible for a reason a rerun can fix: --retry-ineligible scores them "
            "again") in res.output, res.output
    res = runner.invoke(app, [*args, "--retry-ineligible"])  # still down at the retry: said again
    assert res.exit_code == 0 and "2 to score" in res.output and "--retry-ineligible scores them" in res.output
    model.script["observe"] = full_script()["observe"]  # back up: nothing left to retry, nothing said
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "2 to score" in res.output and "a rerun can fix" not in res.output, res.output


def test_a_repeated_lines_outage_row_is_not_counted_among_the_rows_scored_again(monkeypatch, tmp_path) -> None:
    """A line repeating an earlier line's clip and instruction under another id holds a copy of that line's row
    ("repeat_of"): --retry-ineligible scores the clip once and writes the copy again from the new row. The count of
    rows "--retry-ineligible scores again" (at the end of a run, on a plain resume) took the copies as rows scored
    again: 3 for 2 clips. The copies are now named apart."""
    import httpx
    import openai

    from tests.graph_scripts import PUSH, full_script, square_clips

    model = _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 2)
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"path": path, "instruction": PUSH, "id": i}) + "\n"
                                for i, path in enumerate(["c0.mp4", "c0.mp4", "c1.mp4"])))
    model.script["observe"] = [openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1"))]
    out = tmp_path / "results.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify"]
    scored = (f"2 of the rows already in {out} ineligible for a reason a rerun can fix: --retry-ineligible scores "
              "them again")
    copied = (f"1 row(s) already in {out} of a line repeating an earlier line's clip and instruction hold its "
              "result: --retry-ineligible writes it again from that line's row")
    for run in (args, args):  # the run that wrote the rows, then a plain resume
        res = runner.invoke(app, run)
        assert res.exit_code == 0 and "scored=0 zero=0 ineligible=" in res.output, res.output
        assert scored in res.output and copied in res.output, res.output
    model.script["observe"] = full_script()["observe"]
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "2 to score, 1 to take an earlier line's result" in res.output, res.output
    assert f"2 ineligible row(s) removed from {out} to score again" in res.output, res.output  # not the copy
    assert "scored=3 zero=0 ineligible=0" in res.output and "a rerun can fix" not in res.output, res.output


def test_the_retry_hint_is_a_command_that_reruns_the_same_batch(monkeypatch, tmp_path) -> None:
    """The rows a rerun can fix were told with "--retry-ineligible scores them again", naming neither the manifest
    nor --preset nor --draw: the command a researcher pieced from it scored the manifest at preset "full" and draw 0,
    another batch, and left these rows as they were. The hint is now the batch's own command with the flag."""
    import shlex

    import httpx
    import openai

    from tests.graph_scripts import full_script, square_batch

    model = _scripted(monkeypatch, tmp_path)
    manifest = square_batch(tmp_path, 2, name="my manifest.jsonl")
    model.script["observe"] = [openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1"))]
    out = tmp_path / "results.jsonl"
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify",
                              "--draw", "1"])
    assert res.exit_code == 0 and "ineligible=2" in res.output, res.output
    [hint] = [line[line.index("raa score-batch"):] for line in res.output.splitlines()
              if "raa score-batch" in line and "--retry-ineligible" in line.split("raa score-batch", 1)[1]]
    command = shlex.split(hint)
    assert command[:3] == ["raa", "score-batch", str(manifest)] and "--retry-ineligible" in command, hint
    model.script["observe"] = full_script()["observe"]  # the endpoint back: the hint's command scores both again
    res = runner.invoke(app, command[1:])
    assert res.exit_code == 0 and "2 to score" in res.output and "scored=2" in res.output, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and {(r["preset"], r["draw"], r["result"]["status"]) for r in rows} == {
        ("visual_verify", 1, "scored")}, rows


def test_the_retry_hint_of_a_manifest_named_with_a_dash_runs(monkeypatch, tmp_path) -> None:
    """A manifest given as "./-clips.jsonl" (a name starting with "-") reached the hint as "-clips.jsonl" (a Path drops
    the "./"), which the command line reads as an option: the printed command failed with "No such option"."""
    import shlex

    import httpx
    import openai

    from tests.graph_scripts import full_script, square_batch

    model = _scripted(monkeypatch, tmp_path)
    square_batch(tmp_path, 1, name="-clips.jsonl")
    monkeypatch.chdir(tmp_path)
    model.script["observe"] = [openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1"))]
    res = runner.invoke(app, ["score-batch", "./-clips.jsonl", "--out", "o.jsonl", "--preset", "visual_verify"])
    assert res.exit_code == 0 and "ineligible=1" in res.output, res.output
    [hint] = [line.strip() for line in res.output.splitlines() if line.strip().startswith("raa score-batch")]
    model.script["observe"] = full_script()["observe"]
    res = runner.invoke(app, shlex.split(hint)[1:])
    assert res.exit_code == 0 and "scored=1" in res.output, res.output
