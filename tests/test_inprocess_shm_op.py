"""The pytest process builds no DeepSpeed shared-memory op: a test that starts a process group in-process
(`training.train.main` in test_checkpoints.py) JIT-built it in the machine's extensions folder, about a minute of
`make test` in every fresh clone (the build names the venv's absolute path, so each clone rebuilds)."""

from __future__ import annotations

import importlib


def test_deepspeeds_shm_op_build_is_a_stand_in_in_the_test_process():
    module = importlib.import_module("deepspeed.comm.torch")
    assert module.build_shm_op.__module__ != module.__name__, module.build_shm_op
    assert module.build_shm_op() is None
