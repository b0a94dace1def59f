"""The score-batch output lock (`graph.batch_output.lock_output`) is taken on the file the rows go to."""

from __future__ import annotations

import pytest


def test_a_symlink_and_its_target_are_one_output(tmp_path):
    """Two batches writing one file through two names (a symlink and the file) both scored every item and wrote
    each row twice: the lock sat beside each name, not beside the file."""
    from graph.batch_output import OutputBusy, lock_output

    target = tmp_path / "scratch" / "results.jsonl"
    target.parent.mkdir()
    link = tmp_path / "results.jsonl"
    link.symlink_to(target)
    held = lock_output(target)
    try:
        with pytest.raises(OutputBusy, match="another score-batch is writing"):
            lock_output(link)
    finally:
        held.close()
    lock_output(link).close()  # released: the link's batch goes ahead


def test_a_dangling_symlink_locks_beside_the_file_it_will_create(tmp_path):
    """A link to a file not written yet (the first run of a batch into a scratch folder) locks that file."""
    from graph.batch_output import OutputBusy, lock_output

    target = tmp_path / "scratch" / "results.jsonl"
    link = tmp_path / "results.jsonl"
    link.symlink_to(target)
    held = lock_output(link)
    try:
        target.parent.mkdir(exist_ok=True)
        with pytest.raises(OutputBusy):
            lock_output(target)
    finally:
        held.close()
