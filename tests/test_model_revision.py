"""`TrainConfig.model_revision`: the hub revision (branch, tag or commit) of ``model_path`` a run loads.

`FlowWorldModel.from_pretrained` took a ``revision`` but no config field reached it, so a run could not pin
the base weights it trains from (Cosmos-Predict2.5 keeps its diffusers files on the branch
``diffusers/base/post-trained``; a moving branch changes the base under a resumed run). The loading test uses
a real Hugging Face cache folder holding two revisions of a tiny model, read offline in a child process (the
hub's cache and offline settings are read when huggingface_hub is imported): no network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from policy.world_model import FlowWorldModel
from training.config import ConfigError, TrainConfig
from training.config_io import load_config
from training.config_resume import config_changes, resume_conflicts

ROOT = Path(__file__).resolve().parents[1]
BRANCH = "diffusers/base/post-trained"
BASE = {"backend": "wan", "model_path": "org/tiny-wan", "reward": "brightness", "dataset": [{"text": "stack"}]}


def _hub_cache(root: Path) -> Path:
    """A Hugging Face hub cache holding ``org/tiny-wan``'s transformer at ``main`` (seed 1) and at the branch
    BRANCH (seed 2), laid out as huggingface_hub writes it (refs name the snapshot of each revision)."""
    repo = root / "models--org--tiny-wan"
    for ref, commit, seed in (("main", "a" * 40, 1), (BRANCH, "b" * 40, 2)):
        FlowWorldModel.tiny_wan(seed=seed).transformer.save_pretrained(repo / "snapshots" / commit / "transformer")
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return root


def _config(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**BASE, **fields}))
    return path


def test_a_config_and_the_command_line_set_the_model_revision(tmp_path):
    assert TrainConfig().model_revision is None  # the hub's default branch, as before
    assert load_config(_config(tmp_path, model_revision=BRANCH)).model_revision == BRANCH
    assert load_config(_config(tmp_path), ["--model_revision", "v1.0"]).model_revision == "v1.0"
    with pytest.raises(ConfigError, match="model_revision must be a non-empty"):
        load_config(_config(tmp_path), ["--model_revision", " "])


def test_a_resume_cannot_change_the_model_revision(tmp_path):
    """Another revision is other base weights: a LoRA checkpoint's adapter and the reference model would sit on
    another base than they were trained on."""
    saved = {**BASE, "model_revision": "v1"}
    cfg = load_config(_config(tmp_path, model_revision="v2"))
    changes = config_changes(saved, cfg)
    assert resume_conflicts(changes, cfg) == ["model_revision: 'v1' -> 'v2'"]


def test_a_revision_with_a_local_model_folder_is_refused_at_the_check(tmp_path):
    """A local folder has no revisions; from_pretrained refuses the pair, but only in every rank after start."""
    from training.model_check import check_model_path

    folder = tmp_path / "ckpt"
    FlowWorldModel.tiny_wan(seed=1).transformer.save_pretrained(folder / "transformer")
    cfg = load_config(_config(tmp_path, model_path=str(folder), model_revision=BRANCH))
    with pytest.raises(ConfigError, match=f"model_revision '{BRANCH}' is for a hub id, but model_path .* is a "
                                          "local folder"):
        check_model_path(cfg, parts="transformer")


@pytest.mark.slow
def test_the_model_revision_picks_the_weights_that_load(tmp_path):
    """build_world_model and the launch check read the hub id at the config's revision (the cache's branch
    holds other weights than its main)."""
    cache = _hub_cache(tmp_path / "hub")
    script = textwrap.dedent("""
        import sys
        from training.config_io import load_config
        from training.model_check import check_model_path
        from training.models import build_world_model

        cfg = load_config(sys.argv[1], sys.argv[2:])
        assert check_model_path(cfg, parts="transformer") is None  # in the cache at that revision: no download
        model = build_world_model(cfg, "cpu", parts="transformer")
        print(float(sum(p.detach().double().sum() for p in model.transformer.parameters())))
    """)
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    sums = {}
    for name, extra in (("branch", ["--model_revision", BRANCH]), ("main", [])):
        proc = subprocess.run([sys.executable, "-c", script, str(_config(tmp_path)), *extra], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        sums[name] = float(proc.stdout.strip().splitlines()[-1])
    for name, seed in (("branch", 2), ("main", 1)):
        want = float(sum(p.detach().double().sum() for p in FlowWorldModel.tiny_wan(seed=seed).transformer.parameters()))
        assert sums[name] == pytest.approx(want, rel=1e-12), name
    assert sums["branch"] != pytest.approx(sums["main"], rel=1e-6)
