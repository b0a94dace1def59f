"""A relative checkpoint, hub dir or V-JEPA 2 folder names the file of the working directory the tool was built in:
the tool holds it as an absolute path. It kept the relative one, so the frame cache's key (`tracker_identity`,
`scorer_identity`: "checkpoint=ckpt.pth") was the same for two toolboxes built in two folders with two different
checkpoints (a notebook that changes folder between two runs), and the model loaded lazily, on first use, from
whatever folder the process was in by then, not the one the key and `raa doctor` had looked at."""

from __future__ import annotations

from pathlib import Path

from tools.motion import CoTracker3Tracker
from tools.surprise import DEFAULT_VJEPA2, VJEPA2SurpriseScorer
from tools.toolbox import scorer_identity, tracker_identity


def _two_folders(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        (folder / "models" / "vjepa").mkdir(parents=True)
        (folder / "ckpt.pth").write_bytes(b"weights of " + folder.name.encode())
    return a, b


def test_a_relative_checkpoint_is_the_one_of_the_folder_it_was_given_in(tmp_path, monkeypatch):
    a, b = _two_folders(tmp_path)
    monkeypatch.chdir(a)
    in_a = CoTracker3Tracker(checkpoint="ckpt.pth", hub_dir="hub")
    monkeypatch.chdir(b)
    in_b = CoTracker3Tracker(checkpoint="ckpt.pth", hub_dir="hub")
    assert in_a.checkpoint == a / "ckpt.pth" and in_a.hub_dir == a / "hub"
    assert tracker_identity(in_a) != tracker_identity(in_b)


def test_a_relative_vjepa_folder_is_the_one_of_the_folder_it_was_given_in(tmp_path, monkeypatch):
    a, b = _two_folders(tmp_path)
    monkeypatch.chdir(a)
    in_a = VJEPA2SurpriseScorer("models/vjepa")
    dotted = VJEPA2SurpriseScorer("./missing")  # only a path can start with ".": where it was asked for
    monkeypatch.chdir(b)
    in_b = VJEPA2SurpriseScorer("models/vjepa")
    assert in_a.model_id == str(a / "models" / "vjepa") and dotted.model_id == str(a / "missing")
    assert scorer_identity(in_a) != scorer_identity(in_b)


def test_a_hub_id_stays_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert VJEPA2SurpriseScorer(DEFAULT_VJEPA2).model_id == DEFAULT_VJEPA2


def test_a_toolbox_builds_its_tools_from_the_folder_its_settings_were_given_in(tmp_path, monkeypatch):
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    a, b = _two_folders(tmp_path)
    monkeypatch.chdir(a)
    box = Toolbox(ToolSettings(motion_backend="cotracker3", cotracker_checkpoint="ckpt.pth", vjepa_model="models/vjepa"))
    monkeypatch.chdir(b)  # before its first use, when the tools are built
    assert f"checkpoint={a / 'ckpt.pth'}" in box.tracker_identity
    assert box.surprise().model_id == str(a / "models" / "vjepa")
