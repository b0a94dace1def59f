"""`tools.file_kinds.kind_at` and `read_at` say "nothing there" (`NOTHING`) for the same paths: no file, a dangling
link, a name under a regular file (ENOTDIR), a link loop (ELOOP), a NUL in the name; both answer the same kind for a
folder and a FIFO, and a regular file is no kind. One rule (`_there`) serves both; it was written out twice."""

from __future__ import annotations

import os

import pytest

from tools.file_kinds import NOTHING, kind_at, read_at


def _make(tmp_path, what):  # noqa: ANN001, ANN202
    path = tmp_path / what
    if what == "file":
        path.write_bytes(b"{}\n")
    elif what == "dangling":
        path.symlink_to(tmp_path / "gone")
    elif what == "under_a_file":
        (tmp_path / "plain").write_bytes(b"")
        path = tmp_path / "plain" / "inside.jsonl"
    elif what == "loop":
        path.symlink_to(tmp_path / "loop")
    elif what == "nul":
        path = tmp_path / "a\x00b"
    elif what == "folder":
        path.mkdir()
    elif what == "fifo":
        os.mkfifo(path)
    return path


@pytest.mark.parametrize("what, kind", [("none", NOTHING), ("dangling", NOTHING), ("under_a_file", NOTHING),
                                        ("loop", NOTHING), ("nul", NOTHING), ("folder", "a folder"),
                                        ("fifo", "a FIFO"), ("file", None)])
def test_kind_at_and_read_at_agree_on_what_is_there(tmp_path, what, kind):
    path = _make(tmp_path, what)
    assert kind_at(path) == kind
    assert read_at(path) == (kind, b"{}\n" if kind is None else b"")
