"""Which party a failed clip read is blamed on, and how it is worded: a path that is a folder, the demo's label for
a clip it could not read, a ValueError of the reader's own code, an I/O error of a disk that dropped out for a
moment, and an I/O error of the reader's own edit-list reads."""

from __future__ import annotations

import pytest

from tests.graph_scripts import moving_square
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
