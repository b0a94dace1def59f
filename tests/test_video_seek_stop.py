"""A read after a seek stops decoding once its frames are out and settled: with frame threads the settle decodes on
(``tools.video_decode._drain``) until no frame handed out waits on a packet decoded before it, and a packet that never
gives a frame held it ``DROP_HORIZON`` frames (48: the end of a short clip)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.encoded_clips import write_rgb_clip
from tests.test_video import read_ids
from tests.test_video_concealed import _gradient_ids, _packets, _zero_a_fifth, frame_threaded_reads
from tools import video_feed
from tools.video import VideoDecodeError, VideoReader

N, KEY, THREADS = 60, 12, 4


def _open_gop(path: Path) -> Path:
    """60 frames, x264's open GOPs: a non-IDR I frame every 12, each followed in decode order by the B-frames shown
    just before it (its leading pictures, which reference the GOP before)."""
    return write_rgb_clip(path, _gradient_ids(N), "libx264", rate=16, options={
        "x264-params": f"open-gop=1:keyint={KEY}:min-keyint={KEY}:scenecut=0:bframes=3:log-level=error"})


def _fed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The tags of the packets the reads feed their decoders, in order (``tag_packet``)."""
    tags: list[int] = []
    tag = video_feed.tag_packet

    def counted(packet, at, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        tags.append(at)
        return tag(packet, at, *args, **kwargs)

    monkeypatch.setattr(video_feed, "tag_packet", counted)
    return tags


@pytest.mark.parametrize("target", [25, 30, 35])
def test_a_seek_to_an_open_gop_keyframe_decodes_no_further_than_the_frame_and_the_decoders_delay(
        monkeypatch, tmp_path, target):
    """Frame threads, a read of one frame of the GOP from keyframe 24 (a seek there). The decoder drops the keyframe's
    leading picture (B-frame 23: its references are before the seek), with no frame and no error, and the frame handed
    out waited on it to the end of the clip: a read of frame 30 fed 37 packets (keyframe 24 to the end). It now feeds the
    packets up to the frame's own (decode order) and the decoder's delay: its reorder depth, frame threads and the
    dropped picture's slot (13 for frame 30)."""
    frame_threaded_reads(monkeypatch, THREADS)
    path = _open_gop(tmp_path / "open.mp4")
    packets = _packets(path)
    order = sorted(p.pts for p in packets)
    decode = [order.index(p.pts) for p in packets]  # decode order: each packet's frame index
    start = decode.index(24)
    assert packets[start].is_keyframe and decode[start + 1] == 23  # (its leading picture, a B-frame)
    with av.open(str(path)) as c:
        want = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)][target]
    fed = _fed(monkeypatch)
    with VideoReader(path) as reader:
        reader.read([0])
        reorder = reader._order[0].reorder or 0
        fed.clear()
        got = reader.read([target])
    assert np.array_equal(got[0], want) and read_ids(got) == [target]
    assert fed[0] == 0  # (the seek's decode, tagged from its keyframe)
    needed = decode.index(target) - start + 1  # packets from the keyframe to the frame's own
    # the decoder's delay: its reorder depth, its frame threads, and the dropped leading picture's slot (no frame)
    assert len(fed) <= needed + reorder + THREADS + 1, (len(fed), needed, reorder)


@pytest.mark.parametrize("damaged", [26, 28])
def test_a_seek_read_that_stops_early_still_fails_on_damage_before_its_frame(monkeypatch, tmp_path, damaged):
    """The early stop keeps every check of the packets decoded before the frame handed out: a fifth of the packet of
    P-frame 26 or 28 (decoded after keyframe 24, before frame 30) zeroed fails a read of frame 30 after the seek."""
    frame_threaded_reads(monkeypatch, THREADS)
    path = _open_gop(tmp_path / "open.mp4")
    packets = _packets(path)
    order = sorted(p.pts for p in packets)
    at = next(j for j, p in enumerate(packets) if order.index(p.pts) == damaged)
    data = bytearray(path.read_bytes())
    _zero_a_fifth(data, packets[at].pos, packets[at].size)
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    with VideoReader(bad) as reader:
        assert read_ids(reader.read([0])) == [0]
        with pytest.raises(VideoDecodeError, match="frame 30 of 60 could not be decoded"):
            reader.read([30])


def _pyramid_open_gop(path: Path) -> Path:
    """40 frames, x264's open GOPs with three B-frames between references every time: keyframe 24 is followed in
    decode order by its leading pictures 22, 21, 23, then P-frame 28 and the B-frames 26, 25, 27 that reference it."""
    return write_rgb_clip(path, _gradient_ids(40), "libx264", rate=16, options={
        "x264-params": f"open-gop=1:keyint={KEY}:min-keyint={KEY}:scenecut=0:bframes=3:b-adapt=0:ref=4:"
                       "b-pyramid=normal:log-level=error"})


@pytest.mark.parametrize("threads", [1, THREADS])
@pytest.mark.parametrize("target", [25, 26, 27])
def test_a_seek_read_after_the_leading_pictures_still_waits_on_a_reference_shown_after_its_frame(
        monkeypatch, tmp_path, threads, target):
    """Only the keyframe's leading pictures are skipped for the watch (``LEADING_SKIPPED``): bytes flipped in P-frame
    28's packet (decoded after keyframe 24's leading pictures, before B-frames 25-27, which reference it) decode with no
    error and no zero run, and FFmpeg flags frame 28 only once it comes out, after frames 25-27: a read of one of them
    after the seek to 24 waits on it and fails. (Zeroed bytes would not show it: the packet's zero run is seen as it
    goes in.) With every packet after the keyframe skipped, the reads handed out the wrong frames as good."""
    if threads != 1:
        frame_threaded_reads(monkeypatch, threads)
    path = _pyramid_open_gop(tmp_path / "open.mp4")
    packets = _packets(path)
    order = sorted(p.pts for p in packets)
    decode = [order.index(p.pts) for p in packets]
    at = decode.index(28)
    assert packets[decode.index(24)].is_keyframe and decode[decode.index(24):at] == [24, 22, 21, 23]
    data = bytearray(path.read_bytes())
    middle = packets[at].pos + packets[at].size // 2
    data[middle:middle + 4] = bytes(b ^ 0x5A for b in data[middle:middle + 4])
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    with av.open(str(path)) as c:
        clean = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    with av.open(str(bad)) as c:
        damaged = {order.index(f.pts): (f.to_ndarray(format="rgb24"), f.is_corrupt) for f in c.decode(video=0)}
    assert damaged[28][1] and not np.array_equal(damaged[target][0], clean[target])  # (the damage reaches it)
    with VideoReader(bad) as reader:
        assert read_ids(reader.read([0])) == [0]
        with pytest.raises(VideoDecodeError, match=f"frame {target} of 40 could not be decoded"):
            reader.read([target])
