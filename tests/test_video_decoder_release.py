"""Releasing a frame-threaded decoder that still decodes tagged packets (``tools.video_threads.release_decoder``).

A frame thread that drops the last reference to a packet PyAV tagged (``tag_packet``: PyAV's opaque value) takes the
GIL to free the tag; PyAV frees the codec context holding the GIL while it waits for those threads. Closing only the
demuxer, as the reads did, left the decoder to that deallocation: with packets that gave no frame still in its threads
(a damaged H.264 packet, a read ended or failed mid-decode) the process hung for good. Each case runs in a child
process under a timeout: a deadlock holds the GIL, so no timeout inside the process can fire."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import av
import numpy as np

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import gc, sys
import av
from av.codec.context import ThreadType
from tools.video_tags import tag_packet
from tools.video_threads import release_decoder, watched_decoder

path, threads = sys.argv[1], int(sys.argv[2])
with av.open(path) as c:
    data = [bytes(p) for p in c.demux(video=0) if p.size]
for rep in range(10):
    container = av.open(path)
    stream = container.streams.video[0]
    ctx = stream.codec_context
    ctx.thread_type, ctx.thread_count = ThreadType.FRAME, threads
    watched_decoder(ctx)
    fed = [av.Packet(d) for d in data[:12 + rep % 5]]
    fed += [av.Packet(d[:8]) for d in data[20:20 + threads]]  # cut short: no frame, the packet's last reference
    for i, packet in enumerate(fed):                          # is the frame thread's
        tag_packet(packet, i, decode=None)
        try:
            ctx.decode(packet)
        except av.error.InvalidDataError:
            pass
    del fed, packet, ctx
    release_decoder(container, stream)
    del container, stream
    gc.collect()
print("released")
"""


def _h264(path: Path) -> Path:
    """30 frames of noise, 640x368 (frame threads' size), one GOP."""
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt = 640, 368, "yuv420p"
        s.options = {"g": "30", "bf": "0"}
        for _ in range(30):
            frame = rng.integers(0, 256, (368, 640, 3), dtype=np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def test_a_frame_threaded_decoder_released_with_packets_in_its_threads_does_not_hang(tmp_path):
    """Tagged packets that give no frame fed last to 3 or 8 frame threads, the decoder then released at once: on
    main (the demuxer closed, the decoder freed with it) the child hung on the first round; flushed first, it ends."""
    clip = _h264(tmp_path / "c.mp4")
    for threads in (3, 8):
        run = subprocess.run([sys.executable, "-c", _CHILD, str(clip), str(threads)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.strip() == "released"
