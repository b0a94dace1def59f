"""Throughput of `raa score-batch` in one process and over worker processes (`--processes`).

The batch goes through the real `ChatOpenAI` client against the OpenAI-compatible stub
(`_agent_common.stub_server`, a subprocess answering instantly like the scripted model), preset
`no_wmreward` (LK motion evidence, no V-JEPA weights needed), stage cache off, `--concurrency 16`.
Each configuration runs the CLI as a fresh subprocess on the same clips, one after another, and the
wall time covers the whole command (imports, worker start-up, every run).

Prints, for each P in PROCESSES, `clips_per_s_processes_{P}` (whole command) and
`steady_clips_per_s_processes_{P}`: (N - 1) clips over the wall time of the N-clip command minus that
of a 1-clip command, i.e. the rate once imports and worker start-up are paid, which is what a long
batch sees; then `processes{P}_over_1_throughput` and `processes{P}_over_1_steady_throughput`.
No target: a diagnostic for sizing batches. Against an instant server one process is bound by its
event loop (~20 ms of ChatOpenAI CPU per request); more processes help up to the machine's cores,
which the stub server and every worker's frame and tool work share. On the 2-core VM: ~4.7 steady
clips/s with 1 process, ~6.8 with 2 (1.4x); a 32-clip command gains little, since each spawned
worker spends ~2-3 s importing and building its agent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run with `python -P` (see README): benchmarks/ goes last so benchmarks/tools.py never shadows `tools`.
sys.path.append(str(Path(__file__).resolve().parent))
from _agent_common import INSTRUCTION, stub_server, write_clips  # noqa: E402

N_CLIPS = 32
PROCESSES = (1, 2)


def _batch(manifest: Path, out: Path, processes: int, env: dict[str, str], n: int) -> float:
    """Wall seconds of one `raa score-batch` command; checks every clip was scored."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "graph.cli", "score-batch", str(manifest), "--out", str(out),
                    "--concurrency", "16", "--preset", "no_wmreward", "--processes", str(processes)],
                   env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    statuses = [r["result"]["status"] for r in rows]
    if len(rows) != n or set(statuses) != {"scored"}:
        raise RuntimeError(f"batch with {processes} process(es) did not score every clip: {statuses}")
    return wall


def main() -> None:
    with stub_server() as base_url, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clips = write_clips(folder / "clips", N_CLIPS)
        manifest, one = folder / "manifest.jsonl", folder / "one.jsonl"
        manifest.write_text("".join(json.dumps({"path": c, "instruction": INSTRUCTION}) + "\n" for c in clips))
        one.write_text(json.dumps({"path": clips[0], "instruction": INSTRUCTION}) + "\n")
        rate, steady = {}, {}
        for p in PROCESSES:
            env = {**os.environ, "RAA_BASE_URL": base_url, "RAA_MODEL": "stub", "RAA_API_KEY": "EMPTY",
                   "RAA_CACHE_PATH": "off", "RAA_TRACES_PATH": str(folder / f"traces{p}.sqlite"),
                   "RAA_MOTION_BACKEND": "lk"}
            fixed = _batch(one, folder / f"one{p}.jsonl", p, env, 1)
            wall = _batch(manifest, folder / f"out{p}.jsonl", p, env, N_CLIPS)
            rate[p], steady[p] = N_CLIPS / wall, (N_CLIPS - 1) / max(wall - fixed, 1e-9)
    for p in PROCESSES:
        print(f"clips_per_s_processes_{p}: {rate[p]:.2f}")
        print(f"steady_clips_per_s_processes_{p}: {steady[p]:.2f}")
    for p in PROCESSES[1:]:
        print(f"processes{p}_over_1_throughput: {rate[p] / rate[1]:.2f}")
        print(f"processes{p}_over_1_steady_throughput: {steady[p] / steady[1]:.2f}")


if __name__ == "__main__":
    main()
