"""Instructions per clip of `agent_overhead.py`'s run (all threads), counted by valgrind's callgrind: a figure that
does not move with the host's load, for comparing two versions of the code on a shared machine (wall and CPU times
there move by 10-20% between runs of the same code).

The parent writes `N_CLIPS` 256x256 clips (`agent_overhead.py`'s headline shape; `--480p`: Wan 480p rollouts,
480x832, 81 frames) and starts this script as a child under callgrind with instrumentation off. The child imports the
agent and runs one untimed clip (imports, first-call costs), then waits; the parent switches instrumentation on
(`callgrind_control -i on`) and the child runs each clip once on a fresh agent, as `agent_overhead._run_clip` does,
and leaves with `os._exit` (no interpreter teardown counted). Prints `instructions_per_clip` (callgrind's total over
`N_CLIPS`). Repeated runs of the same code agree to ~0.1%; under valgrind the threads run one at a time, so the
count says nothing about overlap, only about work. Slow: ~1-2 minutes for the 256x256 clips on a quiet 2-core VM.

Compare another commit: `git worktree add --detach ../base COMMIT`, copy this script into its benchmarks/ and run it
there (`_agent_common` puts the checkout of the script first on `sys.path`; `code:` names the `graph` counted).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))  # (python -P: benchmarks/ last, see agent_overhead.py)

N_CLIPS = 3


def _child(folder: Path, n: int) -> None:
    from agent_overhead import _run_clip

    import graph

    print(f"code: {Path(graph.__file__).parent}", flush=True)
    clips = sorted(str(p) for p in folder.glob("*.mp4"))
    _run_clip(clips[0], folder / "warm.sqlite", "warm")
    (folder / "ready").write_text(str(os.getpid()))
    while not (folder / "go").exists():
        time.sleep(0.1)
    for i in range(n):
        result = _run_clip(clips[i % len(clips)], folder / "runs.sqlite", f"run-{i}")[1]
        assert result.status == "scored", result.reasons
    sys.stdout.flush()
    os._exit(0)


def main() -> None:
    from _agent_common import write_clips

    big = "--480p" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if big:
            write_clips(folder, N_CLIPS, frames=81, size=480, width=832)
        else:
            write_clips(folder, N_CLIPS)
        out = folder / "callgrind.out"
        child = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                                  sys.executable, "-P", __file__, "--child", tmp, str(N_CLIPS)],
                                 stderr=subprocess.PIPE, text=True)
        while not (folder / "ready").exists():
            if child.poll() is not None:
                raise SystemExit(f"the child ended before its clips (exit {child.returncode}):\n{child.stderr.read()}")
            time.sleep(0.5)
        subprocess.run(["callgrind_control", "-i", "on", (folder / "ready").read_text()], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (folder / "go").touch()
        _, err = child.communicate()
        found = re.search(r"Collected : (\d+)", err)
        if child.returncode != 0 or found is None:
            raise SystemExit(f"callgrind run failed (exit {child.returncode}):\n{err[-3000:]}")
    print(f"clips: {N_CLIPS}{' (480x832x81)' if big else ' (256x256x33)'}")
    print(f"instructions_per_clip: {int(found.group(1)) // N_CLIPS}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
