"""What ``training.generate`` leaves on disk per video: the manifest row's ``iteration`` and the video file itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import training.generate as gen
from training.config import PromptSpec
from training.config_io import load_config
from training.export_folder import save_policy
from training.generate import generate
from training.models import build_world_model

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"
PROMPT = [PromptSpec("push the red block to the left", image_seed=1)]


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    cfg = load_config(SMOKE, ["--num_steps", "2", "--sde_window", "[0, 1]", "--num_frames", "5"])
    return save_policy(build_world_model(cfg, "cpu"), cfg, tmp_path_factory.mktemp("run") / "final", iteration=30,
                       source="unit")


def test_base_videos_are_rows_of_iteration_0(policy, tmp_path):
    """``--weights base`` rows said ``iteration: 30``, the export's, for videos of the untouched base model: a
    table grouping scores by iteration put the base videos under the trained policy's iteration. The base model is
    the policy before its first update, iteration 0 (the held-out evaluation's baseline row); generate.json keeps
    the export's iteration, which names the policy folder the base was read through."""
    trained = generate(policy, tmp_path / "trained", prompts=PROMPT)
    base = generate(policy, tmp_path / "base", prompts=PROMPT, weights="base")
    rows = {name: [json.loads(line) for line in s.manifest.read_text().splitlines()]
            for name, s in (("trained", trained), ("base", base))}
    assert [r["iteration"] for r in rows["trained"]] == [30]
    assert [r["iteration"] for r in rows["base"]] == [0]
    assert json.loads((base.out / "generate.json").read_text())["iteration"] == 30


def test_a_kill_right_after_a_video_is_written_leaves_no_stray_file(policy, tmp_path, monkeypatch):
    """generate wrote each video to ``.KEY.partial.mp4`` and renamed it, on top of write_video's own temporary name
    and rename: a kill between the two renames left a whole hidden video that no later call removed. write_video
    already never leaves a cut file under the name it is given."""
    real = gen.write_video

    def killed_after(path, frames, **kwargs):  # noqa: ANN001, ANN003, ANN202
        real(path, frames, **kwargs)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(gen, "write_video", killed_after)
        with pytest.raises(KeyboardInterrupt):
            generate(policy, tmp_path / "out", prompts=PROMPT)
    videos = tmp_path / "out" / "videos"
    assert sorted(p.name for p in videos.iterdir()) == ["p0000_s00.mp4"]  # whole, and not yet in the manifest
    again = generate(policy, tmp_path / "out", prompts=PROMPT)
    assert (again.written, again.skipped) == (1, 0)  # no row: sampled again, the file replaced
    assert sorted(p.name for p in videos.iterdir()) == ["p0000_s00.mp4"]


@pytest.mark.slow  # three videos of the tiny model (~20-40 s on a shared CPU)
def test_a_base_folder_of_an_older_run_resumes_with_every_row_at_iteration_0(policy, tmp_path):
    """A ``--weights base`` folder written before base rows said 0 holds rows of the export's iteration (30); a
    rerun with more samples (the same settings, so the folder is taken up) appended rows of iteration 0 next to
    them, and a table grouping by iteration split one model's videos over two iterations. The rows already there
    are rewritten to the folder's one iteration when it resumes."""
    first = generate(policy, tmp_path / "base", prompts=PROMPT, weights="base")
    older = [{**json.loads(line), "iteration": 30} for line in first.manifest.read_text().splitlines()]
    first.manifest.write_text("".join(json.dumps(row) + "\n" for row in older))
    again = generate(policy, tmp_path / "base", prompts=PROMPT, weights="base", samples=2)
    assert (again.written, again.skipped) == (1, 1)
    rows = [json.loads(line) for line in again.manifest.read_text().splitlines()]
    assert [(r["key"], r["iteration"]) for r in rows] == [("p0000_s00", 0), ("p0000_s01", 0)]
