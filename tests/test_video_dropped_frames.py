"""A frame the decoder drops mid-stream (a corrupt packet) in a clip without usable timestamps: the reader counts
the decoder's output there, so every later frame would come back under the index of the one before it."""

from __future__ import annotations

import pickle
from pathlib import Path

import av
import pytest
from av.codec.context import Flags

import tools.video_decode
import tools.video_reader
from tests.test_video import id_frames, read_ids, write_elementary, write_raw
from tests.test_video_containers import _write
from tests.test_video_edits import _end_trimmed
from tests.test_video_open_gop import _drop, _open_gop
from tools.video import VideoDecodeError, VideoReader
from tools.video_decode import DROP_HORIZON
from tools.video_errors import fault_label, served_error
from tools.video_scan import MAX_REORDER_DEPTH, FrameIndex

N = 40
BAD = 30  # the corrupted packet, in decode order


def _hevc(path: Path) -> Path:
    """A raw HEVC stream (no timestamps) of `N` id frames with B-frames."""
    return write_elementary(path, "libx265", "log-level=error:keyint=12:bframes=2", N)


def _bad_slice_header(data: bytes) -> bytes:
    """`data` (an Annex B access unit) with its last slice's header naming a picture parameter set that does not
    exist (its NAL unit header kept, so the demuxer's parser still splits the stream there)."""
    b = bytearray(data)
    at = b.rfind(b"\x00\x00\x01") + 3 + 2  # past the start code and the 2-byte NAL unit header
    b[at:at + 3] = b"\x80\xff\xff"  # first_slice_segment_in_pic_flag 1, slice_pic_parameter_set_id 254
    return bytes(b)


def _corrupt(src: Path) -> Path:
    with av.open(str(src)) as i:
        packets = [bytes(p) for p in i.demux(i.streams.video[0]) if p.size]
    packets[BAD] = _bad_slice_header(packets[BAD])
    path = src.with_name(f"bad{src.suffix}")
    path.write_bytes(b"".join(packets))
    return path


def test_a_frame_the_decoder_drops_is_an_error_not_a_shift(tmp_path):
    """FFmpeg's HEVC decoder drops the picture whose slice header is corrupt, with no error: 39 frames of 40
    packets. Counting its output, a read of frame 28 or any later one returned the frame after it (frame 30
    showed id 31), no error. Each read now returns its own frame or fails with the clip and frame named; frames
    well before the corrupt packet still read."""
    path = _corrupt(_hevc(tmp_path / "c.hevc"))
    with av.open(str(path)) as c:  # the premise: the decoder drops the frame and says nothing
        decoded = [f for p in c.demux(c.streams.video[0]) for f in p.decode()]
    assert len(decoded) == N - 1
    with VideoReader(path) as reader:
        assert reader._order[0].pts is None and reader.meta.frames == N
        failed = []
        for i in range(N):
            try:
                got = read_ids(reader.read([i]))
            except VideoDecodeError as e:
                assert str(e).startswith(f"{path}: frame {i} of {N} could not be decoded"), e
                failed.append(i)
                continue
            assert got == [i]  # never another frame under this index
        assert failed and failed[0] >= 24 and failed[-1] == N - 1
        assert read_ids(reader.read([3, 11, 20])) == [3, 11, 20]
        # (the decoder, told to fail on what it finds (tools.video_threads.watched_decoder), fails the packet)
        with pytest.raises(VideoDecodeError, match=f"frame {failed[0]} of {N} .*failed on packet {BAD} .*InvalidData"):
            reader.read([failed[0]])


@pytest.mark.parametrize("cut", [N - 1, N - 3])
def test_a_raw_hevc_stream_cut_inside_a_packet_gives_no_other_frame(tmp_path, cut):
    """A raw stream cut inside its last packet (packet `cut`, decode order): without a container the scan cannot see
    the cut and counts its picture, which FFmpeg's decoder drops. Packet 39 is a B picture shown before those of
    packets 37-38, packet 37 a P picture shown after those of packets 34-36. Each index reads its own frame or fails:
    the cut picture's fails, and so do those that came out after its packet was fed (without timestamps the count
    cannot tell whether it was shown before them); the frames before those read."""
    src = _hevc(tmp_path / "c.hevc")
    shown, data = {}, []  # the frame id of each packet's picture (its place in the uncut stream), the packets
    with av.open(str(src)) as c:
        stream = c.streams.video[0]
        stream.codec_context.flags |= Flags.copy_opaque
        for packet in c.demux(stream):
            if packet.size:
                data.append(bytes(packet))
                packet.opaque = (len(data) - 1,)
            for frame in packet.decode():
                shown[frame.opaque[0]] = read_ids(frame.to_ndarray(format="rgb24")[None])[0]
    assert [shown[k] for k in (N - 3, N - 2, N - 1)] == [N - 1, N - 2, N - 3]  # a P picture, then its two Bs
    path = tmp_path / "cut.hevc"
    path.write_bytes(b"".join(data[:cut]) + data[cut][: len(data[cut]) // 2])
    present = sorted(shown[k] for k in range(cut + 1))  # the file's frames, in order
    with VideoReader(path) as reader:
        assert reader._order[0].pts is None and reader.meta.frames == cut + 1
        assert read_ids(reader.read(range(N - 6))) == present[: N - 6]
        failed = []
        for i in range(N - 6, cut + 1):
            try:
                got = read_ids(reader.read([i]))
            except VideoDecodeError:
                failed.append(i)
                continue
            assert got == [present[i]]  # never another frame under this index
        assert present.index(shown[cut]) in failed


def _drop_frame(monkeypatch, frame_id: int = 20, decoded: list | None = None) -> None:
    """The decoder gives no frame for the packet of frame ``frame_id`` (every frame it did give in ``decoded``)."""
    original = VideoReader._frames_fed

    def dropping(self, container, stream, **kwargs):  # noqa: ANN001, ANN202
        for frame, fed in original(self, container, stream, **kwargs):
            if decoded is not None:
                decoded.append(frame)
            if read_ids(frame.to_ndarray(format="rgb24")[None])[0] != frame_id:
                yield frame, fed

    monkeypatch.setattr(VideoReader, "_frames_fed", dropping)


def _clip(tmp_path: Path, kind: str) -> tuple[Path, int, int]:
    """A clip whose reads count the decoder's output, its first frame's id and the index of its first keyframe: x264
    with B-frames in an AVI, or a raw open-GOP H.264 / HEVC stream cut mid-GOP (ids from 4, a keyframe at id 8)."""
    if kind == "x264.avi":
        return _write(tmp_path / "b.avi", None, "libx264", {}, 2, 8), 0, 0
    return _drop(_open_gop(tmp_path, kind), 4), 4, 4


@pytest.mark.parametrize("kind", ["x264.avi", "libx264", "libx265"])
def test_a_dropped_frame_after_reordered_or_leading_ones_is_an_error(tmp_path, monkeypatch, kind):
    """A decoder that gives no frame for one packet (frame id 20), behind B-frames or a mid-GOP cut's lead (whose
    frames the decoder may drop, as it should): the frames before it keep reading, and from it on each read is
    an error, never the next frame under this index."""
    path, first, key = _clip(tmp_path, kind)
    _drop_frame(monkeypatch)
    with VideoReader(path) as reader:
        assert reader._order[0].pts is None
        total = reader.meta.frames
        assert read_ids(reader.read(range(key, 17 - first))) == list(range(key + first, 17))
        for i in range(20 - first, total):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {total} could not be decoded: .*dropped"):
                reader.read([i])


def test_a_dropped_frame_fails_without_decoding_the_rest(tmp_path, monkeypatch):
    """The frames after a dropped one wait for its frame: a long clip fails within `DROP_HORIZON` frames of it,
    holding no more than those, instead of decoding (and holding) every later frame first."""
    path = write_raw(tmp_path / "long.avi", id_frames(200), gop=12)
    decoded: list = []
    _drop_frame(monkeypatch, decoded=decoded)
    with VideoReader(path) as reader:
        assert reader._order[0].pts is None and reader.meta.frames == 200
        with pytest.raises(VideoDecodeError, match="frame 21 of 200 could not be decoded: .*dropped"):
            reader.read([21])
    assert len(decoded) <= 20 + DROP_HORIZON + MAX_REORDER_DEPTH


def test_a_read_holds_only_the_frames_it_wants_while_the_count_waits(tmp_path, monkeypatch):
    """Waiting on a dropped frame, the count check held every frame counted since (up to `DROP_HORIZON`, 48: 1.2 GB
    of 4K frames) where a read wants one: it holds the frames wanted, and only the count of the others."""
    path = write_raw(tmp_path / "long.avi", id_frames(200), gop=12)
    _drop_frame(monkeypatch)
    held: list[int] = []
    original = tools.video_decode.CountCheck.hold

    def hold(self, index, item):  # noqa: ANN001, ANN202
        original(self, index, item)
        held.append(sum(frame is not None for _, (frame, _), _, _ in self._held))

    monkeypatch.setattr(tools.video_decode.CountCheck, "hold", hold)
    with VideoReader(path) as reader, pytest.raises(VideoDecodeError, match="frame 21 of 200"):
        reader.read([3, 21])
    assert len(held) > DROP_HORIZON and max(held) == 1


def test_two_counts_at_once_keep_their_own_tags(tmp_path):
    """PyAV keeps a packet's tag under the tag object's id() and forgets it when any packet or frame holding it is
    freed: tagged with (cached) small ints, a decode that ran while another was under way took the other's tags with
    it, and that one failed every later frame as dropped. Two decodes of one clip, one inside the other, now both
    read."""
    path = write_raw(tmp_path / "b.avi", id_frames(40), gop=12)
    with VideoReader(path) as a, VideoReader(path) as b:
        assert a._order[0].pts is None
        outer = a.iter_frames()
        first = next(outer)
        assert [i for i, _ in b.iter_frames()] == list(range(40))
        assert [first[0]] + [i for i, _ in outer] == list(range(40))


def test_packets_an_edit_list_discards_are_not_waited_on(tmp_path):
    """An MP4 whose edit list ends early: FFmpeg demuxes the next GOP marked discard and drops its frames, and the
    scan leaves those packets out of the count. Counting the output (the reader's fallback from timestamps out of
    presentation order, `OutOfOrder`), the count check waited on those packets too, so the last kept frames, which
    come out after the discarded keyframe is fed, failed as dropped; they read before it."""
    path = _end_trimmed(tmp_path, keep=16)
    with VideoReader(path) as reader:
        index = reader._order[0]
        assert index.pts is not None and reader.meta.frames == 16
        reader._order = (FrameIndex(None, (), slices=index.slices, lead=index.lead), None)  # as `OutOfOrder` leaves it
        assert read_ids(reader.read(range(16))) == list(range(16))
        assert read_ids(reader.read([15])) == [15]


def test_a_dropped_frame_s_error_is_a_decode_error_the_tool_service_serves_alike(tmp_path, monkeypatch):
    """A read's error for a frame the count could not confirm was a FrameDropped, whose class the tool service's
    client does not know: served (the class's name and the message, tools/service_frames.py) it came back as a plain
    VideoError, its fault "VideoError: FrameDropped: ..." ("unusable") where the read in-process recorded
    "FrameDropped: ..." ("undecodable"); nor did it pickle (a worker process's error). It is a VideoDecodeError as
    the reader's other decode failures are."""
    path = write_raw(tmp_path / "b.avi", id_frames(40), gop=12)
    _drop_frame(monkeypatch)
    with VideoReader(path) as reader, pytest.raises(VideoDecodeError, match="frame 25 of 40 .*dropped") as local:
        reader.read([25])
    served = served_error({"type": type(local.value).__name__, "message": str(local.value)})
    assert type(served) is type(local.value) and str(served) == str(local.value)
    assert fault_label(served) == "undecodable"
    assert str(pickle.loads(pickle.dumps(local.value))) == str(local.value)


def test_iter_frames_fails_with_a_plain_decode_error_that_pickles(tmp_path, monkeypatch):
    """`iter_frames` raised its count check's FrameDropped as it was: unlike a read's error it did not pickle (a
    worker process's error) and the tool service's client did not know its class. It is a plain VideoDecodeError
    naming the frame now, after the frames before it."""
    path = write_raw(tmp_path / "b.avi", id_frames(40), gop=12)
    _drop_frame(monkeypatch)
    got = []
    with VideoReader(path) as reader, pytest.raises(VideoDecodeError, match="frame 15 of 40 .*dropped") as err:
        got.extend(i for i, _ in reader.iter_frames())
    assert got == list(range(15)) and type(err.value) is VideoDecodeError
    assert str(pickle.loads(pickle.dumps(err.value))) == str(err.value)


def test_a_deep_reorder_on_many_frame_threads_is_no_drop(tmp_path, monkeypatch):
    """Frame threads hold back up to 15 more frames (FFmpeg's auto thread count, 16 from 15 cores on), after the
    decoder's own reorder delay (16 for H.264 whose SPS declares no reorder: FFmpeg derives 15-16 from the level):
    a frame's packet then comes out up to 47 frames after a frame that came out once it was fed. Waiting only
    `DROP_HORIZON` (2 x 16) frames, such a clip failed as dropped with nothing dropped. Emulated here: 16 frame
    threads and a reorder depth of 16 on x264 with 16 B-frames (640x368, where the reader takes frame threads)."""
    path = tmp_path / "deep.h264"
    with av.open(str(path), "w", format="h264") as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt = 640, 368, "yuv420p"
        s.options = {"x264-params": "keyint=60:bframes=16:b-pyramid=strict:b-adapt=0:threads=1:log-level=error"}
        for f in id_frames(60, h=368, w=640):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    original = tools.video_reader.reorder_decoder

    def deep(stream, index):
        original(stream, index)
        stream.thread_count, stream.codec_context.reorder_depth = 16, MAX_REORDER_DEPTH

    monkeypatch.setattr(tools.video_reader, "reorder_decoder", deep)
    with VideoReader(path) as reader:
        assert reader._order[0].pts is None and reader.meta.frames == 60
        assert read_ids(reader.read(range(60))) == list(range(60))


@pytest.mark.parametrize("name", ["b.mp4", "b.ts"])
def test_a_frame_the_decoder_gives_none_for_with_timestamps_fails_alone(tmp_path, monkeypatch, name):
    """A picture the decoder outputs none for (an HEVC picture coded not for output, ``pic_output_flag`` 0, which the
    scan counts as a frame: no encoder at hand writes one, so simulated): by their timestamps each other frame keeps
    its index, and a read of that one is an error, never the next frame."""
    path = write_raw(tmp_path / name, id_frames(40), gop=12)
    _drop_frame(monkeypatch)
    with VideoReader(path) as reader:
        assert reader._order[0].pts is not None and reader.meta.frames == 40
        assert read_ids(reader.read([3, 19, 39, 21])) == [3, 19, 39, 21]
        with pytest.raises(VideoDecodeError, match="frame 20 of 40 could not be decoded"):
            reader.read([20])
        assert read_ids(reader.read([21, 22])) == [21, 22]
