"""training/launches.py: the per-launch record of which code ran a training run."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta, timezone

import pytest

from training.launches import (
    LAUNCHES,
    git_state,
    launch_record,
    package_versions,
    read_launches,
    record_launch,
)


def _git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    folder = tmp_path / "code"
    folder.mkdir()
    _git(folder, "init", "-q")
    (folder / "a.py").write_text("x = 1\n")
    _git(folder, "add", "a.py")
    _git(folder, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    return folder


def test_git_state_names_the_commit_and_only_tracked_changes_make_it_dirty(repo, tmp_path):
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert git_state(repo) == {"commit": head, "dirty": False}
    (repo / "notes.txt").write_text("untracked\n")  # run folders, notes: not a code change
    assert git_state(repo) == {"commit": head, "dirty": False}
    (repo / "a.py").write_text("x = 2\n")
    assert git_state(repo) == {"commit": head, "dirty": True}
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_state(plain) is None  # an installed wheel: not a checkout


def test_an_installed_copy_inside_an_ignored_folder_of_a_checkout_names_no_commit(repo):
    """A non-editable install into a venv inside the checkout (``.venv/lib/.../site-packages/training``): git
    answered with the enclosing checkout's HEAD and dirtiness, which say nothing about the installed copy (the
    checkout may have moved on since ``pip install .``)."""
    (repo / ".gitignore").write_text(".venv/\n")
    _git(repo, "add", ".gitignore")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "ignore the venv")
    installed = repo / ".venv" / "lib" / "site-packages" / "training"
    installed.mkdir(parents=True)
    (installed / "a.py").write_text("x = 0\n")  # an older copy of the code
    assert git_state(installed) is None
    assert git_state(repo) is not None  # the checkout itself still names its commit


def test_git_state_is_none_without_git(repo, monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert git_state(repo) is None


def test_launch_record_fields(repo):
    when = datetime(2026, 12, 2, 23, 0, 5, tzinfo=timezone(timedelta(hours=1)))
    record = launch_record(start_iteration=10, resume=True, world_size=2, argv=["train.py", "--resume"], now=when,
                           code_folder=repo)
    assert record["time"] == "2026-12-02T22:00:05+00:00"  # UTC
    assert (record["start_iteration"], record["resume"], record["world_size"]) == (10, True, 2)
    assert record["argv"] == ["train.py", "--resume"]
    assert record["git"]["dirty"] is False and len(record["git"]["commit"]) == 40
    assert record["packages"]["torch"] and record["packages"]["numpy"]
    json.dumps(record, allow_nan=False)


def test_package_versions_say_null_for_a_missing_distribution():
    got = package_versions(("numpy", "no-such-distribution-raa"))
    assert got["numpy"] and got["no-such-distribution-raa"] is None


def test_a_fresh_launch_starts_the_file_and_a_resume_appends(tmp_path):
    out = tmp_path / "run"
    now = datetime(2026, 12, 2, tzinfo=UTC)
    for start, resume in ((0, False), (10, True), (20, True)):
        record_launch(out, launch_record(start_iteration=start, resume=resume, world_size=1, argv=[], now=now),
                      resume=resume)
    assert [r["start_iteration"] for r in read_launches(out)] == [0, 10, 20]
    record_launch(out, launch_record(start_iteration=0, resume=False, world_size=1, argv=[], now=now), resume=False)
    assert [r["start_iteration"] for r in read_launches(out)] == [0]  # an overwrite starts the run's history anew
    with (out / LAUNCHES).open("a") as f:
        f.write("{not json\n")
    assert len(read_launches(out)) == 1
