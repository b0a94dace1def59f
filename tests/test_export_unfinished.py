"""training.export refuses, by name, a checkpoint folder that is a save killed part-way (no layout.json, numbered
after a finished checkpoint: training/run_dir.py `unfinished_checkpoints`)."""

from __future__ import annotations

import pytest
import torch
from checkpoint_runs import saved_run

from training.export import ExportError, export_policy, main
from training.resume import StateLayout, write_layout


def test_a_save_killed_part_way_is_refused_as_such(tmp_path, capsys):
    """A ZeRO-3 save killed after its model-states file (whose module holds no weights) and before the shard files
    looked like a ZeRO stage-0 checkpoint: the export blamed the config ("the checkpoint does not match this
    config's model: missing trainable weights") for what is a partial save, and a ZeRO-2 one was exported from
    whatever it held."""
    cfg, ckpt = saved_run(tmp_path)
    write_layout(ckpt / "iter_000003", StateLayout(3, "float32"), 1)  # the finished checkpoint `latest` names
    killed = ckpt / "iter_000005"
    killed.mkdir()
    torch.save({"module": {}}, killed / "mp_rank_00_model_states.pt")
    with pytest.raises(ExportError, match=r"iter_000005 is a save killed part-way \(no layout.json.*iter_000003"):
        export_policy(cfg, tmp_path / "out", tag="iter_000005")
    assert main(["--run", str(tmp_path / "run"), "--tag", "iter_000005"]) == 2
    assert "a save killed part-way" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "run" / "export-iter_000005").exists()
