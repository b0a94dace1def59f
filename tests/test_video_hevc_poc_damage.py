"""An HEVC picture whose POC LSB broke to an earlier one's (a bit of its slice header) and whose slice data holds a
run of zero bytes (``tools.video_nal_check``): FFmpeg puts its frame out ahead of the frames shown before it, and the
timestamps come out of order. A read that met that frame out of its place took the timestamps for unusable and
counted the decoder's output (``OutOfOrder``), and the frames from the damaged one on came out under the wrong index
with no error: read after frame 28, frame 27 gave frame 26's picture. Now a frame the watch names damaged that comes
out of its place (HEVC) is never handed out and passes no place (``tools.video_decode``). (The wrong frame predates
the HEVC narrowing: 51b1b6a6 gave it too.)"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.encoded_clips import write_rgb_clip
from tests.test_video_concealed import _damaged, _gradient_ids
from tests.test_video_hevc_damage import _plain
from tests.test_video_hevc_nonref import _nal_header, _zero_the_middle
from tools.video import VideoDecodeError, VideoReader

N = 30


def _poc_flip(bit: int):  # noqa: ANN202
    """An edit: bit ``bit`` (0: the highest) of the packet's POC LSB (8 bits, the test clip's) flipped, its slice data
    zeroed (``_zero_the_middle``)."""
    def edit(data: bytearray, start: int, size: int) -> None:
        _poc_edit(data, start, bit)
        _zero_the_middle(data, start, size)
    return edit


def _poc_edit(data: bytearray, start: int, bit: int) -> None:
    bits = "".join(f"{b:08b}" for b in data[start + 6:start + 14])
    at = 2  # first_slice_segment_in_pic_flag, slice_pic_parameter_set_id 0
    at += 2 * (len(bits[at:]) - len(bits[at:].lstrip("0"))) + 1  # slice_type (Exp-Golomb)
    bits = bits[:at] + f"{int(bits[at:at + 8], 2) ^ 0x80 >> bit:08b}" + bits[at + 8:]
    data[start + 6:start + 14] = int(bits, 2).to_bytes(8, "big")


def _out_pts(path: Path) -> list[int]:
    """The pts of the frames FFmpeg gives, in its order (a packet it fails on gives none)."""
    out = []
    with av.open(str(path)) as c:
        for packet in c.demux(video=0):
            try:
                out += [f.pts for f in packet.decode()]
            except av.error.InvalidDataError:
                continue
    return out


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> tuple[Path, Path, np.ndarray]:
    """The x265 test clip, and it with the last TRAIL_N picture whose POC, broken to one shown before it, puts the
    frames out of order (``_poc_back``: FFmpeg puts it out at once), and the clean frames."""
    path = write_rgb_clip(tmp_path_factory.mktemp("poc") / "c.mp4", _gradient_ids(N), "libx265", rate=16,
                          options={"x265-params": "keyint=10:min-keyint=10:bframes=4:log-level=error"})
    want = np.stack([f for _, f in sorted(_plain(path).items())])
    for packet, bit in ((p, b) for p in reversed(range(N)) for b in range(8)):
        if _nal_header(path, packet) == (0, 0):
            bad = _damaged(path, packet, _poc_flip(bit))
            out = _out_pts(bad)
            if out != sorted(out):
                print(packet, bit, out)  # the premise: a frame out of its place
                return path, bad, want
    raise AssertionError("no TRAIL_N picture whose broken POC puts frames out of order")


@pytest.mark.parametrize("first", range(N))
def test_a_frame_read_after_a_damaged_one_came_out_of_place_is_its_own(clip, first):
    """Frame ``first`` read, then every frame in turn: each read gives the clean clip's frame or fails."""
    _, bad, want = clip
    with VideoReader(bad) as reader:
        for i in [first, *range(N)]:
            try:
                assert np.array_equal(reader.read([i])[0], want[i]), i
            except VideoDecodeError:
                pass
