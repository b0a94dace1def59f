"""Shared pytest set-up: headless MuJoCo, deterministic seeds, no network settings leaking in."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.harness_site.stand_ins import StandIns
from tests.launches import no_shm_op

# Every HTTP client the tests build with the default `verify` shares one TLS context (tests/ssl_reuse.py: the CA
# bundle loaded once, not 30-40 ms of CPU per client; ~40-60 s over the suite). Registered here, the top-level
# conftest, so that a serial run and each pytest-xdist worker (which loads this conftest) both use it.
pytest_plugins = ["tests.ssl_reuse"]

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
# No test may reach the Hugging Face hub: a model id that is not a local path fails at once instead of
# retrying DNS lookups for a minute.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# pytest-xdist starts its workers with COLUMNS=80 (a serial run has none): the rich consoles made at import
# (graph/commands.py, graph/trace_commands.py `_out`) then keep 80 columns and ignore the COLUMNS a test hands
# CliRunner (tests/test_cli_runs.py: 7 failures under `-n 2`, none serially). Workers drop it, as a serial run.
# A worker also starts with the PYTHONPATH set below in its parent, so tests/harness_site/sitecustomize.py ran in it
# and made `training.build_locks.launch_build_note` answer None, whose own tests run here
# (tests/test_shm_build_note.py: 6 failures under `-n 2`): its stand-ins go; this file's (the shm op) follow below.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    if "stand_ins" in sys.modules:  # (the harness site's own import of tests/harness_site/stand_ins.py)
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, sys.modules["stand_ins"].StandIns)]
# One thread for torch's CPU ops in the pytest process and every process it starts (as `harness_env` gives its
# launches), unless the caller chose: the tests' models are tiny, and two OpenMP threads per op only add
# synchronisation; on a loaded 2-core machine they spun (the tiny VAE's calibration, five decodes: ~11 s of CPU on
# two threads, ~0.4 s on one). Set before anything imports torch (it reads this at its first parallel op).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Every Python process a test starts (torchrun, its ranks, `python -m training.train`) runs
# tests/harness_site/sitecustomize.py: DeepSpeed builds no shared-memory op in the machine's extensions
# folder, and SIGUSR2 dumps the stacks (tests/launches.py: `harness_env`, `run_to_end`).
HARNESS_SITE = str(Path(__file__).resolve().parent / "harness_site")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [HARNESS_SITE, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != HARNESS_SITE]])
# Nor does the pytest process itself (tests that start a process group in-process: test_checkpoints.py's call of
# training.train.main built it, about a minute of every fresh clone's run). Not the build note: its tests run here.
if "deepspeed.comm.torch" in sys.modules:
    sys.modules["deepspeed.comm.torch"].build_shm_op = no_shm_op
else:
    sys.meta_path.insert(0, StandIns({"deepspeed.comm.torch": ("build_shm_op", no_shm_op)}))


@pytest.fixture(autouse=True)
def _seed_everything():
    random.seed(0)
    np.random.seed(0)
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _no_endpoint_env(monkeypatch):
    """Tests never reach a real model endpoint: clear the edge settings unless a test sets them."""
    for name in list(os.environ):
        if name.startswith(("RAA_", "OPENAI_")):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def followed_launchers(monkeypatch):
    """The launcher pids ``training.train.main`` follows when a test runs it in the pytest process as a launched
    rank (RANK and WORLD_SIZE set), recorded: `follow_launcher` is not run. Run, it followed pytest's parent (CI's
    shell, or whatever started pytest) as if it were torchrun: the kernel sent pytest SIGTERM whenever that
    parent (the thread of it that started pytest) ended, for the rest of the session, and a parent running
    DeepSpeed's per-node launcher module had a thread watch its own parent. Checks after the test that the
    pytest process was left without a parent-death signal."""
    import training.preemption
    from tests.launches import death_signal

    before = death_signal()
    calls: list[int] = []
    monkeypatch.setattr(training.preemption, "follow_launcher", lambda parent, **_k: calls.append(parent) or True)
    yield calls
    assert death_signal() == before, "training.train.main set a parent-death signal on the pytest process"


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """A 33-frame clip of a red square moving right (`graph_scripts.moving_square`), one per test module
    (modules that need another clip define their own `clip`)."""
    from graph_scripts import moving_square

    return moving_square(tmp_path_factory.mktemp("clips") / "square.mp4")


@pytest.fixture(scope="module")
def service_root(tmp_path_factory):
    """The tool-service tests' allowed root: an 18-frame clip, a junk file and an empty one (and a file
    just outside the root)."""
    from service_helpers import moving_clip

    from tools.video import write_video

    d = tmp_path_factory.mktemp("videos")
    write_video(d / "clip.mp4", moving_clip(18))
    (d / "junk.mp4").write_bytes(b"definitely not a video")
    (d / "empty.mp4").write_bytes(b"")
    (tmp_path_factory.getbasetemp() / "secret.mp4").write_bytes(b"outside")
    return d


@pytest.fixture(scope="module")
def service_scorer():
    """A tiny random V-JEPA 2 surprise scorer (`service_helpers.tiny_scorer`)."""
    from service_helpers import tiny_scorer

    return tiny_scorer()


@pytest.fixture
def read_sizes(monkeypatch):
    """The ``size`` of every `tools.video.VideoReader.read` call while the test runs (None: the clip's own), the
    reads themselves done as usual: a test checks that frames are decoded at the size they are sent."""
    from tools.video import VideoReader

    sizes: list = []
    real_read = VideoReader.read

    def read(self, indices, *, size=None):
        sizes.append(size)
        return real_read(self, indices, size=size)

    monkeypatch.setattr(VideoReader, "read", read)
    return sizes


@pytest.fixture
def one_rank_env(monkeypatch):
    """RANK / WORLD_SIZE / the port of a store this process serves, as torchrun sets them for train(), without
    DeepSpeed's shared-memory op build (tests/launches.py); the process group torn down after."""
    import importlib

    import torch.distributed as dist

    from tests.launches import destroy_process_group, no_shm_op, rendezvous_store

    monkeypatch.setattr(importlib.import_module("deepspeed.comm.torch"), "build_shm_op", no_shm_op)
    with rendezvous_store(1) as port:
        for key, value in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                               MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True").items():
            monkeypatch.setenv(key, value)
        yield
        if dist.is_initialized():  # a run that raised leaves it (training/train.py releases it)
            destroy_process_group()
