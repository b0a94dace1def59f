"""training/collectives.py: what rank 0 reads, on every rank, also when the read raises."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.launches import spawn_ranks
from training.collectives import Rank0ReadError, _sendable, as_rank0_sees


class _Odd(Exception):
    def __init__(self, path: str, line: int) -> None:  # pickling calls _Odd("text") again: TypeError
        super().__init__(f"{path}:{line} unreadable")


def test_an_exception_that_does_not_survive_pickling_is_sent_by_name():
    assert isinstance(_sendable(OSError(5, "eval.jsonl")), OSError)
    sent = _sendable(_Odd("eval.jsonl", 3))
    assert isinstance(sent, Rank0ReadError) and str(sent) == "rank 0: _Odd: eval.jsonl:3 unreadable"


def test_without_torch_distributed_the_read_is_the_answer():
    assert as_rank0_sees(lambda: 7) == 7


def _worker(rank: int, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=20))  # env://: the harness's store

    def read() -> int:
        raise OSError("eval.jsonl unreadable")

    try:
        first = f"returned {as_rank0_sees(read)!r}"
    except Exception as exc:  # every rank must get here
        first = f"{type(exc).__name__}: {exc}"
    second = as_rank0_sees(lambda: 7)  # the ranks are still in step
    Path(out, f"rank{rank}.txt").write_text(f"{first}\n{second}\n")
    dist.barrier()
    dist.destroy_process_group()
    Path(out, f"rank{rank}.done").write_text("ok")


@pytest.mark.distributed
@pytest.mark.slow
def test_a_read_that_raises_on_rank_0_raises_on_every_rank(tmp_path):
    """Rank 0 raised alone: rank 1 waited in the broadcast and took the value of rank 0's next one (7) as its
    answer, after which the two ranks were out of step."""
    spawn_ranks(_worker, (str(tmp_path),), tmp_path, deadline_s=120)  # the old behaviour: a rank timed out
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.txt").read_text() == "OSError: eval.jsonl unreadable\n7\n"
