"""Clip suite files: make_clips' manifest and clips, bad sizes and names, load_manifest, the make-clips CLI."""

from __future__ import annotations

import dataclasses
import json
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest

from evals.clipsuite import (
    PATTERN_LABELS,
    ClipSpec,
    ClipSuiteError,
    ManifestError,
    load_manifest,
    make_clips,
    render_clip,
    suite_specs,
)

SIDE = 48


def _spec(pattern: str) -> ClipSpec:
    return next(spec for spec in suite_specs("small", 0) if spec.pattern == pattern)


# ---------------------------------------------------------------- manifest and make_clips

def test_make_clips_writes_a_decodable_manifest(tmp_path):
    from tools.video import probe

    names = [s.name for s in suite_specs("small", 0) if s.pattern in ("static", "uniform")]
    manifest = make_clips(tmp_path / "suite", preset="small", names=names, size=SIDE, progress=False)
    assert manifest == tmp_path / "suite" / "manifest.jsonl"
    raw = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r["path"] for r in raw] == [f"clips/{n}.mp4" for n in names]
    rows = load_manifest(manifest)
    assert {"path", "instruction", "label", "pattern", "frames", "fps", "seed", "task"} <= set(rows[0])
    for row in rows:
        assert os.path.isabs(row["path"]) and row["label"] == "failure"
        meta = probe(row["path"])
        assert meta.frames == row["frames"] and (meta.width, meta.height) == (SIDE, SIDE)
    assert load_manifest(tmp_path / "suite") == rows  # a folder holding manifest.jsonl works too


def test_a_bad_frame_size_is_refused_before_anything_is_written(tmp_path):
    """A size the renderer cannot take: past 1024 it read as a missing GL context ("set MUJOCO_GL=egl"),
    and under 16 every clip failed in turn and an existing suite's manifest was overwritten with none."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "manifest.jsonl").write_text('{"path": "clips/a.mp4", "instruction": "x", "label": "ordinary"}\n')
    for size in (8, 2048):
        with pytest.raises(ClipSuiteError) as info:
            make_clips(suite, names=[suite_specs("small", 0)[0].name], size=size, progress=False)
        assert len(load_manifest(suite)) == 1  # the suite already there is untouched
        assert "16 to 1024 pixels" in str(info.value) and "MUJOCO_GL" not in str(info.value)
    spec = dataclasses.replace(_spec("success"), frames=2)
    with pytest.raises(ValueError, match="16 to 1024 pixels"):
        render_clip(spec, width=1100, height=64)


def test_make_clips_rejects_unknown_names_and_bad_limits(tmp_path):
    with pytest.raises(ClipSuiteError, match="unknown clip names"):
        make_clips(tmp_path, names=["nope"], progress=False)
    with pytest.raises(ClipSuiteError, match="limit"):
        make_clips(tmp_path, limit=0, progress=False)
    name = suite_specs("small", 0)[0].name  # one name as a bare string was read letter by letter
    with pytest.raises(TypeError, match=f"single string '{name}'"):
        make_clips(tmp_path, names=name, progress=False)
    with pytest.raises(ClipSuiteError, match="names is empty"):  # it wrote an empty manifest
        make_clips(tmp_path, names=[], progress=False)
    assert not (tmp_path / "manifest.jsonl").exists()


@pytest.mark.parametrize("line,problem", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"path": "a.mp4", "instruction": "x"}', "'label'"),
    ('{"path": "a.mp4", "instruction": "x", "label": "great"}', "not one of"),
    ('{"path": "a.mp4", "instruction": "x", "label": "failure", "frames": 0}', "frames must be >= 1"),
    ('{"path": "a.mp4", "instruction": "x", "label": "failure", "fps": "16"}', "'fps'"),
    ('{"path": "a.mp4", "instruction": "x", "label": "failure", "fps": Infinity}', "fps must be a finite number > 0"),
    ('{"path": "a.mp4", "instruction": "x", "label": "failure", "fps": -Infinity}', "fps must be a finite number > 0"),
    ('{"path": "a.mp4", "instruction": "x", "label": "failure", "fps": NaN}', "fps must be a finite number > 0"),
    ('{"path": "a.mp4", "instruction": "x", "label": "failure", "fps": 0}', "fps must be a finite number > 0"),
    ('{"path": "a.mp4", "instruction": "x", "label": "failure", "fps": -16.0}', "fps must be a finite number > 0"),
    ('{"path": "a\\u0000.mp4", "instruction": "x", "label": "failure"}', "field 'path' .*no file name"),
])
def test_load_manifest_names_the_bad_line(tmp_path, line, problem):
    good = json.dumps({"path": "a.mp4", "instruction": "Push it.", "label": "ordinary"})
    path = tmp_path / "manifest.jsonl"
    path.write_text(f"{good}\n\n{line}\n")
    with pytest.raises(ManifestError, match=problem) as err:
        load_manifest(path)
    assert f"{path}:3:" in str(err.value)


def test_load_manifest_reads_any_positive_frame_rate_or_none(tmp_path):
    """make_clips writes 16.0; a hand-written 16, null or no fps is read too. A whole number too large for a float
    is still a number > 0: the finite check converted it, an OverflowError traceback instead of the manifest."""
    rows = [{"fps": 16.0}, {"fps": 16}, {"fps": None}, {}]
    path = tmp_path / "manifest.jsonl"
    lines = [json.dumps({"path": f"{i}.mp4", "instruction": "Push it.", "label": "ordinary", **r})
             for i, r in enumerate(rows)]
    lines.append('{"path": "big.mp4", "instruction": "Push it.", "label": "ordinary", "fps": 1' + "0" * 400 + "}")
    path.write_text("".join(line + "\n" for line in lines))
    assert [r.get("fps") for r in load_manifest(path)] == [16.0, 16, None, None, 10 ** 400]


def test_load_manifest_names_a_path_in_a_symlink_loop(tmp_path):
    """Resolving such a path raised a bare RuntimeError ("Symlink loop"): a traceback from `raa eval reward`."""
    (tmp_path / "l1").symlink_to(tmp_path / "l2")
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    path = tmp_path / "manifest.jsonl"
    path.write_text(json.dumps({"path": "l1/a.mp4", "instruction": "Push it.", "label": "ordinary"}) + "\n")
    with pytest.raises(ManifestError, match="field 'path'.*cannot be resolved") as err:
        load_manifest(path)
    assert f"{path}:1:" in str(err.value)


def test_load_manifest_missing_file(tmp_path):
    with pytest.raises(ManifestError, match="manifest not found"):
        load_manifest(tmp_path / "none.jsonl")


# ---------------------------------------------------------------- CLI

def _run_cli(args):
    from typer.testing import CliRunner

    from graph.cli import app

    return CliRunner().invoke(app, ["make-clips", *args])


def test_cli_renders_a_limited_suite(tmp_path):
    result = _run_cli(["--out", str(tmp_path), "--limit", "1", "--size", "32", "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = load_manifest(tmp_path / "manifest.jsonl")
    assert len(rows) == 1 and rows[0]["pattern"] == "success"
    assert "wrote 1 clip (1 ordinary)" in result.output  # it read "wrote 1 clips"


def test_cli_bad_preset_is_a_clear_usage_error(tmp_path):
    result = _run_cli(["--out", str(tmp_path), "--preset", "huge"])
    assert result.exit_code != 0
    text = " ".join(result.output.replace("│", " ").split())  # undo rich's boxed line wrapping
    assert "unknown preset 'huge'" in text and "paper, small" in text
    assert not (tmp_path / "manifest.jsonl").exists()


def test_a_negative_seed_is_a_usage_error_not_a_traceback(tmp_path):
    result = _run_cli(["--out", str(tmp_path), "--seed", "-1"])
    assert result.exit_code == 2, result.output  # a usage error, not a SeedSequence traceback
    assert "--seed" in result.output and not (tmp_path / "manifest.jsonl").exists()
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        suite_specs("small", -1)


@pytest.mark.parametrize("under", [False, True])
def test_an_out_that_is_a_file_is_a_usage_error_line_not_a_traceback(tmp_path, under):
    """`--out FILE` ended in a FileExistsError traceback, then exited 1 (the code of a render that failed) where
    `raa eval reward --out FILE` and `raa score-batch --out DIR` exit 2: it is a usage error naming the path."""
    (tmp_path / "taken").write_text("a file")
    out = tmp_path / "taken" / "clips" if under else tmp_path / "taken"
    result = _run_cli(["--out", str(out), "--limit", "1", "--size", "32", "--no-progress"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert f"error: cannot use --out {out}: " in result.output and "(it must be a folder)" in result.output
    assert (tmp_path / "taken").read_text() == "a file"


def test_make_clips_still_refuses_a_file_at_out_dir(tmp_path):
    """The library keeps its own refusal (a ClipSuiteError naming the path) for callers outside the CLI."""
    from evals.clipsuite import ClipSuiteError, make_clips

    (tmp_path / "taken").write_text("a file")
    with pytest.raises(ClipSuiteError, match="cannot write the clip suite to"):
        make_clips(tmp_path / "taken", limit=1, size=32, progress=False)


@pytest.mark.slow
def test_cli_small_preset_end_to_end(tmp_path):
    result = _run_cli(["--out", str(tmp_path), "--preset", "small", "--seed", "3"])
    assert result.exit_code == 0, result.output
    rows = load_manifest(tmp_path)
    assert {r["pattern"] for r in rows} == set(PATTERN_LABELS)
    assert all(os.path.getsize(r["path"]) > 0 for r in rows)
