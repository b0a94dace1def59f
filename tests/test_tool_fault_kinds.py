"""How a tool's failure is told apart from the clip's (`tools.errors.run_tool`, `tools.client`): the machinery's
failure (a tool service at the wrong URL or over a limit of its setup, a tool's own bug) is a ToolFault named for
what to fix, an outage; the clip's own problem (a folder, a missing file, undecodable bytes) is the clip's video
fault, worded as the in-process read words it."""

from __future__ import annotations

import pytest

from graph.nodes.common import to_fault
from tools.client import RemoteSurpriseScorer, ToolServiceClient
from tools.errors import run_clip_tool
from tools.video import VideoNotFoundError, VideoReader


def test_a_folder_given_to_score_file_is_worded_and_classified_as_in_process(tmp_path):
    """It was "cannot be read (IsADirectoryError ...)", a final video fault, where the in-process read says "is a
    directory, not a video file" (`tools.video_errors.not_a_file`): retried by ``--retry-ineligible`` only once a
    file can be read at the path (`graph.batch_resume.clip_readable`), so never retried while it is a folder."""
    folder = tmp_path / "clip.mp4"
    folder.mkdir()
    with pytest.raises(VideoNotFoundError) as local:
        VideoReader(folder)
    with ToolServiceClient("http://127.0.0.1:9", retries=1) as c:
        with pytest.raises(VideoNotFoundError) as remote:
            run_clip_tool("surprise", RemoteSurpriseScorer(c).score_file, folder, frames=4)
    assert str(remote.value) == str(local.value)
    assert to_fault("surprise", remote.value) == to_fault("surprise", local.value)
