"""Relative file names that FFmpeg would read as a URL (``scheme:rest``) are files: an ISO-8601 timestamp name
``2024-01-01T12:30:00.mp4`` was "Protocol not found", and ``file:x.mp4`` opened ``x.mp4`` instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_video import id_frames, read_ids
from tools.video import VideoReader, probe, read_all_frames, write_video


@pytest.mark.parametrize("name", ["2024-01-01T12:30:00.mp4", "cam.2:left.mkv", "clip %d ü.mp4"])
def test_a_name_with_a_colon_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.chdir(tmp_path)
    write_video(name, id_frames(5))
    assert (tmp_path / name).is_file()
    assert probe(name).frames == 5
    assert read_ids(read_all_frames(Path(name))) == list(range(5))


def test_a_name_that_is_a_protocol_prefix_opens_that_file_not_another(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``file:x.mp4`` (a file by that name) read ``x.mp4``: another clip's frames under this clip's name."""
    monkeypatch.chdir(tmp_path)
    write_video(tmp_path / "x.mp4", id_frames(3))
    write_video(tmp_path / "file:x.mp4", id_frames(7))
    with VideoReader("file:x.mp4") as reader:
        assert reader.meta.frames == 7
        assert read_ids(reader.read([6, 0])) == [6, 0]
