"""An MP4 whose samples are fields (a stream copy of field-coded broadcast H.264): the container's sample count is no
frame count, and the errors that name it say so."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import pytest

from tests.h264_fields import field_coded
from tools.video import VideoDecodeError, probe

N = 20


def _field_samples(path: Path, frames: int = N) -> Path:
    """`frames` frames, each two field samples (an IDR frame every 4), the moov at the front."""
    raw = path.with_suffix(".h264")
    raw.write_bytes(field_coded(frames, gop=4))
    with av.open(str(raw)) as i, av.open(str(path), "w", options={"movflags": "faststart"}) as o:
        so = o.add_stream_from_template(i.streams.video[0])
        so.time_base = tb = Fraction(1, 50)
        for k, p in enumerate(p for p in i.demux(video=0) if p.size):
            p.stream, p.time_base, p.pts, p.dts, p.duration = so, tb, k, k, 1
            p.is_keyframe = k % 8 == 0
            o.mux(p)
    return path


def test_the_whole_clip_counts_frames_not_samples(tmp_path):
    assert probe(_field_samples(tmp_path / "f.mp4")).frames == N


@pytest.mark.parametrize("keep", ["none", "half"])
def test_a_cut_field_sample_mp4_names_samples_not_frames(tmp_path, keep):
    """Cut inside its media data: the error said the container "declares 40 frames" of a 20-frame clip."""
    data = _field_samples(tmp_path / "f.mp4").read_bytes()
    mdat = data.index(b"mdat") + 4
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[:mdat if keep == "none" else (mdat + len(data)) // 2])
    with pytest.raises(VideoDecodeError, match=r"truncated file: the container declares 40 samples \(frames, or "
                                               r"fields of interlaced video\) but only \d+ could be read") as e:
        probe(cut)
    assert "40 frames" not in str(e.value)
