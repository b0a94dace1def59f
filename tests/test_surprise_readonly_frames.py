"""The surprise scorer takes read-only frames without warnings and without touching the warning filters.

The tool service's ``.npy`` request body reaches `VJEPA2SurpriseScorer.score` as a read-only view of the
request's bytes (`tools.service_frames._load_npy`, no ``frame_indices``). `preprocess_frames` gave such frames
to ``torch.from_numpy`` (a tensor over memory it must not write) and hid the resulting "The given NumPy
array is not writable" UserWarning with ``warnings.catch_warnings``, which swaps the process-wide filter
list: not thread-safe (the service and the agent score on worker threads), so another thread's warnings
could be lost or its filters undone. Read-only frames were then copied by ``torch.tensor`` into the uint8
tensor the resize reads, and are now shared with it through DLPack (no warning, no filter change, no copy), with
values bit-identical to writable frames.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_helpers import NPY, npy

from tests.vjepa_files import tiny_vjepa2
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings
from tools.surprise import VJEPA2SurpriseScorer, preprocess_frames


@pytest.fixture(scope="module")
def scorer():
    return VJEPA2SurpriseScorer(model=tiny_vjepa2(layers=1), batch_size=3, top_k=2)


def _read_only(frames: np.ndarray) -> np.ndarray:
    out = np.frombuffer(frames.tobytes(), np.uint8).reshape(frames.shape)  # as the service's .npy body
    assert not out.flags.writeable
    return out


class _Untouched:
    """Fails the test when the code under it changes the process-wide warning filters."""

    def __init__(self, monkeypatch) -> None:
        self.calls: list[str] = []
        real_catch = warnings.catch_warnings
        calls = self.calls

        class Spy(real_catch):  # type: ignore[misc,valid-type]
            def __enter__(self):
                calls.append("catch_warnings")
                return super().__enter__()

        def spy(name, real):
            def wrapped(*args, **kwargs):
                calls.append(name)
                return real(*args, **kwargs)
            return wrapped

        monkeypatch.setattr(warnings, "catch_warnings", Spy)
        monkeypatch.setattr(warnings, "filterwarnings", spy("filterwarnings", warnings.filterwarnings))
        monkeypatch.setattr(warnings, "simplefilter", spy("simplefilter", warnings.simplefilter))


def _not_writable(caught) -> list[str]:
    return [str(w.message) for w in caught if "not writable" in str(w.message)]


def _frames(t: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (t, h, w, 3), dtype=np.uint8)


# "reversed": negative strides, which torch.from_numpy refuses and torch.from_dlpack aborts the process on (a C++
# exception, not a Python error): such frames must reach torch only as the contiguous copy (tools/torch_frames.py)
@pytest.mark.parametrize("layout", ["contiguous", "aspect_cropped", "fortran", "strided", "reversed"])
def test_preprocess_read_only_frames_no_warning_no_filter_change_same_values(monkeypatch, layout):
    base = _frames(5, 4, 60) if layout == "aspect_cropped" else _frames(5, 40, 52)  # 60 > 8 * 4: cropped first
    if layout == "fortran":
        ro = np.asfortranarray(base)
        ro.flags.writeable = False
    elif layout == "strided":
        ro = _read_only(np.concatenate([base, base]))[::2]
        base = np.concatenate([base, base])[::2].copy()
    elif layout == "reversed":
        ro, flipped = _read_only(base)[:, :, ::-1], base[:, :, ::-1]
        base = flipped.copy()
        assert np.array_equal(preprocess_frames(flipped, 32), preprocess_frames(base, 32))  # writable ones too
    else:
        ro = _read_only(base)
    expected = preprocess_frames(base.copy(), 32)  # writable frames: the path that never warned
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spy = _Untouched(monkeypatch)
        got = preprocess_frames(ro, 32)
        monkeypatch.undo()
    assert _not_writable(caught) == []
    assert spy.calls == []  # the process-wide filters were left alone
    assert got.dtype == expected.dtype and np.array_equal(got, expected)  # bit-identical
    assert not ro.flags.writeable


def test_scorer_read_only_frames_no_warning_same_evidence(scorer, monkeypatch):
    frames = _frames(23, 40, 48, seed=3)
    expected = scorer.score(frames.copy())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spy = _Untouched(monkeypatch)
        got = scorer.score(_read_only(frames))
        monkeypatch.undo()
    assert _not_writable(caught) == []
    assert spy.calls == []
    assert got == expected


def test_service_npy_body_scores_without_warning(scorer, service_root):
    """The service's .npy body without frame_indices: a read-only view of the request's bytes."""
    frames = _frames(20, 40, 48, seed=5)
    expected = scorer.score(frames.copy()).model_dump(mode="json")
    app = create_app(ToolSettings(), service_root, tracker=LKTracker(), scorer=scorer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with TestClient(app) as c:
            r = c.post("/v1/surprise", content=npy(frames), headers=NPY)
    assert r.status_code == 200, r.text
    assert _not_writable(caught) == []
    assert r.json() == expected


def test_read_only_frames_are_resized_where_they_lie():
    """Read-only frames were copied whole (``torch.tensor``) before the resize, which only reads them: a batch's
    new frames once more in memory (30 frames of a 720p ``.npy`` body: 83 MB). They are now handed to the resize
    through DLPack, which shares the memory without the warning; the profiler sees no allocation of their size.
    Values: the tests above (bit-identical to writable frames, no warning, no filter change)."""
    from torch.profiler import ProfilerActivity, profile

    if np.lib.NumpyVersion(np.__version__) < "2.1.0":
        pytest.skip("numpy < 2.1 exports no read-only array through DLPack: such frames are copied")
    ro = _read_only(_frames(6, 480, 640))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        got = preprocess_frames(ro, 64)
    largest = max(e.self_cpu_memory_usage for e in prof.events())
    assert 0 < largest < ro.nbytes / 2, (largest, ro.nbytes)
    assert np.array_equal(got, preprocess_frames(ro.copy(), 64))


def test_read_only_frames_numpy_cannot_export_are_copied(monkeypatch):
    """numpy < 2.1 refuses a read-only array to DLPack (BufferError): such frames are copied, as before."""
    import torch

    def refuse(_):
        raise BufferError("Cannot export readonly array since signalling readonly is unsupported by DLPack.")

    frames = _frames(5, 40, 52)
    expected = preprocess_frames(frames.copy(), 32)
    monkeypatch.setattr(torch, "from_dlpack", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = preprocess_frames(_read_only(frames), 32)
    assert _not_writable(caught) == []
    assert np.array_equal(got, expected)
