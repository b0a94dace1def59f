"""How a tool's failure is told apart from the clip's (`tools.errors.run_tool`, `tools.client`): the machinery's
failure (a tool service at the wrong URL or over a limit of its setup, a tool's own bug) is a ToolFault named for
what to fix, an outage; the clip's own problem (a folder, a missing file, undecodable bytes) is the clip's video
fault, worded as the in-process read words it."""

from __future__ import annotations

import pytest
from service_helpers import TOKEN, moving_clip, serve

from graph.nodes.common import to_fault
from tools.client import RemoteMotionTracker, RemoteSurpriseScorer, ToolServiceClient, status_kind
from tools.errors import ToolFault, run_clip_tool, run_tool
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings
from tools.video import FrameIndexError, VideoDecodeError, VideoNotFoundError, VideoReader


def test_a_404_or_413_without_a_fault_is_a_setting_not_the_input():
    """Neither says anything of the clip: a 404 is a route the URL does not serve, a 413 a limit of the service's
    setup (as the LLM side's `graph.transport.server_limit` reads a 413). Both were kind "input"."""
    assert status_kind(404) == "config" and status_kind(413) == "config"


def _raise(exc: Exception):
    def call(*args, **kwargs):
        raise exc
    return call


@pytest.fixture(scope="module")
def small_service(service_root):
    """A tool service (LK, no surprise) whose uploads may be at most 1 KiB."""
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False,
                     max_upload_mb=1 / 1024)
    with serve(app) as url:
        yield url


def test_a_url_without_the_route_names_the_url_setting(small_service):
    with ToolServiceClient(small_service + "/prefix", token=TOKEN, retries=1) as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
    assert info.value.kind == "config" and "HTTP 404" in info.value.message
    assert "RAA_TOOLS_URL" in info.value.message


def test_an_upload_over_the_services_limit_names_the_limit(small_service):
    with ToolServiceClient(small_service, token=TOKEN, retries=1) as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(4), grid_size=2)
    assert info.value.kind == "config" and "HTTP 413" in info.value.message and "max-upload-mb" in info.value.message
    assert to_fault("motion", info.value).outage


@pytest.mark.parametrize(("requested", "ending"), [("nope.mp4", "video file not found"),
                                                   ("sub", "is a directory, not a video file")])
def test_a_path_the_service_cannot_find_is_the_clips_as_in_process(small_service, service_root, requested, ending):
    """``track_path`` of a clip missing under the root (or a folder there): the clip could not be reached, as the
    in-process read says, not a 404 of the service (which, a route it does not serve, is the URL's setting)."""
    (service_root / "sub").mkdir(exist_ok=True)
    with ToolServiceClient(small_service, token=TOKEN, retries=1) as c:
        with pytest.raises(VideoNotFoundError) as info:
            RemoteMotionTracker(c).track_path(requested, grid_size=2)
    assert str(info.value) == f"{requested}: {ending}"
    fault = to_fault("motion", info.value)
    assert fault.kind == "video" and fault.outage  # unreached: retried once a clip can be read there


def test_a_folder_given_to_score_file_is_worded_and_classified_as_in_process(tmp_path):
    """It was "cannot be read (IsADirectoryError ...)", a final video fault, where the in-process read says "is a
    directory, not a video file" (`tools.video_errors.not_a_file`): retried by ``--retry-ineligible`` only once a
    file can be read at the path (`graph.batch_retry.clip_readable`), so never retried while it is a folder."""
    folder = tmp_path / "clip.mp4"
    folder.mkdir()
    with pytest.raises(VideoNotFoundError) as local:
        VideoReader(folder)
    with ToolServiceClient("http://127.0.0.1:9", retries=1) as c:
        with pytest.raises(VideoNotFoundError) as remote:
            run_clip_tool("surprise", RemoteSurpriseScorer(c).score_file, folder, frames=4)
    assert str(remote.value) == str(local.value)
    assert to_fault("surprise", remote.value) == to_fault("surprise", local.value)


@pytest.mark.parametrize("error", [FrameIndexError("frame 40 outside 0..32"), VideoDecodeError("x.mp4: corrupt"),
                                   VideoNotFoundError("weights.mp4: video file not found")])
def test_a_videoerror_of_a_tool_given_frames_is_the_tools_failure(error):
    """The tracker, an in-process scorer and extra tools get decoded frames: a VideoError they raise is theirs (a
    FrameIndexError was the agent's "internal" fault, a VideoDecodeError the clip's final video fault)."""
    with pytest.raises(ToolFault) as info:
        run_tool("gripper_check", _raise(error))
    assert (info.value.tool, info.value.kind) == ("gripper_check", "run")
    assert info.value.message == f"{type(error).__name__}: {error}"
    assert to_fault("extra", info.value).kind == "tool"


def test_a_videoerror_of_a_tool_given_the_clip_is_the_clips():
    """A tool handed the clip itself (the tool service decoding an upload) reads it as the in-process read does: its
    VideoError is the clip's; a FrameIndexError still is the tool's (it chose the indices)."""
    with pytest.raises(VideoDecodeError):
        run_clip_tool("surprise", _raise(VideoDecodeError("x.mp4: corrupt")))
    with pytest.raises(ToolFault) as info:
        run_clip_tool("surprise", _raise(FrameIndexError("frame 40 outside 0..32")))
    assert info.value.kind == "run"
    with pytest.raises(ToolFault, match="ValueError: bad"):
        run_clip_tool("surprise", _raise(ValueError("bad")))


def test_the_agents_requests_fit_the_services_default_frame_limit():
    """The service's frame-count limit (``RAA_TOOLS_MAX_FRAMES``) stays a limit of its setup (a 413, kind "config":
    an outage that ``--retry-ineligible`` scores again once it is raised), not the clip's final fault as its decode
    limit is: the agent asks for at most `MAX_SURPRISE_FRAMES` frames to score (an upload with frame_indices) and
    `TRACK_FRAMES` to track (a ``.npy`` body), whatever the clip's length, and the in-process tools have no frame
    limit, so a clip refused by count is scored once the limit is raised. The default must admit both."""
    from graph.nodes.surprise import MAX_SURPRISE_FRAMES
    from graph.nodes.tracking import TRACK_FRAMES

    assert max(MAX_SURPRISE_FRAMES, TRACK_FRAMES) <= ToolSettings().max_frames
