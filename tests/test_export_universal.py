"""training.export refuses, by name, a DeepSpeed universal checkpoint (``iter_NNNNNN_universal``, what
training/reshard.py converts a checkpoint to for a resume on another number of GPUs): it has no ZeRO shard
files, so it read as a ZeRO stage-0 checkpoint, and a ZeRO-3 run's (whose module file holds no weights) was
blamed on the config."""

from __future__ import annotations

import pytest
import torch
from checkpoint_runs import saved_run

from training.export import ExportError, export_policy, main


def _universal(ckpt, tag: str) -> None:
    """The folder ds_to_universal writes for a ZeRO-3 checkpoint: per-parameter files under zero/, and the
    model-states file whose module holds no weights."""
    folder = ckpt / tag
    (folder / "zero" / "world_model.transformer.proj.weight").mkdir(parents=True)
    torch.save({"param": torch.zeros(2)}, folder / "zero" / "world_model.transformer.proj.weight" / "fp32.pt")
    torch.save({"module": {}}, folder / "mp_rank_00_model_states.pt")


def test_a_universal_checkpoint_is_refused_naming_the_checkpoint_to_export(tmp_path, capsys):
    cfg, ckpt = saved_run(tmp_path)  # iter_000003, which `latest` names
    _universal(ckpt, "iter_000003_universal")
    with pytest.raises(ExportError) as refused:
        export_policy(cfg, tmp_path / "out", tag="iter_000003_universal")
    message = str(refused.value)
    assert "iter_000003_universal is a DeepSpeed universal checkpoint" in message, message
    assert "--tag iter_000003" in message and "does not match this config" not in message, message
    assert main(["--run", str(tmp_path / "run"), "--tag", "iter_000003_universal"]) == 2
    assert "universal checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "run" / "export-iter_000003_universal").exists()


def test_a_universal_checkpoint_whose_source_is_gone_says_what_else_to_export(tmp_path):
    cfg, ckpt = saved_run(tmp_path)
    _universal(ckpt, "iter_000001_universal")  # its source iter_000001 is not there
    with pytest.raises(ExportError) as refused:
        export_policy(cfg, tmp_path / "out", tag="iter_000001_universal")
    message = str(refused.value)
    assert "iter_000001 is not in" in message and "iter_000003" in message, message
