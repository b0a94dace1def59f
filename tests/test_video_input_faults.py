"""Which party a failed clip read is blamed on, and how it is worded: a path that is a folder, the demo's label for
a clip it could not read, a ValueError of the reader's own code, an I/O error of a disk that dropped out for a
moment, and an I/O error of the reader's own edit-list reads."""

from __future__ import annotations

import pytest

from tests.graph_scripts import garbage_file, moving_square
from tools.video import VideoNotFoundError, probe
from tools.video_errors import environmental, unreached


def test_a_folder_at_a_clips_path_is_named_a_folder_and_retried_once_a_clip_is_there(tmp_path):
    """A manifest path naming a folder read "not a regular file", and its row stayed final: the fault is the path's,
    not the bytes of a clip. It says what is there, and is retried (as a clip not found) once a file can be read."""
    from graph.batch_resume import retryable

    folder = tmp_path / "ep1.mp4"
    folder.mkdir()
    with pytest.raises(VideoNotFoundError) as err:
        probe(folder)
    message = str(err.value)
    assert message == f"{folder}: is a directory, not a video file"
    assert unreached(message) and not environmental(message)
    fault = {"status": "ineligible", "reasons": [f"quality: video: VideoNotFoundError: {message}"]}
    assert not retryable(fault, str(folder))  # still a folder: a rerun fails the same way
    folder.rmdir()
    moving_square(folder, frames=4)
    assert retryable(fault, str(folder))
    old = {"status": "ineligible", "reasons": [f"quality: video: VideoNotFoundError: {folder}: not a regular file"]}
    assert retryable(old, str(folder))  # rows written with the old words too


def test_the_demo_labels_a_clip_by_what_is_wrong_with_it(tmp_path, monkeypatch):
    """The demo's evidence table called every clip it could not read "undecodable": a clip deleted since it was
    rendered, or one the disk failed to read, sent the user to a clip whose bytes are fine."""
    from rich.console import Console

    from graph import demo
    from tools.quality import QualityThresholds

    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    rows = [{"path": str(p), "label": "bad", "pattern": "none"}
            for p in (tmp_path / "gone.mp4", garbage_file(tmp_path / "junk.mp4"), empty)]
    console = Console(record=True, width=200)
    demo._evidence_table(rows, tmp_path, console, QualityThresholds())
    lines = {line.split("│")[1].strip(): line for line in console.export_text().splitlines() if line.count("│") > 4}
    assert "not found" in lines["gone"] and "undecodable" not in lines["gone"], lines
    assert "undecodable" in lines["junk"], lines
    assert "empty" in lines["empty"] and "undecodable" not in lines["empty"], lines
