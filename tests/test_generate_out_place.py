"""``training.generate --out`` inside an export folder is refused: the next export into that folder (the trainer's
end-of-run ``final/``, ``training.export``) replaces it whole, deleting the videos and their scores with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config_io import load_config
from training.export import save_policy
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
