"""What code ran a training run: ``OUTPUT_DIR/launches.jsonl``, one line per launch.

``config.yaml`` says what a run was asked to do and ``reward_backbone.json`` which model scored it, but
not which code did it: two runs with the same config on two commits of this project (or two diffusers
releases) could not be told apart afterwards, and a resumed run may have continued on newer code than it
started with. Decisions where the issues were silent:

- Rank 0 appends one JSON object per launch, after the run folder is prepared: the UTC time, the
  iteration it starts from (0, or the checkpoint a resume loads), ``resume``, the world size, the
  command line (``sys.argv``), host name, Python version, the versions of the packages that shape
  a run's numbers (`PACKAGES`; null for one that is not installed) and the project's git state.
- The git state is the commit (``git rev-parse HEAD``) of the checkout this package is imported from
  and whether tracked files differ from it (``dirty``); ``null`` when the code is not a git checkout
  (an installed wheel), git is missing, or git does not answer within 5 seconds. A folder without a file git
  tracks is no checkout either: a non-editable install into a venv inside the checkout (ignored
  ``.venv/.../site-packages``) recorded the enclosing checkout's HEAD, which need not be the installed code's. Untracked files do
  not make it dirty (run folders, notes). A failure to find it never stops a launch.
- A fresh launch starts the file anew (as it restarts metrics.jsonl); a ``--resume`` appends, so the
  file lists every launch that wrote the run's checkpoints, oldest first.
- Nothing here is compared or refused: a resume on other code is often deliberate (a bug fix);
  the record is for whoever reads the run later.
"""

from __future__ import annotations

import json
import platform
import socket
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.jsonl import json_objects

LAUNCHES = "launches.jsonl"
"""File name in output_dir."""
PACKAGES = ("reward-as-an-agent", "torch", "deepspeed", "diffusers", "transformers", "peft", "numpy", "av",
            "langgraph", "langchain-core", "langchain-openai")
"""Distributions whose versions each launch records."""
GIT_TIMEOUT_S = 5.0


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution in ``names``; None for one that is not installed."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state(folder: Path) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the git checkout holding ``folder``; None when it is not in one (or
    git tracks no file in it: module docstring), git is missing, or git fails or takes longer than `GIT_TIMEOUT_S`."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True,
                              timeout=GIT_TIMEOUT_S).stdout

    try:
        if not git("ls-files", "--", ".").strip():  # not the checkout's code: a copy in an ignored folder
            return None
        commit = git("rev-parse", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty} if commit else None


def launch_record(*, start_iteration: int, resume: bool, world_size: int, argv: Sequence[str],
                  now: datetime | None = None, code_folder: Path | None = None) -> dict[str, Any]:
    """The record of one launch (module docstring); ``code_folder`` defaults to this package's folder."""
    when = (now or datetime.now(UTC)).astimezone(UTC)
    return {"time": when.isoformat(timespec="seconds"), "start_iteration": int(start_iteration),
            "resume": bool(resume), "world_size": int(world_size), "argv": [str(a) for a in argv],
            "host": socket.gethostname(), "python": platform.python_version(),
            "packages": package_versions(),
            "git": git_state(code_folder or Path(__file__).resolve().parent)}


def record_launch(out_dir: Path, record: dict[str, Any], *, resume: bool) -> Path:
    """Append ``record`` to ``out_dir/launches.jsonl`` (a fresh launch, ``resume`` False, starts it anew).
    Call on rank 0."""
    path = Path(out_dir) / LAUNCHES
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if resume else "w", encoding="utf-8") as f:
        f.write(json.dumps(record, allow_nan=False) + "\n")
    return path


def read_launches(out_dir: Path) -> list[dict[str, Any]]:
    """The launches recorded in ``out_dir``, oldest first; lines that are not JSON objects are skipped."""
    return json_objects(Path(out_dir) / LAUNCHES)[0]
