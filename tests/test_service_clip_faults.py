"""A clip the tool service finds undecodable is the clip's video fault, as the same clip decoded in-process is: the
client raises the service's VideoError (`tools.video_errors.served_error`) and `tools.errors.run_clip_tool` lets it
through.
It was ToolFault("service", "input", "HTTP 422: undecodable video ..."), which the agent recorded as kind "tool": an
outage, so the trainer counted the clip as ``ineligible_error`` and every ``--retry-ineligible`` scored it again."""

from __future__ import annotations

import pytest
from service_helpers import TOKEN, serve

from graph.batch_retry import retryable
from graph.nodes.common import to_fault
from tools.client import RemoteSurpriseScorer, ToolServiceClient
from tools.errors import ToolFault, run_clip_tool
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings
from tools.video import EmptyVideoError, VideoDecodeError, VideoError, read_frames
from tools.video_errors import served_error
from tools.video_limits import VideoTooLargeError


@pytest.mark.parametrize(("clip", "error"), [("junk.mp4", VideoDecodeError), ("empty.mp4", EmptyVideoError)])
def test_an_upload_the_service_cannot_decode_is_the_clips_video_fault(service_root, service_scorer, clip, error):
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), scorer=service_scorer)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=1) as c:
        with pytest.raises(error) as info:
            run_clip_tool("surprise", RemoteSurpriseScorer(c).score_file, service_root / clip, frames=4)
    assert clip in str(info.value) and "HTTP" not in str(info.value)
    fault = to_fault("surprise", info.value)
    assert fault.kind == "video" and fault.message.startswith(f"{error.__name__}: ") and not fault.outage
    assert not retryable({"status": "ineligible", "faults": [fault.model_dump()]}, str(service_root / clip),
                         clip_changed=lambda _: False)


def test_an_npy_upload_the_service_cannot_read_stays_a_tool_fault(service_root, service_scorer):
    """Frames the agent decoded itself and the service could not read: the machinery's (an outage), not the clip's."""
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), scorer=service_scorer)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=1) as c:
        with pytest.raises(ToolFault) as info:
            c.request("POST", "/v1/surprise", content=b"\x93NUMPY junk", headers={"Content-Type": "application/x-npy"})
    assert to_fault("surprise", info.value).outage


def test_a_clip_gone_before_its_upload_is_unreached_as_in_process(tmp_path):
    """The client reads the clip to upload it: a clip gone (or unreadable) since the run read it is the clip's video
    fault saying so (retried once it can be read), as the in-process read says; it was ToolFault("surprise", "run",
    "FileNotFoundError: ..."), retried by every --retry-ineligible whether or not the clip came back."""
    from tools.video import VideoNotFoundError

    gone = tmp_path / "gone.mp4"
    with ToolServiceClient("http://127.0.0.1:9", retries=1) as c:
        with pytest.raises(VideoNotFoundError) as info:
            run_clip_tool("surprise", RemoteSurpriseScorer(c).score_file, gone, frames=4)
    fault = to_fault("surprise", info.value)
    assert fault.kind == "video" and fault.outage and str(gone) in fault.message
    row = {"status": "ineligible", "faults": [fault.model_dump()]}
    assert not retryable(row, str(gone), clip_changed=lambda _: False)
    gone.write_bytes(b"back")
    assert retryable(row, str(gone), clip_changed=lambda _: False)


def test_a_served_too_large_clip_reads_as_in_process(service_root, service_scorer, monkeypatch):
    """A clip over the decode limit of the service's reader came back as a plain VideoError, its reason "VideoError:
    VideoTooLargeError: ..." where the same read in-process records "VideoTooLargeError: ...". The service's reader
    has ``max_decode_mb`` as its limit (tests/test_service_decode_limit.py), named as the setting that would admit the
    clip where the in-process read names its own (tests/test_decode_limit_faults.py)."""
    import tools.video_limits

    monkeypatch.setattr(tools.video_limits, "DECODE_LIMIT_BYTES", 1000)  # the in-process read's limit
    app = create_app(ToolSettings(max_decode_mb=1000 / 2**20), service_root, token=TOKEN, tracker=LKTracker(),
                     scorer=service_scorer)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=1) as c:
        with pytest.raises(VideoTooLargeError) as served:
            run_clip_tool("surprise", RemoteSurpriseScorer(c).score_file, service_root / "clip.mp4", frames=4)
    with pytest.raises(VideoTooLargeError) as local:
        read_frames(service_root / "clip.mp4", range(4))
    fault = to_fault("surprise", served.value)
    assert fault.kind == "video" and fault.message.startswith("VideoTooLargeError: uploaded clip 'clip.mp4': 4 frame")
    def worded(error: VideoTooLargeError) -> str:  # without the clip's name (as uploaded / as read) and the setting
        return str(error).split(": ", 1)[1].split(" MiB (", 1)[0]

    assert worded(served.value) == worded(local.value)
    unknown = served_error({"type": "NewError", "message": "m"})
    assert type(unknown) is VideoError and str(unknown) == "NewError: m"
