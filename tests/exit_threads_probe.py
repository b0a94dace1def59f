"""Run by tests/test_exit_threads.py as ``python tests/exit_threads_probe.py OUT ARGS...``: `training.train.main`
with ARGS, then, as the process is about to leave ``main`` for interpreter teardown, writes ``OUT`` (JSON): the
exit code and the names of the native threads still running (Linux: ``/proc/self/task/*/comm``). gloo's
process-group threads are ``pt_gloo_runloop`` (workers) and ``gloo_tcp_loop``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def native_threads() -> list[str]:
    names = []
    for task in sorted(os.listdir("/proc/self/task")):
        try:
            names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
        except OSError:  # a thread that ended while listed
            continue
    return names


if __name__ == "__main__":
    from training.train import main

    code = main(sys.argv[2:])
    Path(sys.argv[1]).write_text(json.dumps({"code": code, "threads": native_threads()}))
    raise SystemExit(code)
