"""A clip scored while it was still being written (a renderer not done, a copy in progress) ends as a "video"
fault, which `raa score-batch --retry-ineligible` kept for good as a fault another run could not fix. A row now
records the clip's size and modification time when its run started ("clip"), and a video fault is retried once
the clip differs from that record; an unchanged clip's video fault stays final."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graph.cli import app
from tests.batch_of_one import batch_of_one, one_frame_zero
from tests.test_batch_resume import TASK, _rows
from tests.test_cli_agent import _scripted

runner = CliRunner()


def test_a_clip_scored_half_written_is_scored_again_once_it_is_whole(monkeypatch, tmp_path):
    from tests.graph_scripts import moving_square

    _scripted(monkeypatch, tmp_path)
    whole = moving_square(tmp_path / "whole.mp4", seed=1).read_bytes()
    clip = tmp_path / "c.mp4"
    clip.write_bytes(whole[: len(whole) // 2])  # the renderer is half way
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "c.mp4", "instruction": TASK}) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    assert runner.invoke(app, args).exit_code == 0
    [row] = _rows(out)
    assert row["result"]["status"] == "ineligible" and ": video: " in row["result"]["reasons"][0], row
    st = clip.stat()
    assert row["clip"] == {"size": len(whole) // 2, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "dev": st.st_dev}
    res = runner.invoke(app, [*args, "--retry-ineligible"])  # the same half clip: the fault is final
    assert "0 ineligible row(s) removed" in res.output and "0 to score" in res.output, res.output
    clip.write_bytes(whole)  # the renderer is done
    res = runner.invoke(app, args)
    assert "--retry-ineligible scores it again" in res.output, res.output  # a plain resume says so
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "1 ineligible row(s) removed" in res.output, res.output
    assert [r["result"]["status"] for r in _rows(out)] == ["scored"]


def test_a_video_fault_is_retryable_only_when_its_clip_changed():
    from graph.batch_retry import retryable

    video = {"status": "ineligible", "reasons": ["inspect: video: VideoDecodeError: c.mp4: frame 40 cannot be decoded"]}
    assert not retryable(video, "c.mp4", clip_changed=lambda p: False)
    assert retryable(video, "c.mp4", clip_changed=lambda p: True)
    assert not retryable({"status": "ineligible", "reasons": ["input: manifest line 3: not valid JSON"]}, "c.mp4",
                         clip_changed=lambda p: True)  # a bad manifest line is no clip


PERMISSION_FAULTS = [  # as tools.video words them for a user without the permission (rows written so far)
    "quality: video: VideoNotFoundError: c.mp4: cannot be read (PermissionError: [Errno 13] Permission denied: "
    "'/data/c.mp4')",  # no permission to the clip's folder
    "quality: video: VideoDecodeError: c.mp4: cannot be opened as a video (not a video file, or truncated/corrupt) "
    "(PermissionError: [Errno 13] Permission denied: 'file:/data/c.mp4')",  # a clip of mode 000 (before its fix)
]


def test_a_permission_fault_is_retried_once_the_clip_can_be_read():
    """A clip that could not be read for want of permission is an environment fault the user fixes (chmod), which
    changes neither the clip's size nor its modification time: kept final as a video fault, --retry-ineligible
    never scored it again. It is retried once the clip can be read, as a clip "not found" once it is a file."""
    from graph.batch_retry import retryable

    for reason in PERMISSION_FAULTS:
        fault = {"status": "ineligible", "reasons": [reason]}
        assert retryable(fault, "c.mp4", lambda p: True), reason
        assert not retryable(fault, "c.mp4", lambda p: False), reason  # still unreadable: it would fail the same way
    decode = {"status": "ineligible", "reasons": ["quality: video: VideoDecodeError: c.mp4: cannot be opened as a "
                                                  "video (not a video file, or truncated/corrupt)"]}
    assert not retryable(decode, "c.mp4", lambda p: True)  # an unchanged undecodable clip stays final


@pytest.mark.parametrize("reason", ["permission", "io_error"])
def test_retry_ineligible_scores_a_clip_again_after_an_environment_fault(monkeypatch, tmp_path, reason):
    """A permission fault (chmod fixed it since) and an I/O error: the row says so, and the clip as it is now can be
    read, so a plain resume names it and --retry-ineligible scores it again."""
    batch = batch_of_one(monkeypatch, tmp_path)
    out, args = batch.out, batch.args
    [row] = _rows(out)
    # as a run that could not read the clip wrote it; its "clip" record is the clip as it is now
    fault = {"status": "ineligible", "reward": None, "T": None, "P": None, "V": None,
             "reasons": [{"permission": PERMISSION_FAULTS, "io_error": ENVIRONMENT_FAULTS}[reason][0]], "notes": []}
    out.write_text(json.dumps({**row, "result": {**row["result"], **fault}}) + "\n")
    res = runner.invoke(app, args)
    assert "--retry-ineligible scores it again" in res.output, res.output
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "1 ineligible row(s) removed" in res.output, res.output
    assert [r["result"]["status"] for r in _rows(out)] == ["scored"]


def test_a_clip_zeroed_for_one_frame_is_scored_again_once_it_changed(monkeypatch, tmp_path):
    """A clip of under 2 frames when scored (a renderer that had written one frame) gets reward 0 from the quality
    check (DESIGN §3), no model judging it; once the clip is whole its row stayed 0 for good, while a clip cut
    mid-write (a video fault) is scored again. A quality zero is retried the same way: by --retry-ineligible, once
    the clip differs from its row's "clip" record; unchanged, it stays."""
    from tests.graph_scripts import moving_square

    batch = one_frame_zero(monkeypatch, tmp_path)  # the renderer has written one frame
    clip, out, args = batch.clip, batch.out, batch.args
    res = runner.invoke(app, [*args, "--retry-ineligible"])  # the same one-frame clip: its zero stands
    assert res.exit_code == 0 and "0 to score" in res.output and "zero row" not in res.output, res.output
    moving_square(clip, seed=1)  # the renderer is done: 33 frames
    res = runner.invoke(app, args)
    assert "--retry-ineligible scores it again" in res.output, res.output  # a plain resume says so
    assert [r["result"]["status"] for r in _rows(out)] == ["zero"]
    res = runner.invoke(app, [*args, "--retry-ineligible"])
    assert res.exit_code == 0 and "1 zero row(s)" in res.output and "1 to score" in res.output, res.output
    assert [r["result"]["status"] for r in _rows(out)] == ["scored"]


def test_only_a_quality_zero_of_a_changed_clip_is_scored_again():
    from graph.batch_retry import rescorable

    quality = {"status": "zero", "reward": 0.0, "reasons": ["quality: only 1 frame(s)"]}
    judged = {"status": "zero", "reward": 0.0, "T": 0.0, "P": 0.5, "V": 0.5,
              "reasons": ["failure established: the block fell", "R1 not_met: it fell"]}
    assert rescorable(quality, "c.mp4", clip_changed=lambda p: True)
    assert not rescorable(quality, "c.mp4", clip_changed=lambda p: False)
    assert not rescorable(judged, "c.mp4", clip_changed=lambda p: True)  # a model's judgment stands
    assert not rescorable({"status": "scored", "reward": 0.4, "T": 0.4, "P": 0.4, "V": 0.4,
                           "reasons": ["R1 partial: half"]}, "c.mp4", clip_changed=lambda p: True)


def test_a_clip_it_may_not_read_is_said_to_be_unreadable_not_corrupt(monkeypatch, tmp_path):
    """A clip of mode 000 (the folder readable) failed in FFmpeg's open: "cannot be opened as a video (not a video
    file, or truncated/corrupt) (PermissionError: ...)", which sends a user to re-render a good clip. It reads as a
    folder without permission does: "cannot be read (PermissionError: ...)". (Tests run as root, who may read any
    file: FFmpeg's refusal is simulated.)"""
    import av
    import pytest

    from tests.graph_scripts import moving_square
    from tools.video import VideoNotFoundError, probe

    clip = moving_square(tmp_path / "c.mp4", seed=1)

    def denied(target, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 (av.open's signature)
        raise av.error.PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(av, "open", denied)
    with pytest.raises(VideoNotFoundError, match=r"cannot be read \(PermissionError: ") as err:
        probe(clip)
    assert "corrupt" not in str(err.value)


ENVIRONMENT_FAULTS = [  # as tools.video words them when the machine, not the clip, failed the read
    "quality: video: VideoDecodeError: c.mp4: cannot be opened as a video (not a video file, or truncated/corrupt) "
    "(OSError: [Errno 5] Input/output error: 'file:/data/c.mp4')",  # a network disk that dropped out
    "quality: video: VideoDecodeError: c.mp4: cannot be opened as a video (not a video file, or truncated/corrupt) "
    "(OSError: [Errno 24] Too many open files: 'file:/data/c.mp4')",
    "quality: video: VideoDecodeError: c.mp4: cannot be opened as a video (not a video file, or truncated/corrupt) "
    "(OSError: [Errno 23] Too many open files in system: 'file:/data/c.mp4')",
    "inspect: video: VideoDecodeError: c.mp4: frame 40 cannot be decoded (MemoryError: [Errno 12] Cannot allocate "
    "memory: 'file:/data/c.mp4')",
    "inspect: video: VideoDecodeError: c.mp4: frame 40 cannot be decoded (MemoryError: Unable to allocate 3.0 MiB)",
    "quality: video: VideoNotFoundError: c.mp4: cannot be read (OSError: [Errno 116] Stale file handle: '/data/c.mp4')",
]
BAD_BYTES = [  # the clip's own bytes: final while the clip is unchanged
    "quality: video: VideoDecodeError: c.mp4: cannot be opened as a video (not a video file, or truncated/corrupt) "
    "(InvalidDataError: [Errno 1094995529] Invalid data found when processing input: 'file:/data/c.mp4')",
    "inspect: video: VideoDecodeError: c.mp4: frame 40 cannot be decoded (EOFError: )",
    "quality: video: VideoDecodeError: c.mp4: cannot be opened as a video (ValueError: [Errno 22] Invalid argument)",
]


def test_an_environment_fault_is_retried_once_the_clip_can_be_read():
    """A read that failed for the machine (EIO, too many open files, out of memory, a stale NFS handle) says
    nothing of the clip's bytes: a rerun can score it, yet it was final as any video fault. It is retried while the
    clip can be read; a fault of the clip's bytes (invalid data, cut, bad argument) stays final."""
    from graph.batch_retry import retryable

    for reason in ENVIRONMENT_FAULTS:
        fault = {"status": "ineligible", "reasons": [reason]}
        assert retryable(fault, "c.mp4", lambda p: True), reason
        assert not retryable(fault, "c.mp4", lambda p: False), reason  # gone or unreadable: it would fail again
    for reason in BAD_BYTES:
        assert not retryable({"status": "ineligible", "reasons": [reason]}, "c.mp4", lambda p: True), reason


def test_a_read_the_machine_failed_is_not_called_a_corrupt_clip(monkeypatch, tmp_path):
    """FFmpeg's open failing with EIO, EMFILE, ENFILE or ENOMEM (or a MemoryError) read "cannot be opened as a video
    (not a video file, or truncated/corrupt)", sending a user to re-render a good clip. It reads "cannot be read
    (OSError: [Errno 5] ...)", and `environmental` still finds it (retried once the clip can be read)."""
    import errno

    import av
    import pytest

    from graph.batch_retry import retryable
    from tests.graph_scripts import moving_square
    from tools import video_errors
    from tools.video import VideoError, probe
    from tools.video_errors import environmental

    clip = moving_square(tmp_path / "c.mp4", seed=1)
    failures = [lambda t, n=n: av.error.err_check(-n, str(t)) for n in (errno.EIO, errno.EMFILE, errno.ENFILE, errno.ENOMEM)]
    failures.append(lambda t: (_ for _ in ()).throw(MemoryError("Unable to allocate 3.0 MiB")))
    monkeypatch.setattr(video_errors, "can_reserve", lambda size: False)  # FFmpeg's ENOMEM: the machine is short
    monkeypatch.setattr(video_errors, "reads_back", lambda src: False)  # FFmpeg's EIO: the disk fails Python's read too
    for fail in failures:
        monkeypatch.setattr(av, "open", lambda target, *a, _f=fail, **k: _f(target))
        with pytest.raises(VideoError, match=r"c\.mp4: cannot be read \((OSError|MemoryError): ") as err:
            probe(clip)
        message = str(err.value)
        assert "corrupt" not in message and "not a video" not in message, message
        assert environmental(message), message
        reason = f"quality: video: {type(err.value).__name__}: {message}"
        assert retryable({"status": "ineligible", "reasons": [reason]}, "c.mp4", lambda p: True), reason


def _oversized_sample(path) -> bytes:
    """A fragmented MP4 whose first ``trun`` box gives its first sample a size of 3 GB (a corrupt byte)."""
    import struct

    from tests.test_video import id_frames, write_raw

    data = bytearray(write_raw(path, id_frames(16), gop=8, options={"movflags": "frag_keyframe+empty_moov"}).read_bytes())
    at = data.index(b"trun") + 4  # the box's payload: version, flags, sample count, then optional fields
    flags = int.from_bytes(data[at + 1:at + 4], "big")
    assert flags & 0x200  # per-sample sizes
    first = at + 8 + 4 * bool(flags & 1) + 4 * bool(flags & 4) + 4 * bool(flags & 0x100)
    struct.pack_into(">I", data, first, 3 * 10**9)
    return bytes(data)


def test_ffmpeg_out_of_memory_on_a_corrupt_size_is_the_clips_fault(monkeypatch, tmp_path):
    """FFmpeg fails a 3 GB sample with ENOMEM (it allocates at most 2 GiB): that clip was called the machine's fault
    ("cannot be read (MemoryError: [Errno 12] ...)"), a 503 machine fault from the tool service and retried by every
    --retry-ineligible. While the machine can spare 2 GiB, it is the clip's (final); when it cannot, the machine's."""
    import av

    from tools import video_errors
    from tools.video import VideoDecodeError, VideoNotFoundError, probe
    from tools.video_errors import environmental

    clip = tmp_path / "bad.mp4"
    clip.write_bytes(_oversized_sample(tmp_path / "frag.mp4"))
    with pytest.raises(VideoDecodeError, match="corrupt sizes in the clip") as err:
        probe(clip)
    assert isinstance(err.value.__cause__, av.error.MemoryError)
    assert not video_errors.machine_failed(err.value.__cause__)  # the service's 422, not a 503
    assert not environmental(str(err.value))
    monkeypatch.setattr(video_errors, "can_reserve", lambda size: False)  # an address-space limit, strict overcommit
    with pytest.raises(VideoNotFoundError, match=r"cannot be read \(MemoryError: \[Errno 12\]") as err:
        probe(clip)
    assert environmental(str(err.value)) and video_errors.machine_failed(err.value.__cause__)


def test_ffmpeg_io_error_on_a_clip_that_reads_back_is_the_clips_fault(monkeypatch, tmp_path):
    """FFmpeg's Matroska demuxer gives EIO for an element that does not parse (an ID byte flipped), no read failing:
    that clip was called the machine's ("cannot be read (OSError: [Errno 5] ...)"), a 503 machine fault from the
    tool service and retried by every --retry-ineligible. A clip whose every byte reads back is the clip's fault."""
    import errno

    import av

    from tests.graph_scripts import moving_square
    from tools import video_errors
    from tools.video import VideoDecodeError, VideoNotFoundError, probe
    from tools.video_errors import environmental

    clip = moving_square(tmp_path / "c.mp4", seed=1)
    monkeypatch.setattr(av, "open", lambda target, *a, **k: av.error.err_check(-errno.EIO, str(target)))
    for src in (clip, clip.read_bytes()):
        with pytest.raises(VideoDecodeError, match="FFmpeg reported an input/output error, but every byte of the "
                           "file reads back: its data is corrupt") as err:
            probe(src)
        assert not environmental(str(err.value))
    monkeypatch.setattr(video_errors, "reads_back", lambda src: False)  # the disk fails Python's read as well
    with pytest.raises(VideoNotFoundError, match=r"cannot be read \(OSError: \[Errno 5\]") as err:
        probe(clip)
    assert environmental(str(err.value))
