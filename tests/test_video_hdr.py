"""An HDR clip (PQ or HLG transfer) is decoded without tone mapping (`tools.video_hdr`): its frames reach the agent
dim, flat and desaturated (an SDR-bright scene's code values squeezed into about 50..150), and nothing said so. The
reader names the transfer (``VideoMeta.hdr``) and the run notes it."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from graph_scripts import make_agent, moving_square, run

from tests.test_video import id_frames
from tools.video import probe, read_all_frames

X265 = {"PQ": "smpte2084", "HLG": "arib-std-b67", None: "bt709"}


def _hevc10(path: Path, frames: np.ndarray, hdr: str | None) -> Path:
    primaries = "bt709" if hdr is None else "bt2020"
    matrix = "bt709" if hdr is None else "bt2020nc"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx265", rate=16)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p10le"
        s.options = {"x265-params": f"colorprim={primaries}:transfer={X265[hdr]}:colormatrix={matrix}:log-level=0"}
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize("name", ["c.mp4", "c.ts", "c.hevc"])
@pytest.mark.parametrize("hdr", ["PQ", "HLG", None])
def test_the_reader_names_an_hdr_transfer(tmp_path: Path, hdr: str | None, name: str) -> None:
    """MP4 states the transfer in its headers; MPEG-TS and a raw HEVC stream only in the bitstream (the SPS)."""
    path = _hevc10(tmp_path / name, id_frames(8), hdr)
    for src in (path, path.read_bytes()):
        assert probe(src).hdr == hdr
    assert read_all_frames(path).shape == (8, 64, 64, 3)


def test_an_hdr_clip_is_noted_in_the_run(tmp_path: Path) -> None:
    with av.open(str(moving_square(tmp_path / "sq.mp4"))) as c:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    agent, _ = make_agent("full")
    out = run(agent, _hevc10(tmp_path / "pq.mp4", frames, "PQ"))
    note = [n for n in out["notes"] if "HDR" in n]
    assert note and note[0].startswith("quality: the clip is HDR (PQ)") and note[0] in out["result"].reasons
    out = run(make_agent("full")[0], moving_square(tmp_path / "sdr.mp4"), run_id="sdr")
    assert not [n for n in out["notes"] if "HDR" in n]
