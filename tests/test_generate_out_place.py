"""``training.generate --out`` inside an export folder is refused: the next export into that folder (the trainer's
end-of-run ``final/``, ``training.export``) replaces it whole, deleting the videos and their scores with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.config_io import load_config
from training.export_folder import save_policy
from training.generate import GenerateError, generate, main
from training.models import build_world_model

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


@pytest.fixture
def policy(tmp_path) -> Path:
    cfg = load_config(SMOKE)
    return save_policy(build_world_model(cfg, "cpu"), cfg, tmp_path / "run" / "final", iteration=4, source="unit")


def test_out_inside_the_export_is_refused_before_anything_is_written(policy, monkeypatch):
    def no_load(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the model loaded before the refusal")

    monkeypatch.setattr("training.generate.load_policy", no_load)
    for out in (policy / "samples", policy, policy / "a" / "b"):
        with pytest.raises(GenerateError, match="inside the policy export"):
            generate(policy, out)
        assert not (policy / "samples").exists() and not (policy / "generate.json").exists()


def test_the_command_says_so_with_exit_2(policy, capsys):
    assert main(["--policy", str(policy), "--out", str(policy / "samples")]) == 2
    assert "replaces it whole" in capsys.readouterr().err


def test_a_sibling_folder_is_fine(policy, monkeypatch):
    """Beside the export (run/samples) is where the README's examples put them; only a folder inside is refused."""
    monkeypatch.setattr("training.generate.load_policy", lambda *_a, **_k: (_ for _ in ()).throw(RuntimeError("ok")))
    with pytest.raises(RuntimeError, match="ok"):
        generate(policy, policy.parent / "samples")


def test_why_a_folder_inside_is_lost(policy, tmp_path):
    """What the refusal prevents: re-exporting into final/ (the trainer's end, training.export) deletes all in it."""
    (policy / "samples").mkdir()
    (policy / "samples" / "scores.jsonl").write_text("{}\n")
    cfg = load_config(SMOKE)
    save_policy(build_world_model(cfg, "cpu"), cfg, policy, iteration=5, source="unit")
    assert not (policy / "samples").exists()


def test_a_folder_whose_first_call_wrote_no_video_takes_other_settings(policy, tmp_path, monkeypatch):
    """generate.json is written before the model loads: a first call that failed there (CUDA out of memory, say)
    left a folder without a video that every retry with other settings (``--device cpu``, another seed) was
    refused as holding "videos generated with other settings". As a training output_dir without a checkpoint or a
    metrics row (training/run_dir.py), a folder whose manifest has no row holds nothing to keep apart."""
    def load_fails(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr("training.generate.load_policy", load_fails)
    with pytest.raises(RuntimeError, match="out of memory"):
        generate(policy, tmp_path / "out", seed=0)
    with pytest.raises(RuntimeError, match="out of memory"):  # past the folder's claim: the retry got that far
        generate(policy, tmp_path / "out", seed=5)
    assert json.loads((tmp_path / "out" / "generate.json").read_text())["seed"] == 5
    (tmp_path / "out" / "manifest.jsonl").write_text('{"key": "p0000_s00", "path": "videos/p0000_s00.mp4"}\n')
    with pytest.raises(GenerateError, match=r"other settings \(differing: \['seed'\]\)"):  # a row: refused as before
        generate(policy, tmp_path / "out", seed=7)
    (tmp_path / "out" / "manifest.jsonl").write_text("\n")  # created, no row (the first failed while sampling)
    with pytest.raises(RuntimeError, match="out of memory"):
        generate(policy, tmp_path / "out", seed=7)


def test_a_folder_with_videos_but_no_manifest_row_keeps_its_settings(policy, tmp_path, monkeypatch):
    """The take-over above is for a folder that holds nothing: one whose manifest lost its rows (deleted to start
    the list again, say) still holds the earlier call's videos, and a call with another seed or policy mixed its
    videos with them in videos/ (what a metric over the folder's clips reads)."""
    def load_fails(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr("training.generate.load_policy", load_fails)
    with pytest.raises(RuntimeError, match="out of memory"):
        generate(policy, tmp_path / "out", seed=0)
    (tmp_path / "out" / "videos").mkdir()
    (tmp_path / "out" / "videos" / "p0000_s00.mp4").write_bytes(b"a video of seed 0")
    with pytest.raises(GenerateError, match=r"other settings \(differing: \['seed'\]\)"):
        generate(policy, tmp_path / "out", seed=5)
    assert json.loads((tmp_path / "out" / "generate.json").read_text())["seed"] == 0
