"""What `reward_overlap: groups` saves when the reward takes as long as a rollout (training/reward_runner.py).

The smoke training config (CPU, one process, 2 prompt groups per iteration) scores its clips through the
`http` reward against a local stand-in for `raa serve-reward` that answers after `DELAY_PER_CLIP_S` per
clip (a reward agent answers in seconds to minutes; here the delay is scaled to the smoke config's
~0.13 s rollout of one group, so that rollouts and rewards weigh about the same, as they do with a
VLM reward and a large world model on a GPU). Both settings run in fresh processes, one after the other.

Prints `name: value` lines: mean seconds per iteration (after the first) for `off` and `groups`, the
reward wait after the last rollout for each, and `groups_over_off_iteration` (below 1: the time saved;
the ideal with 2 groups of equal rollout time R and reward time L is (R + max(R, L) + L + U) /
(2R + 2L + U), U the update time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DELAY_PER_CLIP_S = 0.04
ITERATIONS = 6


class _SlowReward(BaseHTTPRequestHandler):
    """`raa serve-reward`'s API: one result per item, after DELAY_PER_CLIP_S per item."""

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(DELAY_PER_CLIP_S * len(body["items"]))
        results = [{"reward": (n % 4) / 4, "reasons": []} for n, _ in enumerate(body["items"])]
        data = json.dumps({"results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def _run(mode: str, url: str, out: Path) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    cmd = [sys.executable, "-m", "training.train", "--config", str(ROOT / "training" / "configs" / "smoke.yaml"),
           "--output_dir", str(out), "--max_iterations", str(ITERATIONS), "--checkpoint_every", str(ITERATIONS),
           "--progress", "false", "--tensorboard", "false", "--export", "none", "--reward", "http",
           "--reward_options", f"{{url: '{url}', startup_wait_s: 30}}", "--reward_overlap", mode]
    proc = subprocess.run(cmd, cwd=ROOT, env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"training ({mode}) failed:\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows[1:]


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowReward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/score"
    phases = ("seconds_rollout", "seconds_reward", "seconds_update")
    means = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for mode in ("off", "groups"):
                rows = _run(mode, url, Path(tmp) / mode)
                means[mode] = {k: sum(r[k] for r in rows) / len(rows) for k in phases}
    finally:
        server.shutdown()
    print(f"reward_delay_per_clip_s: {DELAY_PER_CLIP_S}")
    print(f"iterations_timed: {ITERATIONS - 1}")
    for mode in ("off", "groups"):
        m = means[mode]
        print(f"{mode}_seconds_rollout: {m['seconds_rollout']:.3f}")
        print(f"{mode}_seconds_reward_wait: {m['seconds_reward']:.3f}")
        print(f"{mode}_seconds_iteration: {sum(m.values()):.3f}")
    print(f"groups_over_off_iteration: {sum(means['groups'].values()) / sum(means['off'].values()):.3f}")


if __name__ == "__main__":
    main()
