"""Failures inside FFmpeg or in the reader's own reads of a clip, and how they are classified: a seek FFmpeg refuses
(EPERM, its generic error) decodes from the start instead, an EPERM from FFmpeg is no permission problem of the
file, and an OSError of the reader's own container-structure reads names the clip as a ``VideoError``."""

from __future__ import annotations

import errno
from pathlib import Path

import av
import pytest

from tests.test_video import id_frames, read_ids, write_raw
from tools import mp4_boxes, video_feed, video_reader, video_rotation
from tools.video import VideoDecodeError, VideoNotFoundError, VideoReader
from tools.video_errors import environmental, unreached


class _SeekRefused:
    """A demuxer whose every seek fails as FFmpeg's generic -1 (AVERROR(EPERM)) does; the rest is the real one."""

    def __init__(self, container: av.container.InputContainer) -> None:
        self._container = container

    def seek(self, *args: object, **kwargs: object) -> None:
        raise av.error.PermissionError(errno.EPERM, "Operation not permitted")

    def __getattr__(self, name: str) -> object:
        return getattr(self._container, name)


def test_a_seek_ffmpeg_refuses_decodes_from_the_start(tmp_path, monkeypatch):
    """A keyframe seek that failed in FFmpeg (EPERM) ended the read as "cannot be read (PermissionError: ...)", a
    VideoNotFoundError that `tools.video_errors.unreached` took for a clip without read permission (retried by every
    --retry-ineligible, failing the same way). The frames are there: the reader now decodes them from the start."""
    path = write_raw(tmp_path / "g.mp4", id_frames(48), gop=8)
    real = video_reader.open_container
    monkeypatch.setattr(video_reader, "open_container", lambda *a, **k: _SeekRefused(real(*a, **k)))
    with VideoReader(path) as reader:
        assert read_ids(reader.read([2, 30, 45])) == [2, 30, 45]
        assert read_ids(reader.read([40])) == [40]


def test_a_seek_the_machine_fails_is_still_the_machines_fault(tmp_path, monkeypatch):
    """Only FFmpeg's own refusals fall back to decoding from the start: a seek the machine failed (too many open
    files) still fails the read as the machine's fault (retried), not as a corrupt clip. (FFmpeg's EIO, the disk's or
    its demuxer's word for data it cannot parse, falls back too: the decode from the start meets it again, if at all.)"""
    path = write_raw(tmp_path / "e.mp4", id_frames(48), gop=8)
    real = video_reader.open_container

    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    refused = _SeekRefused
    monkeypatch.setattr(refused, "seek", failing)
    monkeypatch.setattr(video_reader, "open_container", lambda *a, **k: refused(real(*a, **k)))
    with VideoReader(path) as reader, pytest.raises(VideoNotFoundError, match=r"\[Errno 24\]") as err:
        reader.read([2, 30])
    assert environmental(str(err.value))


def test_ffmpeg_eperm_while_decoding_is_the_clips_fault_not_a_permission_problem(tmp_path, monkeypatch):
    """FFmpeg returns -1 (EPERM) as a generic failure; PyAV raises it as a PermissionError. While decoding a clip
    that reads back whole it said "cannot be read (PermissionError: [Errno 1] ...)" (`unreached`: retried as a
    permission problem); it is now a VideoDecodeError of the clip, neither unreached nor environmental."""
    path = write_raw(tmp_path / "d.mp4", id_frames(16), gop=8)

    def refused(container: object, stream: object) -> object:
        raise av.error.PermissionError(errno.EPERM, "Operation not permitted")
        yield

    with VideoReader(path) as reader:
        monkeypatch.setattr(video_feed, "demux", refused)  # the reader's decoding only (the scan has its own)
        with pytest.raises(VideoDecodeError) as err:
            reader.read([3])
    message = str(err.value)
    assert not isinstance(err.value, VideoNotFoundError)
    assert str(path) in message and not unreached(message) and not environmental(message)


def test_a_real_permission_error_from_ffmpeg_stays_unreached(tmp_path, monkeypatch):
    """EACCES (a clip of mode 000) keeps its "cannot be read (PermissionError: ...)": retried once readable."""
    path = write_raw(tmp_path / "p.mp4", id_frames(4), gop=4)

    def denied(target, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 (av.open's signature)
        raise av.error.PermissionError(errno.EACCES, "Permission denied", str(target))

    monkeypatch.setattr(av, "open", denied)
    with pytest.raises(VideoNotFoundError) as err:
        VideoReader(path)
    assert unreached(str(err.value))


def _fragmented(tmp_path) -> str:  # noqa: ANN001
    path = tmp_path / "frag.mp4"
    src = write_raw(tmp_path / "src.mp4", id_frames(16), gop=8)
    with av.open(str(src)) as i, av.open(str(path), "w", options={"movflags": "frag_keyframe+empty_moov"}) as o:
        si = i.streams.video[0]
        so = o.add_stream_from_template(si)
        for p in i.demux(si):
            if p.size:
                p.stream = so
                o.mux(p)
    return str(path)


@pytest.mark.parametrize(("fault", "kind", "says"), [
    (OSError(errno.EIO, "Input/output error"), VideoNotFoundError, "[Errno 5]"),  # the machine's: retried
    (FileNotFoundError(errno.ENOENT, "No such file or directory"), VideoNotFoundError, "video file not found"),
    (IsADirectoryError(errno.EISDIR, "Is a directory"), VideoDecodeError, "[Errno 21]"),
])
def test_an_oserror_of_the_readers_own_box_reads_names_the_clip(tmp_path, monkeypatch, fault, kind, says):
    """The truncation checks (`cut_fragment`, `index_past_end`, `fragmented_duration`, `segment_shortfall`,
    `ends_inside_packet`, `whole_flv`, ...) open the file themselves, outside `wrapped`: an I/O error there (a clip
    replaced or a disk that dropped out after FFmpeg opened it) escaped the reader as a bare OSError, no VideoError,
    naming no clip. It is now classified as FFmpeg's errors are: the machine's EIO retried, a vanished clip not
    found, anything else the clip's."""
    path = _fragmented(tmp_path)
    assert VideoReader(path).meta.frames == 16

    def failing_open(*args: object, **kwargs: object) -> None:
        if isinstance(fault, FileNotFoundError):  # the clip is gone: FFmpeg's open worked, the box read finds nothing
            Path(path).unlink()
        raise fault

    monkeypatch.setattr(mp4_boxes, "open", failing_open, raising=False)
    with pytest.raises(kind, match=says) as err:
        VideoReader(path)
    assert path in str(err.value)
    assert environmental(str(err.value)) == (fault.errno == errno.EIO)
    assert unreached(str(err.value)) == isinstance(fault, FileNotFoundError)  # retried once the clip is back


def test_a_machine_fault_reading_the_display_matrix_is_no_unrotated_clip(tmp_path, monkeypatch):
    """`display_rotation` turned any OSError into "no rotation": a disk that failed (EIO) while it read a phone
    clip's moov gave its frames sideways, judged as if whole. The machine's fault is now the reader's VideoError
    (retried); a file it cannot parse still has no rotation."""
    path = write_raw(tmp_path / "r.mp4", id_frames(4), gop=4)

    def failing(*args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(video_rotation, "read_moov", failing)
    with pytest.raises(VideoNotFoundError, match=r"\[Errno 5\]") as err:
        VideoReader(path)
    assert environmental(str(err.value))


class _DecodeFails:
    """A demuxer whose decoding fails as a disk that dropped out does (EIO); the rest is the real one."""

    def __init__(self, container: av.container.InputContainer) -> None:
        self._container = container

    def __enter__(self) -> _DecodeFails:
        return self

    def __exit__(self, *exc: object) -> None:
        self._container.close()

    def decode(self, *args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    def __getattr__(self, name: str) -> object:
        return getattr(self._container, name)


def test_a_machine_fault_decoding_a_matroska_clips_rotation_is_no_unrotated_clip(tmp_path, monkeypatch):
    """`decoded_rotation` (a Matroska / WebM clip's display matrix, on its first decoded frame) turned every error into
    "no rotation", the machine's too: its frames came back sideways. The machine's fault now fails the read."""
    path = write_raw(tmp_path / "r.mkv", id_frames(4), gop=4)
    real = video_rotation.open_container
    monkeypatch.setattr(video_rotation, "open_container", lambda *a, **k: _DecodeFails(real(*a, **k)))
    with pytest.raises(VideoNotFoundError, match=r"\[Errno 5\]") as err:
        VideoReader(path)
    assert environmental(str(err.value))


def test_a_frame_index_the_agent_got_wrong_is_no_fault_of_the_clip():
    """A FrameIndexError is the caller's (an index past the clip's end, or not an integer, asked for by the agent's own
    code), but `to_fault` recorded it as every VideoError, kind "video": the clip blamed, and the row final for
    --retry-ineligible. It is an internal fault now, retried; the clip's own errors stay video faults."""
    from graph.batch_retry import retryable
    from graph.nodes.common import to_fault
    from tools.video import FrameIndexError

    wrong = to_fault("observe", FrameIndexError("c.mp4: frame index 200 is out of range for a 100-frame video"))
    cut = to_fault("observe", VideoDecodeError("c.mp4: truncated file: ..."))
    assert (wrong.kind, cut.kind) == ("internal", "video")
    assert "FrameIndexError: c.mp4: frame index 200" in wrong.message
    results = [{"status": "ineligible", "reward": None, "reasons": [f.reason()]} for f in (wrong, cut)]
    assert [retryable(r, "c.mp4", readable=lambda p: True) for r in results] == [True, False]


def test_a_clip_gone_between_its_size_check_and_its_read_is_retried_once_it_is_back(tmp_path, monkeypatch):
    """A clip that vanished after `_open` checked its size (a renderer replacing it, a sync tool) failed inside FFmpeg
    as a FileNotFoundError, worded "...: no such file (...)", which `tools.video_errors.unreached` (then in
    graph.batch_resume) did not know (it read only "video file not found"): the row was final, and --retry-ineligible
    never scored the clip once back."""
    from graph.batch_retry import retryable
    from graph.nodes.common import to_fault

    path = write_raw(tmp_path / "v.mp4", id_frames(4), gop=4)
    kept = path.read_bytes()
    real = av.open

    def vanishing(target, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 (av.open's signature)
        path.unlink(missing_ok=True)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(av, "open", vanishing)
    with pytest.raises(VideoNotFoundError) as err:
        VideoReader(path)
    message = str(err.value)
    assert message == f"{path}: video file not found"  # as a clip missing at the size check is worded
    assert unreached(message) and not environmental(message)
    row = {"status": "ineligible", "reward": None, "reasons": [to_fault("quality", err.value).reason()]}
    assert not retryable(row, str(path))  # still gone: a rerun fails the same way
    path.write_bytes(kept)
    assert retryable(row, str(path))


def test_rows_worded_no_such_file_before_are_retried_too():
    """Outputs written before the wordings agreed hold "...: no such file ([Errno 2] ...)" rows: read as unreached."""
    old = ("VideoNotFoundError: c.mp4: cannot be opened as a video (not a video file, or truncated/corrupt): no such "
           "file ([Errno 2] No such file or directory: 'file:c.mp4')")
    assert unreached(old) and not environmental(old)
    assert not unreached("VideoDecodeError: c.mp4: cannot be opened as a video (not a video file, or "
                         "truncated/corrupt) (InvalidDataError: [Errno 1094995529] Invalid data found when processing "
                         "input: 'file:c.mp4')")


def test_a_clip_naming_a_file_that_is_not_there_is_the_clips_fault(tmp_path):
    """FFmpeg's concat demuxer (probed from the bytes: an ffconcat list saved as .mp4) fails with ENOENT for a listed
    file that is not there, though the clip itself reads back: no clip that vanished (`unreached` would retry it on
    every --retry-ineligible, failing the same way), but a VideoDecodeError of the clip, final while it is unchanged."""
    path = tmp_path / "list.mp4"
    path.write_text("ffconcat version 1.0\nfile missing.mp4\n")
    with pytest.raises(VideoDecodeError, match="FileNotFoundError") as err:
        VideoReader(path)
    assert not unreached(str(err.value)) and not environmental(str(err.value))
