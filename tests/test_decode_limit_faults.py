"""A clip over the decode limit is the same fault in-process and through the tool service: the clip's own video fault
(`VideoTooLargeError`), final, its message naming the setting that would admit it.

The in-process reader refused it as "video: VideoTooLargeError" (final), while the tool service answered 413 without a
``video_error``, which the client read as a limit of the service's setup (ToolFault "config", recorded as kind "tool":
an outage, counted as the machinery's and scored again by every ``--retry-ineligible``, failing the same way). With
the defaults both limits are 4 GiB, so the two paths refused the same clips for different reasons."""

from __future__ import annotations

import re

import pytest
from graph_scripts import FakeSurprise
from service_helpers import TOKEN, serve

import tools.video_limits
from graph.batch_retry import retryable
from graph.frame_store import FrameStore
from graph.nodes.common import to_fault
from tools.client import RemoteSurpriseScorer, ToolServiceClient
from tools.errors import run_clip_tool
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings
from tools.video import VideoError
from tools.video_limits import VideoTooLargeError, check_decode_size

FRAME_BYTES = 64 * 64 * 3  # service_root's clip.mp4: 18 frames of 64x64


def test_an_over_size_clip_is_the_clips_final_fault_on_both_paths(service_root, monkeypatch):
    clip = service_root / "clip.mp4"
    monkeypatch.setattr(tools.video_limits, "DECODE_LIMIT_BYTES", 3 * FRAME_BYTES)  # three frames, in-process
    with pytest.raises(VideoError) as local:
        FrameStore().scaled_frames(str(clip), range(4), None)
    app = create_app(ToolSettings(max_decode_mb=3 * FRAME_BYTES / 2**20), service_root, token=TOKEN,
                     tracker=LKTracker(), scorer=FakeSurprise())
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=1) as c:
        with pytest.raises(VideoError) as served:  # was ToolFault("service", "config", "HTTP 413: ...")
            run_clip_tool("surprise", RemoteSurpriseScorer(c).score_file, clip, frames=4, short_side=None)
    assert type(local.value) is type(served.value) is VideoTooLargeError
    faults = [to_fault("surprise", e.value) for e in (local, served)]
    assert [(f.kind, f.outage) for f in faults] == [("video", False)] * 2
    for f in faults:
        assert not retryable({"status": "ineligible", "faults": [f.model_dump()]}, str(clip),
                             clip_changed=lambda _: False)
    assert "tools.video_limits.DECODE_LIMIT_BYTES" in str(local.value)
    assert "RAA_TOOLS_MAX_DECODE_MB" in str(served.value) and "HTTP" not in str(served.value)
    assert "4 frame(s) of 64x64" in str(served.value) and "uploaded clip 'clip.mp4'" in str(served.value)


def test_frames_the_client_decoded_over_the_services_limit_stay_its_setups_limit(service_root):
    """A ``.npy`` body: the client decoded those frames within its own limit, so a service that refuses them has a
    lower limit than its client (a setting to fix, an outage), not a clip too large for any reader."""
    import numpy as np

    from tools.errors import ToolFault

    app = create_app(ToolSettings(max_decode_mb=3 * FRAME_BYTES / 2**20), service_root, token=TOKEN,
                     tracker=LKTracker(), scorer=FakeSurprise())
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=1) as c:
        with pytest.raises(ToolFault) as info:
            RemoteSurpriseScorer(c).score(np.zeros((4, 64, 64, 3), np.uint8))
    assert info.value.kind == "config" and "RAA_TOOLS_MAX_DECODE_MB" in info.value.message
    assert to_fault("surprise", info.value).outage


def test_the_path_request_413_carries_the_clips_error(service_root):
    """A path request over ``max_decode_mb`` is refused before decoding with the same VideoTooLargeError."""
    from fastapi.testclient import TestClient

    app = create_app(ToolSettings(max_decode_mb=0.1), service_root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2})
    assert r.status_code == 413 and r.json()["video_error"]["type"] == "VideoTooLargeError"
    assert r.json()["video_error"]["message"].startswith("clip.mp4: 18 frame(s) of 64x64")


def _sizes(message: str) -> tuple[str, str, str]:
    found = re.search(r"would take (\S+) MiB as RGB frames, over the decode limit of (\S+) MiB .*at least (\S+) MiB",
                      message)
    assert found, message
    return found.group(1), found.group(2), found.group(3)


@pytest.mark.parametrize(("count", "width", "bound"), [
    (3, 64 * 64, 2 * FRAME_BYTES),  # 0.035 MiB over 0.0234375 MiB: the 413 said "0.0 MiB"
    (1, 2**32 // 3 + 1, 2**32),  # 2 bytes over 4 GiB
    (1, 34953, int(0.1 * 2**20)),  # 2 bytes over a setting of 0.1 MiB
    (1, int(4130.4 * 2**20) // 3, 2**32),  # a whole MiB figure that rounds down (4130) would not admit it
    (1, 1, 2),  # 3 bytes over 2
])
def test_sizes_are_worded_alike_told_apart_and_admitting(count, width, bound):
    """Both sizes to the same precision (the 413 said "0.0 MiB, over the limit of 0.0234375 MiB"), never the same
    words for a need over the bound, and the size it names admits the clip when set as the limit."""
    need = count * width * 3
    with pytest.raises(VideoTooLargeError) as caught:
        check_decode_size("c.mp4", count, (width, 1), bound)
    shown_need, shown_bound, admits = _sizes(str(caught.value))
    assert shown_need != shown_bound and not re.search(r"\b0\.0 MiB", str(caught.value)), str(caught.value)
    assert int(float(admits) * 2**20) >= need
    check_decode_size("c.mp4", count, (width, 1), int(float(admits) * 2**20))  # admitted
