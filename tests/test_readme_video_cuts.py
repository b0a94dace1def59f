"""The README's account of a video clip cut short, for MPEG-TS, against what the reader does (`tools.mpegts_tail`,
`tools.video_complete`): a transport stream cut inside a packet of the video's PID is a truncated clip
(`VideoDecodeError`); only a cut on a packet's boundary leaves no trace and reads as a shorter clip. The README said
"a cut TS file reads as shorter", which was true before the packet check and no longer is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_video import id_frames
from tools.video import VideoDecodeError, probe, write_video

README = Path(__file__).resolve().parents[1] / "README.md"


def _cut_passage() -> str:
    """The README's sentences on a clip cut short, up to the next heading, as one line."""
    text = README.read_text()
    start = text.index("A clip cut short")
    return " ".join(text[start:text.index("\n#", start)].split())


def test_the_readme_says_a_ts_cut_inside_a_packet_is_truncated_and_only_a_boundary_cut_reads_shorter() -> None:
    passage = _cut_passage()
    assert re.search(r"MPEG-TS[^.]*ends inside a transport packet of the video's PID", passage), passage
    shorter = [s for s in re.split(r"(?<=\.)\s", passage) if "shorter" in s and "not a shorter clip" not in s]
    assert shorter and all("boundary" in s for s in shorter), shorter


def test_what_the_readme_says_of_a_cut_ts_is_what_the_reader_does(tmp_path: Path) -> None:
    data = write_video(tmp_path / "c.ts", id_frames(40)).read_bytes()
    assert len(data) % 188 == 0 and probe(data).frames == 40
    with pytest.raises(VideoDecodeError, match="truncated"):
        probe(data[:-100])  # inside the last packet
    assert probe(data[:len(data) - 188 * 20]).frames < 40  # on a packet's boundary: a shorter clip
