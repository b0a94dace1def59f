"""A hub id's scheduler config read offline from the HF cache (policy/checkpoint.py ``load_checkpoint_json``).

Offline (``HF_HUB_OFFLINE=1``: a compute node without internet, the checkpoint downloaded before), a cached
``scheduler/scheduler_config.json`` is read as online. A repo the hub once answered has no such file (the cache's
``.no_exist`` marker, written on that 404) has none offline too: it falls back to 3.0 as the same launch online
does. It was refused as a config "that could not be read" (the hub not reached), so the launch that ran online
stopped offline, naming ``--shift``. huggingface_hub's offline mode and cache folder are set on its constants
(read from the environment at import); no network is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.checkpoint import CheckpointFileUnreadable
from policy.schedule_shift import DEFAULT_SHIFT, checkpoint_shift

SHA = "a" * 40


def _repo(cache: Path, name: str) -> Path:
    """A cached snapshot of hub repo ``org/name`` at ``SHA`` (``refs/main`` naming it)."""
    repo = cache / f"models--org--{name}"
    (repo / "snapshots" / SHA).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(SHA)
    return repo


# diffusers' load_config passes hf_hub_download an argument huggingface_hub deprecated; upstream, not ours
@pytest.mark.filterwarnings("ignore:The `local_dir_use_symlinks` argument is deprecated:UserWarning")
def test_offline_a_hub_id_reads_its_cached_scheduler_and_falls_back_where_the_hub_said_it_has_none(
        tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    wan = _repo(cache, "wan")
    (wan / "snapshots" / SHA / "scheduler").mkdir()
    (wan / "snapshots" / SHA / "scheduler" / "scheduler_config.json").write_text(json.dumps(
        {"_class_name": "UniPCMultistepScheduler", "flow_shift": 5.0, "use_flow_sigmas": True}))
    bare = _repo(cache, "bare")  # the hub answered 404 for its scheduler config once (huggingface_hub's marker)
    (bare / ".no_exist" / SHA / "scheduler").mkdir(parents=True)
    (bare / ".no_exist" / SHA / "scheduler" / "scheduler_config.json").touch()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert checkpoint_shift("org/wan").value == 5.0 and checkpoint_shift("org/wan", "main").value == 5.0
    for revision in (None, SHA):
        bare_choice = checkpoint_shift("org/bare", revision)
        assert bare_choice.value == DEFAULT_SHIFT
        assert bare_choice.source == "the default (org/bare has no scheduler/scheduler_config.json)"
    # nothing cached: the hub not reached, and the file may be there: refused, as before
    with pytest.raises(CheckpointFileUnreadable, match="org/uncached's scheduler/scheduler_config.json cannot be"):
        checkpoint_shift("org/uncached")
