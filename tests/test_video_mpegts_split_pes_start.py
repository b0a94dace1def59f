"""A PES whose start code is split over two transport packets is whole (`tools.mpegts_pes`).

ISO 13818-1 asks only that a packet with payload_unit_start set carries the PES's first byte: a muxer may fill that
packet with adaptation-field stuffing and leave one or two bytes of the PES there, the rest of its start code and
header in the PID's next packet. FFmpeg's demuxer reads such a PES whole; the check took it for a PES without a start
code (a dropped frame) and failed every read of a clean clip.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.test_video_mpegts_lost_pes import _cut_clip, av_pid
from tools.mpegts_pes import pes_starts
from tools.video import VideoReader


def _split_starts(data: bytes, pid: int, keep: int) -> bytes:
    """`data` with each second PES start on `pid` in a packet of adaptation-field stuffing (its PCR kept) and its
    first `keep` PES bytes, the rest of that packet's payload in the next; continuity counters renumbered."""
    out, n, cc = [], 0, 0
    for at in range(0, len(data), 188):
        pk = bytearray(data[at:at + 188])
        if (pk[1] & 0x1F) << 8 | pk[2] != pid:
            out.append(bytes(pk))
            continue
        parts = [pk]
        if pk[1] & 0x40 and (pk[3] >> 4) & 3 in (1, 3):
            n += 1
            if n % 2 == 0:
                field = bytes(pk[5:5 + pk[4]]) or b"\x00" if (pk[3] >> 4) & 3 == 3 else b"\x00"  # flags (a PCR)
                payload = pk[5 + pk[4]:] if (pk[3] >> 4) & 3 == 3 else pk[4:]
                first = bytes(pk[:3]) + b"\x30" + bytes([183 - keep]) + field + b"\xff" * (183 - keep - len(field)) + \
                    payload[:keep]
                rest = bytes([0x47, pk[1] & 0xBF, pk[2], 0x30, 183 - len(payload[keep:]), 0]) + \
                    b"\xff" * (182 - len(payload[keep:])) + payload[keep:]
                parts = [bytearray(first), bytearray(rest)]
        for p in parts:
            assert len(p) == 188
            p[3] = p[3] & 0xF0 | cc
            cc = (cc + 1) & 15
            out.append(bytes(p))
    return b"".join(out)


@pytest.mark.parametrize("keep", [1, 2, 5])
def test_a_pes_start_code_split_over_two_packets_reads_whole(tmp_path: Path, keep: int) -> None:
    """Was (keep 1, 2): "starts a video PES without a whole PES header (damaged)", every read failed."""
    clip = _cut_clip(tmp_path)
    pid = av_pid(clip)
    split = tmp_path / "split.ts"
    split.write_bytes(_split_starts(clip.read_bytes(), pid, keep))
    starts = pes_starts(split, pid)
    assert len(starts) == len(pes_starts(clip, pid)) and all(whole for *_, whole in starts)
    assert [pts for _, pts, _ in starts] == [pts for _, pts, _ in pes_starts(clip, pid)]  # each pts read whole
    with VideoReader(clip) as r:  # (the open GOP's leading frames fail, alone)
        lead, frames = r._order[0].lead, r.meta.frames
        want = r.read(list(range(lead, frames)))
    with VideoReader(split) as r:
        assert r.meta.frames == frames and r._order[0].shifted is None
        got = r.read(list(range(lead, frames)))
    assert np.array_equal(got, want)
