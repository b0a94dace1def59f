"""GPU timing of the real-size evidence models (random weights) on an 81-frame 480x640 clip.

Prints ``cotracker3_seconds_per_clip`` (CoTracker3 offline, 16x16 grid, backward tracking) and
``vjepa2_surprise_seconds_per_clip`` (V-JEPA 2 ViT-L with the config values of
facebook/vjepa2-vitl-fpc64-256, bfloat16, 33 windows in batches of 8). Each is timed after one
warm-up call. Without CUDA it prints one line saying so and exits 0. Never needed for CI.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

# config.json values of facebook/vjepa2-vitl-fpc64-256 (hard-coded: no hub access on the GPU host)
VJEPA2_VITL_FPC64_256 = dict(
    patch_size=16, crop_size=256, frames_per_clip=64, tubelet_size=2, hidden_size=1024, in_chans=3,
    num_attention_heads=16, num_hidden_layers=24, drop_path_rate=0.0, mlp_ratio=4.0, layer_norm_eps=1e-6,
    qkv_bias=True, attention_probs_dropout_prob=0.0, hidden_act="gelu", initializer_range=0.02,
    attention_dropout=0.0, num_pooler_layers=3, pred_hidden_size=384, pred_num_attention_heads=12,
    pred_num_hidden_layers=12, pred_num_mask_tokens=10, pred_zero_init_mask_tokens=True, pred_mlp_ratio=4.0,
)


def clip(t_total: int = 81, h: int = 480, w: int = 640) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(0)
    tex = cv2.GaussianBlur((rng.random((h, w + 3 * t_total, 3)) * 255).astype(np.uint8), (0, 0), 2)
    return np.ascontiguousarray(np.stack([tex[:, 3 * t:3 * t + w] for t in range(t_total)]))


def timed(fn) -> float:
    import torch

    fn()  # warm-up (kernels, allocator)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("gpu_tools: skipped (no CUDA device)")
        return 0
    frames = clip()
    print(f"# device: {torch.cuda.get_device_name(0)}; clip {frames.shape}")
    try:
        import cotracker  # noqa: F401
    except ImportError:
        print("cotracker3_seconds_per_clip: skipped (cotracker package not installed)")
    else:
        from tools.motion import CoTracker3Tracker

        torch.manual_seed(0)
        tracker = CoTracker3Tracker(allow_random_weights=True, device="cuda").load()
        seconds = timed(lambda: tracker.track(frames, grid_size=16))
        print(f"cotracker3_seconds_per_clip: {seconds:.3f}")
        del tracker
        torch.cuda.empty_cache()

    from transformers import VJEPA2Config, VJEPA2Model

    from tools.surprise import VJEPA2SurpriseScorer

    torch.manual_seed(0)
    model = VJEPA2Model(VJEPA2Config(**VJEPA2_VITL_FPC64_256)).to("cuda", dtype=torch.bfloat16).eval()
    scorer = VJEPA2SurpriseScorer(model=model, device="cuda", dtype="bfloat16", batch_size=8)
    evidence = []
    seconds = timed(lambda: evidence.append(scorer.score(frames)))
    assert evidence[-1].status == "ok" and len(evidence[-1].windows) == 33
    print(f"vjepa2_surprise_seconds_per_clip: {seconds:.3f}")
    return 0


if __name__ == "__main__":
    # benchmarks/tools.py would shadow the ``tools`` package: drop this folder from the import path
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    raise SystemExit(main())
