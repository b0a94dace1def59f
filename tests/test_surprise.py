"""WMReward surprise on a tiny random V-JEPA 2: no leak from target frames, batching, short clips."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.vjepa_files import tiny_vjepa2
from tools.errors import ToolFault
from tools.surprise import (
    SurpriseEvidence,
    SurpriseScorer,
    VJEPA2SurpriseScorer,
    preprocess_frames,
    surprise_from_latents,
    window_starts,
)


@pytest.fixture(scope="module")
def scorer():
    return VJEPA2SurpriseScorer(model=tiny_vjepa2(), batch_size=4, top_k=2)


def clip(t_total: int, seed: int = 0, h: int = 40, w: int = 48) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (t_total, h, w, 3), dtype=np.uint8)


def test_window_starts():
    assert window_starts(15) == []
    assert window_starts(16) == [0]
    assert window_starts(19) == [0, 2, 3]  # one more window ends on the last frame (18)
    assert window_starts(20) == [0, 2, 4]
    for n in (16, 17, 33, 81, 120, 121):
        starts = window_starts(n)
        assert starts[-1] + 16 == n, n  # the last frame is always predicted
        assert all(b - a in (1, 2) for a, b in zip(starts, starts[1:], strict=False))
    assert window_starts(33, stride=4) == [0, 4, 8, 12, 16, 17]


def test_surprise_equation_on_hand_values():
    a = torch.tensor([[[1.0, 2.0, 3.0], [3.0, 1.0, 2.0]]])
    # identical latents: cosine 1 -> surprise 0; negated (after LN still negated): cosine -1 -> 2
    assert surprise_from_latents(a, a).item() == pytest.approx(0.0, abs=1e-6)
    assert surprise_from_latents(a, -a).item() == pytest.approx(2.0, abs=1e-5)
    # LN([1,2,3]) = [-1,0,1]*k, LN([3,1,2]) = [1,-1,0]*k: cosine -1/2; LN([1,2,3]) vs itself 1 -> mean 0.25
    b = torch.tensor([[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]])
    c = torch.tensor([[[3.0, 1.0, 2.0], [1.0, 2.0, 3.0]]])
    assert surprise_from_latents(b, c).item() == pytest.approx(1 - (-0.5 + 1) / 2, abs=1e-5)


def test_preprocess_shape_and_normalisation():
    frames = np.full((2, 40, 60, 3), 255, np.uint8)
    px = preprocess_frames(frames, 32)
    assert px.shape == (2, 3, 32, 32) and px.dtype == np.float32
    np.testing.assert_allclose(px[0, :, 5, 5], (1 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225]),
                               rtol=1e-5)


def test_preprocess_antialiases_and_crops_like_the_video_processor():
    """The VJEPA2 video processor resizes with torchvision's antialiased bilinear; plain bilinear (OpenCV's, used
    before) aliases: 1-pixel stripes shrunk 448 -> 146 came out as coarse stripes instead of flat grey."""
    stripes = np.zeros((1, 448, 448, 3), np.uint8)
    stripes[:, :, ::2] = 255
    px = preprocess_frames(stripes, 128)  # short side int(128 * 256 / 224) = 146
    grey = px[0, 0] * 0.229 + 0.485  # back to [0, 1]
    assert abs(float(grey.mean()) - 0.5) < 0.01 and float(grey.std()) < 0.05  # plain bilinear: std 0.29
    # sizes and crop offset: 40x61 -> short side 36, long int(36 * 61 / 40) = 54; crop 32 at top 2, left 11
    ramp = np.broadcast_to(np.arange(61, dtype=np.uint8)[None, None, :, None] * 4, (1, 40, 61, 3)).copy()
    out = preprocess_frames(ramp, 32)[0, 0] * 0.229 + 0.485
    import torch
    import torch.nn.functional as F

    full = F.interpolate(torch.from_numpy(ramp).permute(0, 3, 1, 2), size=(36, 54), mode="bilinear",
                         antialias=True)[0, 0].float() / 255
    np.testing.assert_allclose(out, full[2:34, 11:43].numpy(), atol=1e-6)


def test_changing_target_frames_changes_actual_not_predicted(scorer):
    frames = clip(16)
    changed = frames.copy()
    changed[8:] = 255 - changed[8:]
    p1, a1 = scorer.window_latents(torch.from_numpy(preprocess_frames(frames, 32))[None])
    p2, a2 = scorer.window_latents(torch.from_numpy(preprocess_frames(changed, 32))[None])
    torch.testing.assert_close(p1, p2, rtol=0, atol=0)  # no leak from the target frames
    assert (a1 - a2).abs().max() > 1e-2
    assert p1.shape == a1.shape == (1, 4 * 2 * 2, 48)  # 4 target tubelets x 2x2 patches
    # and the context frames do drive the prediction
    ctx = frames.copy()
    ctx[:8] = 255 - ctx[:8]
    p3, _ = scorer.window_latents(torch.from_numpy(preprocess_frames(ctx, 32))[None])
    assert (p1 - p3).abs().max() > 1e-4


def test_batched_equals_looped(scorer):
    px = preprocess_frames(clip(26), 32)
    starts = window_starts(26)
    batched = scorer.score_windows(px, starts, batch_size=len(starts))
    looped = scorer.score_windows(px, starts, batch_size=1)
    np.testing.assert_allclose(batched, looped, rtol=1e-5, atol=1e-6)


def test_score_reports_windows_top_and_mean(scorer):
    ev = scorer.score(clip(21))
    assert isinstance(scorer, SurpriseScorer)
    assert ev.status == "ok" and [w.start for w in ev.windows] == [0, 2, 4, 5]  # 5-20 ends on the last frame
    assert ev.windows[1].frames == list(range(2, 18)) and ev.windows[1].end == 17
    assert ev.mean == pytest.approx(np.mean([w.surprise for w in ev.windows]))
    # windows 0-15, 2-17, 4-19 and 5-20 all predict frames 13-15: one event, so top names one window (top_k 2)
    assert len(ev.top) == 1 and ev.top[0].surprise == max(w.surprise for w in ev.windows)
    assert "frames" in ev.text() and "not a physics verdict" in ev.text()
    assert SurpriseEvidence.model_validate_json(ev.model_dump_json()) == ev


@pytest.mark.parametrize("t_total", [0, 1, 15])
def test_short_clips_are_not_enough_frames(scorer, t_total):
    ev = scorer.score(clip(t_total) if t_total else np.zeros((0, 40, 48, 3), np.uint8))
    assert ev.status == "not_enough_frames" and ev.windows == [] and ev.mean is None
    assert ev.num_frames == t_total and "missing evidence" in ev.text()


def test_all_black_clip_scores_finite(scorer):
    ev = scorer.score(np.zeros((16, 40, 48, 3), np.uint8))
    assert ev.status == "ok" and np.isfinite(ev.mean)


def test_bad_input_and_bad_model_path():
    with pytest.raises(ValueError):
        VJEPA2SurpriseScorer(model=tiny_vjepa2()).score(np.zeros((16, 8, 8), np.uint8))
    lazy = VJEPA2SurpriseScorer.from_pretrained("/nonexistent/vjepa2")
    assert lazy._model is None  # nothing loads until first use
    with pytest.raises(ToolFault) as info:
        lazy.score(clip(16))
    assert info.value.tool == "surprise" and info.value.kind == "load"


def test_run_failure_is_a_fault(monkeypatch):
    broken = VJEPA2SurpriseScorer(model=tiny_vjepa2())

    def explode(*args, **kwargs):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(broken.model.encoder, "forward", explode)
    with pytest.raises(ToolFault) as info:
        broken.score(clip(16))
    assert info.value.kind == "run" and "out of memory" in info.value.message


def test_preprocess_thin_frames_resize_only_what_the_crop_keeps(monkeypatch):
    """A 2x500 upload was resized to 292x73000 before the centre crop (~41 GB for 16 frames at crop 256): the
    source is now centre-cropped to 8:1 first, so the resize is at most 8 squares of the short side."""
    import torch.nn.functional as F

    real, sizes = F.interpolate, []

    def bounded(x, size, **kw):
        sizes.append(tuple(size))
        assert max(size) <= 8 * min(size) + 1, f"resize to {size} for input {tuple(x.shape)}"
        return real(x, size=size, **kw)

    monkeypatch.setattr(F, "interpolate", bounded)
    for shape in [(16, 2, 500, 3), (16, 500, 2, 3)]:
        px = preprocess_frames(np.full(shape, 128, np.uint8), 256)
        assert px.shape == (16, 3, 256, 256) and np.isfinite(px).all()
    assert sizes == [(292, 2336), (2336, 292)]


def test_preprocess_aspect_crop_matches_the_full_resize():
    """The pre-crop drops only what the centre crop would: 12:1 frames give what the full resize gives."""
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(3)
    smooth = np.cumsum(rng.integers(-3, 4, (1, 8, 96, 3)), axis=2) + 128
    frames = np.clip(smooth, 0, 255).astype(np.uint8)
    out = preprocess_frames(frames, 32)[0] * 0.229 + 0.485  # channel 0 de-normalised below
    full = F.interpolate(torch.from_numpy(frames).permute(0, 3, 1, 2), size=(36, 432), mode="bilinear",
                         antialias=True)[0].float() / 255  # short 36, long int(36 * 96 / 8) = 432
    np.testing.assert_allclose(out[0], full[0, 2:34, 200:232].numpy(), atol=2 / 255)


def test_top_windows_are_distinct_events():
    """distinct_windows (the scorer's `top`, reflect's choice): greedily by surprise (ties: the earlier window),
    skipping a window whose predicted frames (after its context frames) overlap one chosen before."""
    from tools.surprise import SurpriseWindow, distinct_windows

    def win(start, surprise, size=16):
        return SurpriseWindow(start=start, end=start + size - 1, frames=list(range(start, start + size)),
                              surprise=surprise)

    ws = [win(0, 0.2), win(2, 0.5), win(4, 0.4), win(8, 0.45), win(10, 0.1), win(20, 0.3), win(22, 0.3)]
    # 2 predicts 10-17: 4 (12-19) and 8 (16-23) overlap it; 20 (28-35) is next, tied with 22 (earlier wins);
    # 22 (30-37) overlaps 20; 0 (8-15) overlaps 2; 10 (18-25) does not
    assert [w.start for w in distinct_windows(ws, 3, 8)] == [2, 20, 10]
    assert [w.start for w in distinct_windows(ws, 1, 8)] == [2]
    assert distinct_windows(ws, 0, 8) == [] and distinct_windows([], 3, 8) == []
    # a window no longer than the context: all its frames count as predicted
    assert [w.start for w in distinct_windows([win(0, 0.9, 4), win(3, 0.8, 4), win(4, 0.7, 4)], 3, 8)] == [0, 4]


def test_a_local_path_that_cannot_load_says_why(tmp_path):
    """A weights file or a missing folder given as the model: transformers answered "Repo id must be in the form
    'repo_name' or 'namespace/repo_name'", which never says the path is wrong."""
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    cases = {str(weights): "is a file; it must be a folder saved by save_pretrained",
             str(tmp_path / "missing" / "vjepa2"): "no such folder",
             "~/vjepa2": "a leading ~ is not expanded"}
    for name, why in cases.items():
        with pytest.raises(ToolFault) as info:
            VJEPA2SurpriseScorer.from_pretrained(name).load()
        assert info.value.kind == "load" and why in info.value.message and "Repo id" not in info.value.message


def test_a_folder_saved_by_save_pretrained_loads_in_the_dtype_asked(tmp_path):
    model = tiny_vjepa2()
    model.save_pretrained(tmp_path / "vjepa2")
    frames = clip(18)
    expected = VJEPA2SurpriseScorer(model=model).score(frames)
    loaded = VJEPA2SurpriseScorer.from_pretrained(str(tmp_path / "vjepa2"), dtype="bfloat16")
    ev = loaded.score(frames)
    assert next(loaded.model.parameters()).dtype == torch.bfloat16
    assert ev.status == "ok" and ev.mean == pytest.approx(expected.mean, abs=0.02)


def test_a_folder_missing_weights_is_a_load_fault_not_a_random_predictor(tmp_path):
    """A folder whose weights lack the predictor (an encoder-only export, a classification checkpoint's
    backbone) loaded with transformers' warning only: the missing layers were randomly initialised and the
    scorer reported their surprise as evidence. It is a load fault naming the missing weights."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "vjepa2"
    tiny_vjepa2().save_pretrained(folder)
    weights = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("predictor.")}, folder / "model.safetensors",
              metadata={"format": "pt"})
    scorer = VJEPA2SurpriseScorer.from_pretrained(str(folder))
    with pytest.raises(ToolFault) as info:
        scorer.score(clip(18))
    assert info.value.kind == "load" and "predictor." in info.value.message
    assert "missing" in info.value.message and scorer._model is None
