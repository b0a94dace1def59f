"""What a tool service serves (`served_identity`, the `SERVED_HEADER` digest a client pins) is the content of its
models: their weights, configuration and windows, and the kind of device. It held the absolute paths of the
weights and the device's name, so replicas behind one URL holding the same weights in other folders answered as
"other models", and every client pinned to one of them faulted on the next answer from another."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_motion_cotracker import HUBCONF
from vjepa_files import save_tiny_vjepa

from tools.motion import CoTracker3Tracker, LKTracker
from tools.surprise import VJEPA2SurpriseScorer
from tools.toolbox import served_identity


def _cotracker(folder: Path, shift: tuple[float, float]) -> CoTracker3Tracker:
    repo = folder / "co-tracker"
    repo.mkdir(parents=True)
    (repo / "hubconf.py").write_text(HUBCONF)
    ckpt = folder / "scaled_offline.pth"
    torch.save({"model": {"shift": torch.tensor(shift)}}, ckpt)
    return CoTracker3Tracker(hub_dir=repo, checkpoint=ckpt).load()


def test_replicas_with_the_same_tracker_weights_in_other_folders_serve_the_same(tmp_path):
    a = _cotracker(tmp_path / "a", (1.5, -2.0))
    b = _cotracker(tmp_path / "replica" / "b", (1.5, -2.0))
    other = _cotracker(tmp_path / "c", (1.5, -2.5))
    assert served_identity(a, None) == served_identity(b, None)
    assert served_identity(other, None) != served_identity(a, None)


@pytest.fixture(scope="module")
def vjepa_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("vjepa")
    return save_tiny_vjepa(root / "one"), save_tiny_vjepa(root / "two" / "copy")


def test_replicas_with_the_same_vjepa_weights_in_other_folders_serve_the_same(vjepa_folders):
    one, two = (VJEPA2SurpriseScorer.from_pretrained(str(f)) for f in vjepa_folders)
    tracker = LKTracker()
    assert served_identity(tracker, one) == served_identity(tracker, two)
    windows = VJEPA2SurpriseScorer.from_pretrained(str(vjepa_folders[0]), top_k=1)
    assert served_identity(tracker, windows) != served_identity(tracker, one)  # what the evidence holds differs


def test_other_vjepa_weights_serve_other_models(vjepa_folders, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = save_tiny_vjepa(tmp_path / "tuned")
    weights = load_file(folder / "model.safetensors")
    name = sorted(weights)[0]
    weights[name] = weights[name] + 1
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    tuned = VJEPA2SurpriseScorer.from_pretrained(str(folder))
    first = VJEPA2SurpriseScorer.from_pretrained(str(vjepa_folders[0]))
    assert served_identity(LKTracker(), tuned) != served_identity(LKTracker(), first)
