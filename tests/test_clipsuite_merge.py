"""Clip suite: rendering part of a suite into a folder adds to its manifest (`evals.clipsuite.make_clips`)."""

from __future__ import annotations

import json
import os
import re

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest

from evals.clipsuite import ClipSuiteError, load_manifest, make_clips, suite_specs

SIDE = 48


def test_rendering_more_clips_into_a_suite_folder_adds_to_its_manifest(tmp_path):
    """A second partial render replaced the manifest: the clips rendered before were on disk but listed nowhere."""
    suite, specs = tmp_path / "suite", suite_specs("small", 0)
    uniform, static = (next(s.name for s in specs if s.pattern == p) for p in ("uniform", "static"))
    make_clips(suite, names=[uniform], size=SIDE, progress=False)
    manifest = make_clips(suite, names=[static], size=SIDE, progress=False)
    raw = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r["name"] for r in raw] == sorted([static, uniform])  # both, in suite order (names start with the index)
    make_clips(suite, names=[uniform], size=SIDE, progress=False)  # rendered again: one row, not two
    assert [r["name"] for r in load_manifest(suite)] == sorted([static, uniform])
    before = manifest.read_text()
    for other in ({"seed": 1}, {"size": SIDE + 16}):  # another suite: refused, nothing written
        kwargs = {"seed": 0, "size": SIDE, **other}
        with pytest.raises(ClipSuiteError, match="another suite"):
            make_clips(suite, names=[suite_specs("small", kwargs["seed"])[0].name], progress=False, **kwargs)
        assert manifest.read_text() == before


def test_a_clip_that_fails_to_render_again_keeps_its_file_and_row(tmp_path, monkeypatch):
    """A clip was written in place: a write that failed (a full disk) left the old clip cut, and its
    manifest row was dropped though its file was still there."""
    import tools.video

    suite, specs = tmp_path / "suite", suite_specs("small", 0)
    uniform, static = (next(s.name for s in specs if s.pattern == p) for p in ("uniform", "static"))
    make_clips(suite, names=[uniform, static], size=SIDE, progress=False)
    clip = suite / "clips" / f"{uniform}.mp4"
    before, rows = clip.read_bytes(), (suite / "manifest.jsonl").read_text()
    real = tools.video.write_video

    def cut(path, frames, fps=16.0, **kwargs):
        real(path, frames, fps, **kwargs)
        with open(path, "r+b") as fh:
            fh.truncate(len(before) // 2)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tools.video, "write_video", cut)
    with pytest.raises(ClipSuiteError, match="No space left"):
        make_clips(suite, names=[uniform], size=SIDE, progress=False)
    assert clip.read_bytes() == before
    assert (suite / "manifest.jsonl").read_text() == rows
    assert sorted(p.name for p in (suite / "clips").iterdir()) == sorted(f"{n}.mp4" for n in (static, uniform))


def test_an_odd_frame_size_is_refused_not_listed_under_a_size_its_clips_do_not_have(tmp_path):
    """H.264 4:2:0 pads an odd side to even: `size=33` wrote 34x34 clips that the manifest listed as 33x33."""
    from typer.testing import CliRunner

    from graph.cli import app

    uniform = next(s.name for s in suite_specs("small", 0) if s.pattern == "uniform")
    with pytest.raises(ClipSuiteError, match="even"):
        make_clips(tmp_path / "suite", names=[uniform], size=33, progress=False)
    assert not (tmp_path / "suite").exists()
    result = CliRunner().invoke(app, ["make-clips", "--out", str(tmp_path / "cli"), "--size", "33", "--limit", "1"])
    assert result.exit_code == 2 and "even" in result.output, result.output


def test_an_interrupted_render_never_leaves_rows_describing_clips_it_replaced(tmp_path, monkeypatch):
    """Rendering a whole suite of another seed into a folder rewrote the manifest only at the end: stopped part-way
    (Ctrl-C, a kill), the old manifest listed clips already replaced by the new seed's (another scene, another
    instruction) under the old rows. A row describing a clip about to be replaced is now dropped first."""
    import numpy as np

    import evals.clipsuite as cs
    from evals.scenes import RenderError

    def fake_render(spec, *, width, height):  # no MuJoCo: the manifest bookkeeping is what is tested
        return np.full((2, height, width, 3), spec.seed % 256, dtype=np.uint8)

    written: dict[str, int] = {}
    real_write, calls = cs.write_clip, []

    def write(path, frames, fps):
        calls.append(path)
        if len(calls) in (21, 24):  # the third clip of the second render, and of the third
            raise KeyboardInterrupt
        real_write(path, frames, fps)
        written[path.name] = int(frames[0, 0, 0, 0])

    def consistent() -> list[dict]:
        rows = load_manifest(suite)
        for row in rows:
            assert written[os.path.basename(row["path"])] == row["seed"] % 256, row["name"]
        return rows

    monkeypatch.setattr(cs, "render_clip", fake_render)
    monkeypatch.setattr(cs, "write_clip", write)
    suite = tmp_path / "suite"
    make_clips(suite, seed=0, size=16, progress=False)
    assert len(consistent()) == 18
    with pytest.raises(KeyboardInterrupt):  # the same suite again: the rows still describe the clips
        make_clips(suite, seed=0, size=16, progress=False)
    assert len(consistent()) == 18
    with pytest.raises(KeyboardInterrupt):  # another seed: the clips it replaced (or was replacing) are unlisted
        make_clips(suite, seed=1, size=16, progress=False)
    assert len(consistent()) == 15

    def no_gl(spec, *, width, height):
        raise RenderError("no GL context")

    monkeypatch.setattr(cs, "render_clip", no_gl)
    with pytest.raises(RenderError):  # nothing replaced: every row stays
        make_clips(suite, seed=1, size=16, progress=False)
    assert len(consistent()) == 15


def test_a_size_or_frame_count_that_is_not_a_whole_number_is_a_clear_error(tmp_path):
    """`render_clip(spec, width=64.0)` was a RenderError telling to set MUJOCO_GL=egl (MuJoCo's renderer refuses a
    float size), a float frame count a bare numpy TypeError, and `make_clips(size=64.5)` rendered 64 pixels."""
    import dataclasses

    from evals.clipsuite import render_clip

    spec = dataclasses.replace(suite_specs("small", 0)[0], frames=2)
    for width in (64.0, True):
        with pytest.raises(ValueError, match="whole number") as info:
            render_clip(spec, width=width, height=32)  # type: ignore[arg-type]
        assert "MUJOCO_GL" not in str(info.value)
    for frames in (2.0, True):
        with pytest.raises(ValueError, match="frames"):
            render_clip(dataclasses.replace(spec, frames=frames), width=32, height=32)  # type: ignore[arg-type]
    with pytest.raises(ClipSuiteError, match="whole number"):
        make_clips(tmp_path / "suite", names=[spec.name], size=64.5, progress=False)  # type: ignore[arg-type]
    assert not (tmp_path / "suite").exists()


@pytest.mark.parametrize("name", [["00_uniform"], {"a": 1}])
def test_a_row_whose_name_is_no_string_is_refused_as_another_suites(tmp_path, name):
    """A manifest row by hand whose ``name`` is a list or an object crashed the merge with a TypeError
    (unhashable) instead of being refused like any other row make_clips did not write."""
    suite = tmp_path / "suite"
    suite.mkdir()
    manifest = suite / "manifest.jsonl"
    manifest.write_text(json.dumps({"path": "clips/x.mp4", "name": name}) + "\n")
    before = manifest.read_text()
    with pytest.raises(ClipSuiteError, match="another suite"):
        make_clips(suite, names=[suite_specs("small", 0)[0].name], size=SIDE, progress=False)
    assert manifest.read_text() == before


@pytest.mark.parametrize("content, says", [
    (json.dumps({"path": "clips/x.mp4", "name": "x"}) + "\n", "lists 1 clip(s) of another suite"),
    ("not json\n", "cannot add clips to"),
])
def test_a_folder_whose_manifest_cannot_take_this_suite_is_a_usage_error(tmp_path, content, says):
    """`raa make-clips --out DIR --limit 1` where DIR's manifest lists another suite's clips (or cannot be read)
    exited 1, the code of a render that failed, though nothing was rendered: the --out folder asked for cannot
    take this suite, a usage error (exit 2) as any other --out problem. The library's ClipSuiteError is kept."""
    from typer.testing import CliRunner

    from graph.cli import app

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "manifest.jsonl").write_text(content)
    with pytest.raises(ClipSuiteError, match=re.escape(says)):
        make_clips(suite, names=[suite_specs("small", 0)[0].name], size=SIDE, progress=False)
    result = CliRunner().invoke(app, ["make-clips", "--out", str(suite), "--limit", "1", "--size", str(SIDE),
                                      "--no-progress"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    text = " ".join(result.output.split())
    assert text.startswith("error: ") and says in text and (suite / "manifest.jsonl").read_text() == content
    assert not (suite / "clips").exists()
