"""Permissions, as a user who is not root (root reads every file, so `tests/test_jsonl_read_bytes.py` injects its
refusal): the path is looked at through an O_PATH handle, which needs search permission on the folders on the way
only, and a regular file is opened for reading through /proc/self/fd. A file the user may not read is refused there:
PermissionError named by the path given (as the stat and open by name said), and so is a file in a folder the user may
not search (refused at the look). A folder is still told as a folder, even one the user may not read. Run in a child
process that drops to `nobody` once it has imported the reader (nobody may not run root's Python) when the tests run
as root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

NOBODY = 65534

CHILD = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from tools.file_kinds import read_at, read_bytes

    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    def outcome(read, path):
        try:
            return ["ok", repr(read(Path(path)))]
        except OSError as exc:
            return [type(exc).__name__, exc.errno, exc.filename]

    print(json.dumps({name: [outcome(read_bytes, path), outcome(read_at, path)]
                      for name, path in json.loads(sys.argv[1]).items()}))
""").replace("NOBODY", str(NOBODY))
"""Reads each path given (a JSON object, name: path) with `read_bytes` and `read_at`, prints what came of each."""


@pytest.fixture
def place() -> Iterator[Path]:
    """A folder every user may search (pytest's tmp_path is in root's 0700 folder)."""
    root = Path(tempfile.mkdtemp(prefix="raa-perm-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        for sub in root.rglob("*"):
            if sub.is_dir() and not sub.is_symlink():
                sub.chmod(0o700)
        shutil.rmtree(root)


def _as_user(paths: dict[str, Path]) -> dict[str, list]:
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps({k: str(v) for k, v in paths.items()})],
                          cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def test_permissions_as_a_user_who_is_not_root(place):
    (place / "ok.jsonl").write_bytes(b"{}\n")
    (place / "ok.jsonl").chmod(0o644)
    (place / "unreadable.jsonl").write_bytes(b"{}\n")
    (place / "unreadable.jsonl").chmod(0o200)
    (place / "closed").mkdir()
    (place / "closed" / "in.jsonl").write_bytes(b"{}\n")
    (place / "closed" / "in.jsonl").chmod(0o644)
    (place / "closed").chmod(0o644)  # listed, not searched
    (place / "sealed").mkdir()
    (place / "sealed").chmod(0)
    seen = _as_user({"ok": place / "ok.jsonl", "unreadable": place / "unreadable.jsonl",
                     "closed": place / "closed" / "in.jsonl", "sealed": place / "sealed"})
    assert seen["ok"] == [["ok", repr(b"{}\n")], ["ok", repr((None, b"{}\n"))]]
    refused = ["PermissionError", 13, str(place / "unreadable.jsonl")]
    assert seen["unreadable"] == [refused, refused]
    refused = ["PermissionError", 13, str(place / "closed" / "in.jsonl")]
    assert seen["closed"] == [refused, refused]
    assert seen["sealed"] == [["IsADirectoryError", 21, str(place / "sealed")], ["ok", repr(("a folder", b""))]]
