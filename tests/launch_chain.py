"""Launcher stand-ins for tests/test_preemption.py: ``python tests/launch_chain.py DIR ROLE``.

* ``rank``: what training/train.py does on a launched rank (`StopRequest`, then `follow_launcher` with the
  parent read at start); writes DIR/rank.pid once set up, then DIR/signum with the signal that stopped it
  (0 after 60 s without one) and exits.
* ``launcher``: starts a ``rank`` and waits for it, as torchrun does; DIR/launcher.pid. Given the extra
  argument ``deepspeed.launcher.launch`` its command line looks like DeepSpeed's per-node launcher's.
* ``runner``: starts a ``launcher`` that looks like DeepSpeed's and waits, as the ``deepspeed`` command does on
  one node; DIR/runner.pid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

PARENT = os.getppid()
ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()


def _start(folder: Path, *args: str) -> None:
    child = subprocess.Popen([sys.executable, str(HERE), str(folder), *args])
    child.wait()


def main(folder: Path, role: str) -> None:
    (folder / f"{role}.pid").write_text(str(os.getpid()))
    if role == "runner":
        _start(folder, "launcher", "deepspeed.launcher.launch")
        return
    if role == "launcher":
        _start(folder, "rank")
        return
    sys.path.insert(0, str(ROOT))
    from training.preemption import StopRequest, follow_launcher

    stops = StopRequest().install()
    parent = int(os.environ.get("LAUNCH_CHAIN_PARENT", PARENT))  # another value: the launcher died "before"
    assert follow_launcher(parent, interval=0.1)
    (folder / "ready").write_text("1")
    deadline = time.monotonic() + 60
    while not stops.signum and time.monotonic() < deadline:
        time.sleep(0.05)
    (folder / "signum").write_text(str(stops.signum))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
