"""`raa eval reward` resumed by the clip file's stat identity (mtime, ctime, size, inode): a `chmod`, a `touch`
or a copy of the clip folder re-scored every clip under every preset. Rows now record the content (size and
SHA-256): metadata changes keep them, content changes re-score them; rows of the older form still resume."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

from evals.reliability import run_reward_eval
from tests.test_eval_reliability import FakeScorer, _clips, _judge


def _rendered(tmp_path: Path):
    clips = _clips(tmp_path)[:3]
    for i, c in enumerate(clips):
        Path(c.path).write_bytes(b"clip %d " % i * 1000)
    return clips


def _run(clips, out, scorer, presets=("full",)):
    return asyncio.run(run_reward_eval(clips, list(presets), out, scorer, _judge()))


def test_chmod_touch_and_copy_keep_the_rows_and_new_content_rescores(tmp_path):
    clips, scorer, out = _rendered(tmp_path), FakeScorer(), tmp_path / "ev"
    _run(clips, out, scorer)
    assert len(scorer.calls) == 1
    for c in clips:
        os.chmod(c.path, 0o600)
        os.utime(c.path, ns=(1_000_000_000, 2_000_000_000))  # touch: other times
        shutil.copy(c.path, c.path + ".copy")  # the folder copied back in place: another inode and ctime
        os.replace(c.path + ".copy", c.path)
    again = _run(clips, out, scorer)
    assert len(scorer.calls) == 1 and again.scored == 0  # nothing re-scored
    Path(clips[1].path).write_bytes(b"rendered anew")  # new content at the same name
    again = _run(clips, out, scorer)
    assert scorer.calls[-1] == ("full", ["c2"]) and again.scored == 1


def test_rows_of_the_older_stat_identity_resume_then_upgrade_or_rescore_once(tmp_path):
    from evals.eval_views import reward_notes
    from graph.frame_keys import file_version

    clips, scorer, out = _rendered(tmp_path), FakeScorer(), tmp_path / "ev"
    _run(clips, out, scorer)
    results = out / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    for r in rows:  # as the previous version wrote them
        r["clip_version"] = list(file_version(r["path"])[1])
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = _run(clips, out, scorer)  # stat identity unchanged: kept, and rewritten in the content form
    assert len(scorer.calls) == 1 and again.legacy_rescored == 0
    assert all(set(json.loads(line)["clip_version"]) == {"size", "sha256"} for line in results.read_text().splitlines())
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))  # the old form again
    os.utime(clips[0].path, ns=(1_000_000_000, 2_000_000_000))  # touched since: the old form cannot tell
    again = _run(clips, out, scorer)
    assert scorer.calls[-1] == ("full", ["c1"]) and again.legacy_rescored == 1
    assert any(n.startswith("1 row recorded the clip's file identity in the older form") for n in reward_notes(again))
    os.chmod(clips[0].path, 0o600)
    assert _run(clips, out, scorer).scored == 0 and len(scorer.calls) == 2  # once only


def test_each_clip_is_hashed_once_per_run_for_every_preset(tmp_path, monkeypatch):
    from evals import clip_identity

    hashed = []
    real = clip_identity.content_identity
    monkeypatch.setattr(clip_identity, "content_identity", lambda path: hashed.append(path) or real(path))
    clips = _rendered(tmp_path)
    _run(clips, tmp_path / "ev", FakeScorer(), presets=("full", "direct"))
    assert sorted(hashed) == sorted(c.path for c in clips)


def _same_size_and_mtime_rewrite(path: str, content: bytes) -> None:
    """Writes `content` (as long as the file) at `path` and puts the old mtime back (os.utime)."""
    st = os.stat(path)
    assert len(content) == st.st_size
    Path(path).write_bytes(content)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns


def test_a_clip_rewritten_with_the_same_size_and_mtime_is_hashed_again(tmp_path):
    """`ClipIdentities` kept a clip's identity per (path, size, mtime_ns): a clip rewritten during a run with
    its old size and mtime (os.utime) kept the old content's identity, so its row recorded what it was not
    scored from. Its key is now the whole stat identity (the ctime a rewrite cannot set back)."""
    from evals.clip_identity import ClipIdentities, content_identity

    path = str(tmp_path / "clip.mp4")
    Path(path).write_bytes(b"a" * 4096)
    identities = ClipIdentities()
    first = identities(path)
    _same_size_and_mtime_rewrite(path, b"b" * 4096)
    assert identities(path) == content_identity(path) != first
    assert identities(path) is identities(path)  # unchanged since: not hashed again


def test_frame_and_judge_caches_miss_a_clip_rewritten_with_the_same_size_and_mtime(tmp_path):
    """The frame cache and the judge's frame sampler stay keyed by stat identity (decision in
    `evals.clip_identity`): it holds the ctime a rewrite cannot put back, so they never serve the old frames."""
    import numpy as np

    from evals.judge import FrameSampler
    from graph.frame_store import FrameStore
    from tools.video import write_video

    path = str(tmp_path / "clip.mp4")
    write_video(path, np.full((8, 32, 48, 3), 200, np.uint8), fps=8.0)
    write_video(str(tmp_path / "dark.mp4"), np.full((8, 32, 48, 3), 40, np.uint8), fps=8.0)
    store, sampler = FrameStore(), FrameSampler(max_frames=2)
    bright = sampler.blocks(path)
    assert int(store.frames(path, [0]).mean()) in range(195, 206) and sampler.blocks(path) is bright
    _same_size_and_mtime_rewrite(path, (tmp_path / "dark.mp4").read_bytes())
    assert int(store.frames(path, [0]).mean()) in range(35, 46)
    assert sampler.blocks(path) != bright
