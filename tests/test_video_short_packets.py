"""Files cut inside their last video packet, in containers other than MP4 / MOV: FFmpeg reads that packet
short and flags it corrupt; its frame decodes from part of its data (a damaged picture)."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import pytest

from tools.video import VideoDecodeError, probe, read_all_frames, write_video


def _gradient_clip(n: int = 40) -> np.ndarray:
    """Smooth moving gradients: a frame decoded from half its data differs visibly from the whole one."""
    yy, xx = np.mgrid[0:64, 0:64]
    return np.stack([np.stack([(xx * 3 + t * 5) % 256, (yy * 3) % 256, ((xx + yy) * 2 + t * 3) % 256], -1)
                     for t in range(n)]).astype(np.uint8)


def _cut_inside_last_packet(data: bytes) -> bytes:
    """`data` ended in the middle of its last video packet's payload (found by its bytes: where `Packet.pos`
    points differs, FLV's at the tag header, AVI's at the payload)."""
    with av.open(io.BytesIO(data)) as c:
        payload = bytes([p for p in c.demux(video=0) if p.size][-1])
    start = data.rfind(payload)
    assert len(payload) > 8 and start > 0
    return data[: start + len(payload) // 2]


@pytest.mark.parametrize(("name", "codec"), [("c.flv", "flv"), ("c.avi", "mpeg4")])
def test_a_file_cut_inside_its_last_packet_is_truncated(tmp_path: Path, name: str, codec: str) -> None:
    """Was: the damaged last frame came back as a frame of the clip (FLV: the clip's last, AVI: with its index
    cut off, all 40 frames), no error; only MP4 / MOV checked the flag."""
    data = write_video(tmp_path / name, _gradient_clip(), codec=codec).read_bytes()
    assert read_all_frames(data).shape[0] == 40
    cut = _cut_inside_last_packet(data)
    with pytest.raises(VideoDecodeError, match="truncated"):
        probe(cut)
    with pytest.raises(VideoDecodeError, match="truncated"):
        read_all_frames(cut)
