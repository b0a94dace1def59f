"""Decode-size limit (tools.video_limits): an oversize request is a named VideoError, never a MemoryError."""

from __future__ import annotations

import pytest
from graph_scripts import make_agent, moving_square, run

import tools.video_limits
from tools.video import VideoError, VideoReader, read_all_frames


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return moving_square(tmp_path_factory.mktemp("limits") / "clip.mp4", frames=9, size=64)


def test_a_huge_request_is_a_video_error_before_any_allocation(clip):
    # 32 frames of 100000x100000 would be ~960 GB: the old code's np.empty raised a bare MemoryError
    with VideoReader(clip) as reader, pytest.raises(VideoError, match="decode limit") as err:
        reader.read([0] * 32, size=(100_000, 100_000))
    assert type(err.value).__name__ == "VideoTooLargeError" and "clip.mp4" in str(err.value)


def test_the_error_says_the_limit_counts_rgb_frames_not_the_decoders_memory(clip):
    """The limit counts the RGB frames a read returns (frames x width x height x 3), not what the decoder holds: "would
    take 0.0352 MiB decoded" read as the decode's whole memory, and a user who set the limit to the memory they could
    spare ran short by the decoder's own buffers."""
    with VideoReader(clip, decode_limit=64 * 64 * 3) as reader, pytest.raises(VideoError) as err:
        reader.read([0, 1, 2])
    assert "3 frame(s) of 64x64 would take 0.0352 MiB as RGB frames, over the decode limit of 0.0117 MiB" in str(err.value)
    assert "not the decoder's own buffers" in str(err.value)


@pytest.mark.parametrize("how", ["read", "read_list", "read_all_frames"])
def test_the_module_limit_bounds_every_decode_path(clip, monkeypatch, how):
    monkeypatch.setattr(tools.video_limits, "DECODE_LIMIT_BYTES", 2 * 64 * 64 * 3)  # two frames
    with VideoReader(clip) as reader:
        assert len(reader.read([0, 1])) == 2  # at the limit: decoded
        with pytest.raises(VideoError, match="3 frame\\(s\\) of 64x64"):
            if how == "read":
                reader.read([0, 1, 1])  # a repeat is one more output frame
            elif how == "read_list":
                reader.read_list([0, 1, 2])
            else:
                read_all_frames(clip, max_frames=3)


def test_a_reader_takes_its_own_limit(clip):
    with VideoReader(clip, decode_limit=64 * 64 * 3) as reader:
        assert reader.read([4]).shape == (1, 64, 64, 3)
        with pytest.raises(VideoError, match="decode limit"):
            reader.read_list([0, 1])
        assert reader.read([0, 1], size=(32, 32)).shape == (2, 32, 32, 3)  # the requested size counts


def test_an_oversize_clip_is_ineligible_with_the_reason_before_any_model_call(clip, monkeypatch):
    monkeypatch.setattr(tools.video_limits, "DECODE_LIMIT_BYTES", 64 * 64 * 3)  # one frame: the sample is not
    agent, model = make_agent("full")
    res = run(agent, clip)["result"]
    assert res.reward is None and res.status == "ineligible" and model.calls == []
    reason = res.reasons[0]
    assert reason.startswith("quality: video: VideoTooLargeError:") and "decode limit" in reason
