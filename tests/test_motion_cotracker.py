"""CoTracker3 backend: load faults (never a silent switch to LK) and the real architecture end to end."""

from __future__ import annotations

import numpy as np
import pytest

from tools.errors import ToolFault
from tools.motion import CoTracker3Tracker, build_tracker


def small_clip(t_total: int = 6, h: int = 48, w: int = 64) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (t_total, h, w, 3), dtype=np.uint8)


def test_missing_checkpoint_path_is_a_load_fault():
    tracker = build_tracker("cotracker3", checkpoint="/nonexistent/scaled_offline.pth")
    with pytest.raises(ToolFault) as info:
        tracker.track(small_clip(), grid_size=2)
    assert info.value.tool == "motion" and info.value.kind == "load"
    assert "not found" in info.value.message


def test_no_weights_configured_is_a_load_fault():
    with pytest.raises(ToolFault, match="needs a checkpoint"):
        CoTracker3Tracker().load()


def test_corrupt_checkpoint_is_a_load_fault(tmp_path):
    pytest.importorskip("cotracker")
    bad = tmp_path / "scaled_offline.pth"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ToolFault) as info:
        CoTracker3Tracker(checkpoint=bad).load()
    assert info.value.kind == "load"


def test_missing_hub_dir_is_a_load_fault(tmp_path):
    with pytest.raises(ToolFault) as info:
        CoTracker3Tracker(hub_dir=tmp_path / "no-repo", allow_random_weights=True).load()
    assert info.value.kind == "load"


class _Exploding:
    interp_shape = (48, 64)  # the clip's size: a predictor is handed the video at its working shape

    def __call__(self, *args, **kwargs):
        raise RuntimeError("CUDA out of memory")


def test_run_failure_is_a_run_fault_not_lk():
    tracker = CoTracker3Tracker(predictor=_Exploding())
    with pytest.raises(ToolFault) as info:
        tracker.track(small_clip(), grid_size=2)
    assert info.value.kind == "run" and "out of memory" in info.value.message


class _FakePredictor:
    """Mimics CoTrackerPredictor's output contract: tracks [B,T,N,2], visibility bool [B,T,N]."""

    interp_shape = (48, 64)  # small_clip's size: the video reaches it unchanged

    def __call__(self, video, queries, backward_tracking):
        import torch

        b, t = video.shape[:2]
        n = queries.shape[1]
        tracks = queries[:, None, :, 1:].repeat(1, t, 1, 1).clone()
        tracks[:, -1, 0, 0] = 1e4  # point 0 leaves the image in the last frame
        return tracks, torch.ones(b, t, n, dtype=torch.bool)


def test_output_mapping_with_a_fake_predictor():
    tracker = CoTracker3Tracker(predictor=_FakePredictor())
    q = np.array([[0, 10, 12], [2, 30, 40]], float)
    tr = tracker.track(small_clip(), queries=q)
    assert tr.tracks.shape == (6, 2, 2) and tr.visible.shape == (6, 2)
    np.testing.assert_allclose(tr.tracks[0], q[:, 1:])
    assert tr.query_frames.tolist() == [0, 2]
    assert not tr.visible[-1, 0] and tr.visible[-1, 1] and tr.visible[:-1].all()


class _NanPredictor:
    """Gives point 0 (queried at frame 2) a moving track with NaN at frames 0, 4 and 5, point 1 (frame 0) NaN
    at its own query frame and infinity at frame 3."""

    interp_shape = (48, 64)  # small_clip's size: the video reaches it unchanged

    def __call__(self, video, queries, backward_tracking):
        import torch

        b, t = video.shape[:2]
        tracks = queries[:, None, :, 1:].repeat(1, t, 1, 1).clone()
        tracks[:, :, 0, 0] += torch.arange(t, dtype=tracks.dtype)  # x = 10 + frame
        tracks[:, [0, 4, 5], 0] = float("nan")
        tracks[:, 0, 1] = float("nan")
        tracks[:, 3, 1, 1] = float("inf")
        return tracks, torch.ones(b, t, queries.shape[1], dtype=torch.bool)


def test_non_finite_positions_keep_the_last_finite_estimate():
    """NaN positions stayed in `tracks` (only marked invisible), against base.py's rule that a lost point keeps
    its last reliable estimate; the service's JSON answer then failed with a plain-text 500."""
    import json

    q = np.array([[2, 10, 12], [0, 30, 40]], float)
    tr = CoTracker3Tracker(predictor=_NanPredictor()).track(small_clip(), queries=q)
    assert np.isfinite(tr.tracks).all()
    np.testing.assert_allclose(tr.tracks[:, 0, 0], [11, 11, 12, 13, 13, 13])  # backward from 2, forward from 3
    np.testing.assert_allclose(tr.tracks[:, 1], [[30, 40]] * 6)  # its own query point at frame 0, kept at 3
    assert tr.visible[:, 0].tolist() == [False, True, True, True, False, False]
    assert tr.visible[:, 1].tolist() == [False, True, True, False, True, True]
    json.dumps(tr.to_dict("list"), allow_nan=False)


@pytest.mark.slow
def test_real_cotracker3_architecture_random_weights_end_to_end():
    pytest.importorskip("cotracker")
    import torch

    torch.manual_seed(0)
    tracker = CoTracker3Tracker(allow_random_weights=True, interp_shape=(64, 96))
    frames = small_clip(t_total=6)
    q = np.array([[0, 10, 12], [3, 30, 20]], float)
    tr = tracker.track(frames, queries=q)
    assert tr.tracks.shape == (6, 2, 2) and tr.visible.shape == (6, 2)
    assert np.isfinite(tr.tracks).all()
    # the predictor pins each query point at its own frame and marks it visible
    np.testing.assert_allclose(tr.tracks[0, 0], [10, 12], atol=1e-3)
    np.testing.assert_allclose(tr.tracks[3, 1], [30, 20], atol=1e-3)
    assert tr.visible[0, 0] and tr.visible[3, 1]
    grid = tracker.track(frames, grid_size=2)
    assert grid.tracks.shape == (6, 4, 2)


HUBCONF = '''
import torch


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.shift = torch.nn.Parameter(torch.zeros(2))


class _Predictor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = _Model()
        self.interp_shape = (384, 512)

    def forward(self, video, queries, backward_tracking):
        b, t = video.shape[:2]
        tracks = queries[:, None, :, 1:].repeat(1, t, 1, 1) + self.model.shift
        return tracks, torch.ones(b, t, queries.shape[1], dtype=torch.bool)


def cotracker3_offline(*, pretrained=True, **kwargs):
    if pretrained:
        raise RuntimeError("would download weights")
    return _Predictor()
'''


def test_local_hub_repo_with_checkpoint(tmp_path):
    import torch

    repo = tmp_path / "co-tracker"
    repo.mkdir()
    (repo / "hubconf.py").write_text(HUBCONF)
    ckpt = tmp_path / "scaled_offline.pth"
    torch.save({"model": {"shift": torch.tensor([1.5, -2.0])}}, ckpt)
    # the clip's size: the stand-in adds its shift in the pixels of the video it is given, its working shape
    tracker = CoTracker3Tracker(hub_dir=repo, checkpoint=ckpt, interp_shape=(48, 64)).load()
    assert tracker._predictor.interp_shape == (48, 64)
    tr = tracker.track(small_clip(), queries=np.array([[0, 10, 12]], float))
    np.testing.assert_allclose(tr.tracks[:, 0], np.tile([11.5, 10.0], (6, 1)))  # the checkpoint was loaded
    # without a checkpoint the hub entry is asked for pretrained weights; its failure is a load fault
    with pytest.raises(ToolFault, match="would download weights"):
        CoTracker3Tracker(hub_dir=repo).load()


PREDICTOR = '''
import torch


class CoTrackerPredictor(torch.nn.Module):
    SOURCE = "{source}"

    def __init__(self):
        super().__init__()
        self.interp_shape = (384, 512)

    def forward(self, video, queries, backward_tracking):
        b, t = video.shape[:2]
        return queries[:, None, :, 1:].repeat(1, t, 1, 1), torch.ones(b, t, queries.shape[1], dtype=torch.bool)
'''


def _package(root, source: str) -> None:
    (root / "cotracker").mkdir(parents=True)
    (root / "cotracker" / "__init__.py").write_text("")
    (root / "cotracker" / "predictor.py").write_text(PREDICTOR.format(source=source))


@pytest.fixture
def own_cotracker_modules():
    """Restores sys.modules' cotracker entries after the test (the venv may have the real package)."""
    import sys

    saved = {k: v for k, v in sys.modules.items() if k == "cotracker" or k.startswith("cotracker.")}
    for k in saved:
        del sys.modules[k]
    yield
    for k in [k for k in sys.modules if k == "cotracker" or k.startswith("cotracker.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def test_an_imported_cotracker_package_shadowing_the_hub_dir_is_a_load_fault(tmp_path, monkeypatch,
                                                                              own_cotracker_modules):
    """torch.hub puts the hub dir first on sys.path, but a cotracker package imported earlier in the process is
    reused: the hub's hubconf ran the installed code under the hub dir's name, silently."""
    import importlib
    import sys

    hub, site = tmp_path / "co-tracker", tmp_path / "site"
    _package(hub, "clone")
    _package(site, "installed")
    (hub / "hubconf.py").write_text("from cotracker.predictor import CoTrackerPredictor\n\n\n"
                                    "def cotracker3_offline(pretrained=False):\n    return CoTrackerPredictor()\n")
    clean = CoTracker3Tracker(hub_dir=hub, allow_random_weights=True).load()  # nothing imported yet: the clone
    assert type(clean._predictor).SOURCE == "clone"
    for k in [k for k in sys.modules if k == "cotracker" or k.startswith("cotracker.")]:
        del sys.modules[k]  # the fixture restores sys.modules' own entries
    monkeypatch.syspath_prepend(str(site))
    assert importlib.import_module("cotracker.predictor").CoTrackerPredictor.SOURCE == "installed"
    with pytest.raises(ToolFault) as info:
        CoTracker3Tracker(hub_dir=hub, allow_random_weights=True).load()
    assert info.value.kind == "load" and str(site / "cotracker" / "predictor.py") in info.value.message


def test_an_unreadable_checkpoint_names_the_file(tmp_path):
    """An empty or truncated .pth failed as "cannot load cotracker3: EOFError: " (torch.load's own message is
    empty): the fault never said which file."""
    pytest.importorskip("cotracker")
    bad = tmp_path / "scaled_offline.pth"
    bad.write_bytes(b"")
    with pytest.raises(ToolFault) as info:
        CoTracker3Tracker(checkpoint=bad).load()
    assert info.value.kind == "load" and str(bad) in info.value.message


class _VideoKeeper:
    """A predictor that keeps the video it is given; points stay at their queries, all visible."""

    interp_shape = (240, 320)  # the clip's size: the video reaches it unchanged (a same-size resize copies)

    def __call__(self, video, queries, backward_tracking):
        import torch

        self.video = video
        t = video.shape[1]
        return queries[:, None, :, 1:].repeat(1, t, 1, 1), torch.ones(queries.shape[:2], dtype=torch.bool)[:, None]\
            .repeat(1, t, 1)


@pytest.mark.parametrize("writeable", [True, False])
def test_frames_go_to_the_model_without_a_whole_copy(writeable):
    """Read-only frames (the agent's, the tool service's) were copied whole before ``torch.from_numpy`` (its
    warning): a numpy allocation of the frames' size (~250 MB for a 720p 93-frame stretch) on top of the model's
    float video. The video is now built by a copying constructor straight into the float tensor: no numpy copy
    (tracemalloc sees numpy's allocations, not torch's), and the same values, dtype and layout as before."""
    import tracemalloc
    import warnings

    torch = pytest.importorskip("torch")
    frames = small_clip(t_total=8, h=240, w=320)
    frames.flags.writeable = writeable
    keeper = _VideoKeeper()
    tracker = CoTracker3Tracker(predictor=keeper)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tracker.track(frames, grid_size=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < frames.nbytes / 2, (peak, frames.nbytes)
    want = torch.from_numpy(frames.copy()).permute(0, 3, 1, 2)[None].float()  # the construction before
    assert keeper.video.dtype == want.dtype and keeper.video.stride() == want.stride()
    assert torch.equal(keeper.video, want)
