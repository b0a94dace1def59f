"""training.reshard and training.export on one node's copy of a checkpoint saved with DeepSpeed's node-local
storage (``checkpoint.use_node_local_storage``): each node's folder holds only its own ranks' shard files, and
the number of ranks that saved is the one layout.json records (training/resume.py ``read_world``). Counting the
shard files in the folder took node 0's half for the whole checkpoint."""

from __future__ import annotations

import pytest

from tests.test_checkpoints import SMOKE, _fake_checkpoint
from training.config_io import load_config
from training.export import ExportError, export_policy
from training.reshard import ReshardError, reshard
from training.resume import StateLayout, write_layout


def _node0_copy(ckpt, ranks: int = 1, world: int | None = 2) -> None:
    _fake_checkpoint(ckpt, "iter_000002", ranks=ranks)
    write_layout(ckpt / "iter_000002", StateLayout(2, "float32"), world=world)


def test_reshard_refuses_one_nodes_share_of_a_checkpoint(tmp_path):
    """ds_to_universal was run on the 1 shard file node 0 holds of a 2-rank checkpoint."""
    ckpt = tmp_path / "checkpoints"
    _node0_copy(ckpt)
    with pytest.raises(ReshardError, match=r"holds 1 of 2 ranks' files; copy every node's shard files into one "
                                           r"folder first"):
        reshard(ckpt)
    assert not (ckpt / "iter_000002_universal.partial").exists()


def test_export_refuses_one_nodes_share_of_a_checkpoint(tmp_path):
    cfg = load_config(SMOKE, [f"--output_dir={tmp_path}"])
    _node0_copy(tmp_path / "checkpoints")
    with pytest.raises(ExportError, match=r"iter_000002 holds 1 of 2 ranks' files; copy every node's shard files"):
        export_policy(cfg, tmp_path / "final")


def test_more_shard_files_than_ranks_that_saved_are_refused_too(tmp_path):
    """Files of another save (a tag saved again by fewer ranks) would be merged in as if they were this one's."""
    ckpt = tmp_path / "checkpoints"
    _node0_copy(ckpt, ranks=3)
    with pytest.raises(ReshardError, match="holds shard files of 3 ranks, but 2 saved it"):
        reshard(ckpt)


def test_a_whole_checkpoint_or_one_without_a_recorded_world_is_converted_as_before(tmp_path):
    """All shard files present, or a checkpoint saved before layout.json recorded world_size (unknown: the
    folder's files are all there is to go on): DeepSpeed's converter runs (and refuses the fake shards)."""
    for world, ranks in ((2, 2), (None, 1)):
        ckpt = tmp_path / f"w{world}" / "checkpoints"
        _node0_copy(ckpt, ranks=ranks, world=world)
        with pytest.raises(ReshardError, match="ds_to_universal failed"):
            reshard(ckpt)
