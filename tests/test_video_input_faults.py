"""Which party a failed clip read is blamed on, and how it is worded: a path that is a folder, the demo's label for
a clip it could not read, a ValueError of the reader's own code, an I/O error of a disk that dropped out for a
moment, and an I/O error of the reader's own edit-list reads."""

from __future__ import annotations

import errno
from pathlib import Path

import av
import numpy as np
import pytest

from tests.graph_scripts import garbage_file, moving_square
from tests.test_video import id_frames, write_raw
from tools import video_edits, video_errors, video_scan
from tools.video import VideoDecodeError, VideoNotFoundError, VideoReader, probe
from tools.video_errors import environmental, unreached, wrapped


def test_a_folder_at_a_clips_path_is_named_a_folder_and_retried_once_a_clip_is_there(tmp_path):
    """A manifest path naming a folder read "not a regular file", and its row stayed final: the fault is the path's,
    not the bytes of a clip. It says what is there, and is retried (as a clip not found) once a file can be read."""
    from graph.batch_retry import retryable

    folder = tmp_path / "ep1.mp4"
    folder.mkdir()
    with pytest.raises(VideoNotFoundError) as err:
        probe(folder)
    message = str(err.value)
    assert message == f"{folder}: is a directory, not a video file"
    assert unreached(message) and not environmental(message)
    fault = {"status": "ineligible", "reasons": [f"quality: video: VideoNotFoundError: {message}"]}
    assert not retryable(fault, str(folder))  # still a folder: a rerun fails the same way
    folder.rmdir()
    moving_square(folder, frames=4)
    assert retryable(fault, str(folder))
    old = {"status": "ineligible", "reasons": [f"quality: video: VideoNotFoundError: {folder}: not a regular file"]}
    assert retryable(old, str(folder))  # rows written with the old words too


def test_the_demo_labels_a_clip_by_what_is_wrong_with_it(tmp_path, monkeypatch):
    """The demo's evidence table called every clip it could not read "undecodable": a clip deleted since it was
    rendered, or one the disk failed to read, sent the user to a clip whose bytes are fine."""
    from rich.console import Console

    from graph import demo
    from tools.quality import QualityThresholds

    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    rows = [{"path": str(p), "label": "bad", "pattern": "none"}
            for p in (tmp_path / "gone.mp4", garbage_file(tmp_path / "junk.mp4"), empty)]
    console = Console(record=True, width=200)
    demo._evidence_table(rows, tmp_path, console, QualityThresholds())
    lines = {line.split("│")[1].strip(): line for line in console.export_text().splitlines() if line.count("│") > 4}
    assert "not found" in lines["gone"] and "undecodable" not in lines["gone"], lines
    assert "undecodable" in lines["junk"], lines
    assert "empty" in lines["empty"] and "undecodable" not in lines["empty"], lines


def test_a_value_error_of_the_readers_own_code_is_no_fault_of_the_clip(tmp_path, monkeypatch):
    """`wrapped` turned any ValueError into a VideoDecodeError: a bug of the reader's own code read as a corrupt clip,
    a final video fault the user was sent to re-render for. Only PyAV's own ValueErrors are the clip's."""
    clip = moving_square(tmp_path / "c.mp4", frames=4)

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("a bug in the reader")

    monkeypatch.setattr(video_scan, "check_duration", broken)
    with pytest.raises(ValueError, match="a bug in the reader") as err:
        VideoReader(clip)
    assert not isinstance(err.value, video_errors.VideoError)
    with pytest.raises(ValueError, match="negative dimensions") as err, wrapped("c.mp4", "reading failed"):
        np.empty(-1)  # numpy's, called by our code
    assert not isinstance(err.value, video_errors.VideoError)
    with pytest.raises(VideoDecodeError, match=r"c\.mp4: reading failed \(ValueError: not a pixel format"), \
            wrapped("c.mp4", "reading failed"):
        av.video.format.VideoFormat("not-a-format")  # PyAV's own, about what it was given: the clip's


def _fails_once(real):
    """`av.open` that fails its first call with EIO, as a network disk that drops out for a moment."""
    calls = []

    def opener(target, *args, **kwargs):
        calls.append(target)
        if len(calls) == 1:
            av.error.err_check(-errno.EIO, str(target))
        return real(target, *args, **kwargs)

    return opener


def test_an_io_error_that_clears_at_once_is_the_machines_fault(tmp_path, monkeypatch):
    """FFmpeg's EIO on a file whose bytes read back was called the clip's (a final VideoDecodeError), since the
    Matroska demuxer gives EIO for an element that does not parse: a network disk that failed one read and was back
    a moment later made a good clip final. An EIO is the clip's only where FFmpeg's demux of it fails so again."""
    clip = moving_square(tmp_path / "c.mp4", frames=4)
    monkeypatch.setattr(av, "open", _fails_once(av.open))
    with pytest.raises(VideoNotFoundError, match=r"cannot be read \(OSError: \[Errno 5\]") as err:
        probe(clip)
    assert environmental(str(err.value))  # retried by --retry-ineligible


def test_a_matroska_element_that_does_not_parse_is_still_the_clips_fault(tmp_path):
    """The real case `demuxer_io_error` is for: FFmpeg's Matroska demuxer fails an element ID that does not parse
    with EIO, every time; that clip stays the clip's (final while unchanged)."""
    good = write_raw(tmp_path / "v.mkv", id_frames(16), gop=8)
    data = bytearray(good.read_bytes())
    info = b"\x15\x49\xa9\x66"  # the Segment Info element's ID: first named in the SeekHead, then the element
    data[data.index(info, data.index(info) + 4)] = 0xFF
    bad = tmp_path / "bad.mkv"
    bad.write_bytes(bytes(data))
    for src in (bad, bytes(data)):
        with pytest.raises(VideoDecodeError, match="FFmpeg reported an input/output error") as err:
            probe(src)
        assert not environmental(str(err.value))


@pytest.mark.parametrize("read", ["kept_frames", "late_empty_edit"])
def test_a_machine_fault_reading_the_edit_list_is_no_clip_without_one(tmp_path, monkeypatch, read):
    """`kept_frames` and `late_empty_edit` turned any OSError into "no edit list": a disk that dropped out while they
    read an MP4's moov made a clip cut with an edit list (`ffmpeg -ss ... -c copy`) a "truncated file" (final), and
    one with a pause in its edit list pass with its first frames shown again. The machine's error now escapes."""
    clip = moving_square(tmp_path / "c.mp4", frames=4)

    def failing(src: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(video_edits, "read_moov", failing)
    with pytest.raises(OSError, match="Input/output error"):
        getattr(video_edits, read)(clip)
    monkeypatch.setattr(video_edits, "read_moov", lambda src: (_ for _ in ()).throw(IsADirectoryError(21, "dir")))
    assert getattr(video_edits, read)(clip) is None  # not the machine's: no edit list to read, as before
    assert Path(clip).is_file()


class _SeekFailsOnce:
    """A demuxer whose first seek fails with FFmpeg's EIO, as a network disk that drops out for a moment."""

    failed = False

    def __init__(self, container: av.container.InputContainer) -> None:
        self._container = container

    def seek(self, *args: object, **kwargs: object) -> None:
        if not _SeekFailsOnce.failed:
            _SeekFailsOnce.failed = True
            av.error.err_check(-errno.EIO, "seek")
        self._container.seek(*args, **kwargs)

    def __getattr__(self, name: str) -> object:
        return getattr(self._container, name)


def test_a_seek_that_fails_with_an_io_error_decodes_from_the_start(tmp_path, monkeypatch):
    """A keyframe seek failing with FFmpeg's EIO falls back to decoding from the start, which reads the file again:
    an error the disk repeats fails there (and is classified there), one that cleared costs nothing. Asking the
    second demux there (`demuxer_io_error`) made a seek's passing EIO fail the read as the machine's."""
    from tests.test_video import read_ids
    from tools import video_reader

    path = write_raw(tmp_path / "g.mp4", id_frames(48), gop=8)
    real = video_reader.open_container
    monkeypatch.setattr(_SeekFailsOnce, "failed", False)
    monkeypatch.setattr(video_reader, "open_container", lambda *a, **k: _SeekFailsOnce(real(*a, **k)))
    with VideoReader(path) as reader:
        assert read_ids(reader.read([2, 30, 45])) == [2, 30, 45]
    assert _SeekFailsOnce.failed



class _KeyframeSeekFailsOnce(_SeekFailsOnce):
    """The first seek past the start fails with FFmpeg's EIO (the rewind of the scan's demuxer to frame 0 passes)."""

    def seek(self, offset: int, *args: object, **kwargs: object) -> None:
        if offset > 0 and not _SeekFailsOnce.failed:
            _SeekFailsOnce.failed = True
            av.error.err_check(-errno.EIO, "seek")
        self._container.seek(offset, *args, **kwargs)


def test_a_seek_that_failed_once_does_not_stop_later_reads_seeking(tmp_path, monkeypatch):
    """A seek FFmpeg failed (a network disk's passing EIO) made the reader decode from the start for every later read
    as well, as if the container could not seek: a cached reader of a long clip then decoded the whole clip up to each
    extra frame. Only a seek that landed wrong says that; the next read seeks again."""
    from tests.test_video import read_ids
    from tools import video_reader

    path = write_raw(tmp_path / "g.mp4", id_frames(96), gop=8)
    real = video_reader.open_container
    monkeypatch.setattr(_SeekFailsOnce, "failed", False)
    monkeypatch.setattr(video_reader, "open_container", lambda *a, **k: _KeyframeSeekFailsOnce(real(*a, **k)))
    decoded: list[int] = []
    original = VideoReader._packets_to_frames

    def counting(self, *args):
        for frame in original(self, *args):
            decoded.append(frame.pts)
            yield frame

    monkeypatch.setattr(VideoReader, "_packets_to_frames", counting)
    with VideoReader(path) as reader:
        assert read_ids(reader.read([2, 30])) == [2, 30]
        assert _SeekFailsOnce.failed
        decoded.clear()
        assert read_ids(reader.read([90])) == [90]
        assert len(decoded) < 20  # from the keyframe at 88, not the 91 frames from the start


class _DemuxFailsWithEio:
    """A demuxer whose every demux fails with FFmpeg's EIO: a demuxer's word for data it cannot parse, every time."""

    def __init__(self, container: av.container.InputContainer) -> None:
        self._container = container

    def demux(self, *args: object, **kwargs: object):
        av.error.err_check(-errno.EIO, "demux")
        yield from ()

    def __enter__(self) -> _DemuxFailsWithEio:
        return self

    def __exit__(self, *exc: object) -> None:
        self._container.close()

    def __getattr__(self, name: str) -> object:
        return getattr(self._container, name)


def test_the_second_demux_of_an_io_error_opens_a_tiny_transport_stream_as_the_reader_does(tmp_path, monkeypatch):
    """The second demux that tells a demuxer's EIO from the disk's (`demuxer_io_error`) opened the clip without the
    MPEG-TS format the reader names for a tiny TS that FFmpeg's probe cannot place (`tools.mpegts_tail`): that open
    failed (EOF), the EIO was called the machine's, and --retry-ineligible scored the clip again on every run."""
    from tools.video import write_video

    clip = write_video(tmp_path / "two.ts", id_frames(2))
    real = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: _DemuxFailsWithEio(real(*a, **k)))
    with pytest.raises(VideoDecodeError, match="FFmpeg reported an input/output error") as err:
        probe(clip)
    assert not environmental(str(err.value))
