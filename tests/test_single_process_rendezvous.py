"""A plain run without a launcher (training/train.py `_single_process_env`) meets at a store it holds: the
port it hands the process group is bound by this process from the start, so no other process can take it
between the pick and the process group's start (EADDRINUSE at start when several runs started at once)."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.launches import destroy_process_group

KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE")


@contextmanager
def launcher_settings_restored() -> Iterator[None]:
    """The block runs without `KEYS` in this process's environment, which has them back as they were after it.
    ``monkeypatch.delenv`` of an unset key records nothing to restore: the settings `_single_process_env` wrote
    (RANK=0, WORLD_SIZE=1, the port of a store gone with the test, TORCHELASTIC_USE_AGENT_STORE=True) stayed in
    pytest's environment for every later test and the launches they started."""
    saved = {key: os.environ.pop(key) for key in KEYS if key in os.environ}
    try:
        yield
    finally:
        for key in KEYS:
            os.environ.pop(key, None)
        os.environ.update(saved)


@pytest.fixture
def no_launcher(monkeypatch):
    with launcher_settings_restored():
        yield monkeypatch
        import torch.distributed as dist

        if dist.is_initialized():
            destroy_process_group()


def test_the_settings_of_a_plain_run_do_not_outlive_the_test(monkeypatch):
    from training import train

    monkeypatch.setattr(train, "_RENDEZVOUS", None)
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")  # set before: given back as it was
    with launcher_settings_restored():
        train._single_process_env()
        assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True" and "MASTER_ADDR" in os.environ
    assert [key for key in KEYS if key in os.environ] == ["MASTER_ADDR"] and os.environ["MASTER_ADDR"] == "10.0.0.1"


def _bind_error(port: int) -> int | None:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno
    return None


def test_a_plain_run_holds_its_rendezvous_port_until_the_process_group_starts(no_launcher):
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
    from training import train

    no_launcher.setattr(train, "_RENDEZVOUS", None, raising=False)  # the old code had none
    for key, value in dict(RANK="1", WORLD_SIZE="2", MASTER_PORT="29512").items():
        no_launcher.setenv(key, value)
    train._single_process_env()
    assert (os.environ["MASTER_PORT"], train._RENDEZVOUS) == ("29512", None)  # no store of its own
    assert "TORCHELASTIC_USE_AGENT_STORE" not in os.environ
