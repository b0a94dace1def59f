"""A hub id's scheduler config read offline from the HF cache (policy/checkpoint.py ``load_checkpoint_json``).

Offline (``HF_HUB_OFFLINE=1``: a compute node without internet, the checkpoint downloaded before), a cached
``scheduler/scheduler_config.json`` is read as online. A repo the hub once answered has no such file (the cache's
``.no_exist`` marker, written on that 404) has none offline too: it falls back to 3.0 as the same launch online
does. It was refused as a config "that could not be read" (the hub not reached), so the launch that ran online
stopped offline, naming ``--shift``. Run in a child process: the HF cache and offline mode are read from the
environment when huggingface_hub is imported; no network is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHA = "a" * 40
PROBE = f"""
from policy.checkpoint import CheckpointFileUnreadable
from policy.schedule_shift import checkpoint_shift
for repo, revision in [("org/wan", None), ("org/wan", "main"), ("org/bare", None), ("org/bare", "{SHA}"),
                       ("org/uncached", None)]:
    try:
        choice = checkpoint_shift(repo, revision)
        print(repo, revision, choice.value, choice.source)
    except CheckpointFileUnreadable as exc:
        print(repo, revision, "refused", exc)
"""


def _repo(cache: Path, name: str) -> Path:
    """A cached snapshot of hub repo ``org/name`` at ``SHA`` (``refs/main`` naming it)."""
    repo = cache / f"models--org--{name}"
    (repo / "snapshots" / SHA).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(SHA)
    return repo


def test_offline_a_hub_id_reads_its_cached_scheduler_and_falls_back_where_the_hub_said_it_has_none(tmp_path):
    cache = tmp_path / "hub"
    wan = _repo(cache, "wan")
    (wan / "snapshots" / SHA / "scheduler").mkdir()
    (wan / "snapshots" / SHA / "scheduler" / "scheduler_config.json").write_text(json.dumps(
        {"_class_name": "UniPCMultistepScheduler", "flow_shift": 5.0, "use_flow_sigmas": True}))
    bare = _repo(cache, "bare")  # the hub answered 404 for its scheduler config once (huggingface_hub's marker)
    (bare / ".no_exist" / SHA / "scheduler").mkdir(parents=True)
    (bare / ".no_exist" / SHA / "scheduler" / "scheduler_config.json").touch()
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("org/wan None 5.0 ") and lines[1].startswith("org/wan main 5.0 ")
    assert lines[2] == "org/bare None 3.0 the default (org/bare has no scheduler/scheduler_config.json)", lines
    assert lines[3].startswith(f"org/bare {SHA} 3.0 the default"), lines
    # nothing cached: the hub not reached, the file may be there: refused, as before
    assert lines[4].startswith("org/uncached None refused org/uncached's scheduler/scheduler_config.json cannot be"), lines
