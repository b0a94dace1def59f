"""An H.264 packet an edit list discards (decoded, its frame dropped) goes to ``H264References.fed`` with
``discarded=True``, which does what the feed did with it before HEVC's references took the same call
(``H264References.skipped``, the packet neither read nor kept): the same pictures told, the same reads."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import _damaged, _gradient_ids, _packets
from tests.test_video_edits import _late_start
from tools.video import VideoDecodeError, VideoReader
from tools.video_nonref import H264References


@pytest.fixture(scope="module")
def late(tmp_path_factory) -> Path:
    """x264's gradient clip cut 11 frames in (keyframes every 8): packets 0-2 (decode order) are discarded."""
    return _late_start(tmp_path_factory.mktemp("late"), frames=_gradient_ids(30))


def _states(path: Path, *, through_fed: bool) -> list[tuple[list[int], bool, bool | None]]:
    """For each packet of ``path`` (decode order): the tags it shows demoted, and whether its picture says no picture
    references it and is confirmed, its discarded ones fed with ``discarded=True`` (``through_fed``) or, as the feed
    did before, only ``skipped``."""
    with av.open(str(path)) as c:
        extradata = c.streams.video[0].codec_context.extradata
    refs, out = H264References(extradata), []
    for tag, p in enumerate(_packets(path)):
        if p.is_discard and not through_fed:
            refs.skipped(tag)
            demoted = []
        else:
            demoted = refs.fed(tag, bytes(p), extradata, discarded=p.is_discard)
        out.append((demoted, refs.says_unreferenced(tag), refs.confirmed(tag)))
    return out


def test_a_discarded_packet_fed_is_skipped_as_before(late):
    """``fed(..., discarded=True)`` leaves what ``skipped`` alone did: no discarded picture told, every other the
    same."""
    packets = _packets(late)
    assert [p.is_discard for p in packets[:4]] == [True, True, True, False]  # the premise
    fed, skipped = _states(late, through_fed=True), _states(late, through_fed=False)
    assert fed == skipped
    assert not any(fed[t][1] for t, p in enumerate(packets) if p.is_discard)


def _zero_the_middle(data: bytearray, start: int, size: int) -> None:
    """A run of zero bytes in a packet's first NAL unit (MP4: after its 4-byte length), its header intact."""
    nal = int.from_bytes(data[start:start + 4], "big")
    data[start + 4 + nal // 3:start + 4 + nal - 2] = bytes(nal - 2 - nal // 3)


@pytest.mark.parametrize("packet", [None, 0, 1, 2])
def test_a_damaged_discarded_packet_reads_as_before(late, packet):
    """Each discarded packet in turn (an IDR, a reference P-frame, a B-frame no picture references: nal_ref_idc 0)
    with a run of zero bytes, or none: the reads that do not fail give the clean clip's frames; the damage of a
    reference picture fails the frames decoded after it up to the next keyframe (0-4), as 51b1b6a6 read them (before
    ``discarded=``), measured there with the same clip and edit; a clean clip's none. The non-reference B-frame's
    fails them too (be5cff7a: a discarded picture is not kept, so its nal_ref_idc 0 cannot be confirmed, and that
    nal_ref_idc may be the damage; 51b1b6a6 failed none)."""
    packets = _packets(late)
    bad = late if packet is None else _damaged(late, packet, _zero_the_middle)
    if packet is not None:
        assert packets[packet].is_discard and (bytes(packets[packet])[4] & 0x60 == 0) == (packet == 2)
    with VideoReader(late) as plain:
        want = plain.read(range(plain.meta.frames))
    failed = []
    with VideoReader(bad) as reader:
        for i in range(len(want)):
            try:
                assert np.array_equal(reader.read([i])[0], want[i]), i
            except VideoDecodeError:
                failed.append(i)
    assert failed == ([] if packet is None else [0, 1, 2, 3, 4])
