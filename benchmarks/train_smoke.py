"""Per-iteration wall time of the smoke training config, split into rollout / reward / update.

Runs ``training/configs/smoke.yaml`` in one process (CPU, gloo) for a few iterations and prints
``name: value`` lines: mean seconds per phase over the iterations after the first (warm-up), and
each phase's share of the iteration. Usage: ``python benchmarks/train_smoke.py [iterations] [vae|preview]``
(frames for the reward: the smoke config's tiny VAE, the default, or the fast linear preview).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    decode = sys.argv[2] if len(sys.argv) > 2 else "vae"
    if decode not in ("vae", "preview"):
        print(f"error: decode must be 'vae' or 'preview', got {decode!r}", file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as torchrun sets it; before torch is imported
    from training.train import main as train_main

    with tempfile.TemporaryDirectory() as tmp:
        rc = train_main(["--config", str(ROOT / "training" / "configs" / "smoke.yaml"), "--output_dir", tmp,
                         "--max_iterations", str(iterations), "--checkpoint_every", str(iterations),
                         "--progress", "false", "--tensorboard", "false", "--decode", decode])
        if rc != 0:
            return rc
        rows = [json.loads(line) for line in (Path(tmp) / "metrics.jsonl").read_text().splitlines()]
    timed = rows[1:] if len(rows) > 1 else rows
    phases = ("seconds_rollout", "seconds_reward", "seconds_update")
    means = {k: sum(r[k] for r in timed) / len(timed) for k in phases}
    total = sum(means.values())
    print(f"decode: {decode}")
    print(f"iterations_timed: {len(timed)}")
    for key in phases:
        print(f"{key}: {means[key]:.4f}")
    print(f"seconds_iteration: {total:.4f}")
    for key in phases:
        print(f"{key.removeprefix('seconds_')}_share: {means[key] / total:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
