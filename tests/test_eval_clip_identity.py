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
