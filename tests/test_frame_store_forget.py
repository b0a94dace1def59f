"""FrameStore.forget finds a clip's entries by the clip version in their keys: an entry or job whose key names
no clip (a one-element tuple, a plain string; `put_extra` and `shared_job` take any key) raised IndexError
and left the clip's later entries in place; a bare path string was read as a set of characters and
dropped nothing, without a word."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

import graph.shared_jobs as shared_jobs
from graph.frame_store import FrameStore
from tools.video import write_video


def _clip(tmp_path: Path, name: str = "a.mp4") -> str:
    path = str(tmp_path / name)
    write_video(path, np.full((8, 32, 48, 3), 90, np.uint8), fps=8.0)
    return path


def test_entries_whose_key_names_no_clip_are_kept_and_do_not_stop_forget(tmp_path, monkeypatch):
    monkeypatch.setattr(shared_jobs, "submit", lambda fn, priority, lane: Future())
    a = _clip(tmp_path)
    store = FrameStore()
    store.image_blocks(a, [0])  # 1 frame, 1 URL, 1 reader
    store.put_extra(("anything",), "kept", size=10)
    store.put_extra("plain", "kept", size=10)
    store.put_extra(("note", "a"), "kept", size=10)  # a string in the version slot is no clip ("a"[0] == "a")
    store.shared_job("plain job", lambda: None, "later")
    store.put_extra(("overlay", store.current(a), (0,)), "dropped", size=10)
    assert store.forget([a, "a"]) == 1 + 1 + 1 + 1
    assert store.get_extra(("anything",)) == "kept" and store.get_extra("plain") == "kept"
    assert store.get_extra(("note", "a")) == "kept"
    assert store.get_extra(("overlay", store.current(a), (0,))) is None


def test_a_bare_path_is_refused_and_path_objects_are_read_as_paths(tmp_path):
    a = _clip(tmp_path)
    store = FrameStore()
    store.image_blocks(a, [0])
    with pytest.raises(TypeError, match="a collection of paths"):
        store.forget(a)
    assert store.nbytes > 0
    assert store.forget([Path(a)]) == 3 and store.nbytes == 0
