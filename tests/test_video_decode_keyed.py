"""Whether a frame out of the decoder may count as a key frame (`DamageWatch.came_out`'s ``keyed``) is one rule,
used where frames are handed out and where they are drained (`tools.video_decode.may_be_key`): a frame whose pts the
scan did not map, or of a clip whose scan found no keyframes, may; else only one of the scan's keyframes."""

from __future__ import annotations

from tools.video_decode import may_be_key


def test_a_frame_may_be_a_key_frame_only_where_the_scan_says_so() -> None:
    keys = frozenset({0, 30})
    assert may_be_key(0, keys) and may_be_key(30, keys)
    assert not may_be_key(15, keys)  # (AV1 shows a keyframe again under a later frame's timestamp)
    assert may_be_key(None, keys)  # a pts the scan did not map: nothing known
    assert may_be_key(15, frozenset())  # the scan knows no keyframe: nothing known
