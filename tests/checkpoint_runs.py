"""A saved smoke run with one (empty) checkpoint folder named by `latest`, for export and resume error tests."""

from __future__ import annotations

from pathlib import Path

from training.config_io import load_config, write_run_config

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def saved_run(tmp_path: Path):  # noqa: ANN201
    """(config, checkpoints folder) of a run saved under ``tmp_path/run`` whose `latest` names iter_000003."""
    cfg = load_config(SMOKE, [f"--output_dir={tmp_path / 'run'}"])
    ckpt = tmp_path / "run" / "checkpoints"
    (ckpt / "iter_000003").mkdir(parents=True)
    (ckpt / "latest").write_text("iter_000003")
    write_run_config(tmp_path / "run", cfg)
    return cfg, ckpt
