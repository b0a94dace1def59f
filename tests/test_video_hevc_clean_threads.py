"""A clean HEVC clip read with frame threads, the decoder told to fail on what it finds (``err_detect=crccheck+explode``,
``tools.video_threads.watched_decoder``, now with frame threads too): every frame reads, by a whole read and by reads
of single frames and of subsets (seeks), each exactly as FFmpeg decodes it, with picture hashes or without; and a read
that does not seek on the decoder it opened with (no fresh one: ``tools.video_feed``'s handover comes only after a failed
packet). A seek off a decoder with packets in flight renews it (``Lapse.in_flight``: a failure among them, its error
dropped by the flush, lapses its checks unseen)."""

from __future__ import annotations

import faulthandler
import sys

import numpy as np
import pytest

from tests.test_video_concealed import eight_frame_threads
from tests.test_video_hevc_damage import N, _hevc, _plain
from tools import video_feed
from tools.video import VideoReader


@pytest.mark.parametrize("params", [":hash=1", ":hash=1:open-gop=1:bframes=4", ""])
def test_a_clean_hevc_clip_reads_every_frame_with_frame_threads(tmp_path, monkeypatch, request, params):
    eight_frame_threads(monkeypatch)
    faulthandler.dump_traceback_later(300, exit=True, file=sys.__stderr__)  # (a GIL deadlock: end the run)
    request.addfinalizer(faulthandler.cancel_dump_traceback_later)
    fresh = []
    real = video_feed.fresh_decoder
    monkeypatch.setattr(video_feed, "fresh_decoder", lambda ctx: fresh.append(ctx.name) or real(ctx))
    clean = _hevc(tmp_path / "c.mp4", params)
    plain = np.stack([f for _, f in sorted(_plain(clean).items())])
    assert len(plain) == N
    with VideoReader(clean) as reader:
        assert np.array_equal(reader.read(range(N)), plain)
        assert fresh == []
        for i in range(0, N, 3):
            assert np.array_equal(reader.read([i])[0], plain[i])
        for subset in ([1, 13, 25, 37], [5, 6, 30], [39, 0, 20]):
            assert np.array_equal(reader.read(subset), plain[subset])
        renewed = len(fresh)  # (at the seeks in the subsets' reads)
        assert np.array_equal(np.stack([reader.to_rgb(f) for _, f in reader.iter_frames()]), plain)
    assert len(fresh) == renewed
