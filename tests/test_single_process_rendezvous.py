"""A plain run without a launcher (training/train.py `_single_process_env`) meets at a store it holds: the
port it hands the process group is bound by this process from the start, so no other process can take it
between the pick and the process group's start (EADDRINUSE at start when several runs started at once)."""

from __future__ import annotations

import errno
import socket

import pytest

KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE")


@pytest.fixture
def no_launcher(monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    yield monkeypatch
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def _bind_error(port: int) -> int | None:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno
    return None


def test_a_plain_run_holds_its_rendezvous_port_until_the_process_group_starts(no_launcher):
    import os
    from datetime import timedelta

    import torch.distributed as dist

    from training import train

    no_launcher.setattr(train, "_RENDEZVOUS", None, raising=False)  # the old code had none
    train._single_process_env()
    port = int(os.environ["MASTER_PORT"])
    assert _bind_error(port) == errno.EADDRINUSE  # held: another process cannot take it meanwhile
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))  # env://, as deepspeed.init_distributed
    assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
    assert _bind_error(port) == errno.EADDRINUSE  # still the run's while it runs


def test_a_launched_rank_keeps_the_launchers_port(no_launcher):
    import os

    from training import train

    no_launcher.setattr(train, "_RENDEZVOUS", None, raising=False)  # the old code had none
    for key, value in dict(RANK="1", WORLD_SIZE="2", MASTER_PORT="29512").items():
        no_launcher.setenv(key, value)
    train._single_process_env()
    assert (os.environ["MASTER_PORT"], train._RENDEZVOUS) == ("29512", None)  # no store of its own
    assert "TORCHELASTIC_USE_AGENT_STORE" not in os.environ
