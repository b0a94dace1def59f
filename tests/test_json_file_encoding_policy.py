"""policy.checkpoint's readers (and training.provenance's, read as "utf-8" without skipping a byte-order mark) of a checkpoint's JSON files (a part's weight index, a local folder's config) still
decoded them in the system's default encoding (`Path.read_text()`) after the other readers of JSON files were moved to
UTF-8 (`tools.jsonl.parsed_file` / `json_text`): under LANG=C without UTF-8 mode, an index or config of non-ASCII
text this repo or diffusers wrote as UTF-8 was "cannot be read" (a launch refused for a good checkpoint). The
default encoding is patched to ASCII as in tests.test_json_file_encoding."""

from __future__ import annotations

import json

import pytest

from tests.test_json_file_encoding import NON_ASCII, _write, ascii_default  # noqa: F401 - the fixture


def test_weight_index_of_a_part(tmp_path, ascii_default):  # noqa: F811
    from policy.checkpoint import weights_missing

    _write(tmp_path / "diffusion_pytorch_model.safetensors.index.json",
           {"metadata": {"by": NON_ASCII}, "weight_map": {"a.weight": "diffusion_pytorch_model-1.safetensors"}})
    assert "diffusion_pytorch_model-1.safetensors" in (weights_missing(tmp_path) or "")  # read: its shard named
    (tmp_path / "diffusion_pytorch_model-1.safetensors").write_bytes(b"")
    assert weights_missing(tmp_path) is None


def test_local_checkpoint_config(tmp_path, ascii_default):  # noqa: F811
    from policy.checkpoint import CheckpointFileUnreadable, load_checkpoint_json

    def no_hub(*_args, **_kwargs):
        raise AssertionError("a local folder is read from disk")

    _write(tmp_path / "config.json", {"_class_name": "X", "note": NON_ASCII})
    assert load_checkpoint_json(tmp_path, None, "config.json", None, no_hub) == {"_class_name": "X", "note": NON_ASCII}
    (tmp_path / "config.json").write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": 1}).encode())
    assert load_checkpoint_json(tmp_path, None, "config.json", None, no_hub) == {"a": 1}  # a BOM skipped
    (tmp_path / "config.json").write_bytes(b'{"a": "caf\xe9"}')
    with pytest.raises(CheckpointFileUnreadable, match="cannot be read"):
        load_checkpoint_json(tmp_path, None, "config.json", None, no_hub)


def test_reward_backbone_record_with_a_byte_order_mark(tmp_path):
    # read as "utf-8", not through parsed_file: a BOM (a record opened and saved in a Windows editor) made it no
    # record, and a resumed run compared its backbone with nothing (its change went unsaid)
    from training.provenance import REWARD_BACKBONE, read_reward_backbone

    (tmp_path / REWARD_BACKBONE).write_bytes(b"\xef\xbb\xbf" + json.dumps({"model": NON_ASCII}).encode())
    assert read_reward_backbone(tmp_path) == {"model": NON_ASCII}
    (tmp_path / REWARD_BACKBONE).write_bytes(b'{"model": "caf\xe9"}')
    assert read_reward_backbone(tmp_path) is None
