"""What a fresh launch (no ``--resume``) does with an ``output_dir`` that already holds a run.

A fresh run used to write into such a folder as if it were empty: it restarted the logs but left the
earlier run's checkpoints beside its own. With ``keep_checkpoints`` the pruning then kept the earlier
run's higher-numbered checkpoints and deleted the new run's, and a later ``--resume`` that needed a
universal conversion could load the earlier run's conversion of the same tag.

Decisions where the issues were silent (the behaviour of ``transformers.Trainer``'s
``overwrite_output_dir`` in its first years, which researchers know):

- A fresh launch into a folder whose ``checkpoints/`` holds a checkpoint (an ``iter_NNNNNN`` folder or a
  ``latest`` file) is refused before any model loads (ConfigError, exit 2), naming the latest one and
  the two ways on: ``--resume`` to continue it, ``--overwrite_output_dir`` to start over. The entry
  point checks it in seconds, before DeepSpeed starts (`check_output_dir`; ``--check`` reports the
  same), and the trainer decides again with rank 0's view (`prepare_output_dir`). A folder with logs but no checkpoint (a run that stopped before its first save) is
  simply reused: there is nothing to continue.
- ``overwrite_output_dir: true`` deletes the earlier run's outputs that a fresh run would otherwise mix
  with its own: ``checkpoints/``, ``final/``, ``rollout_videos/``, ``eval_videos/`` and ``tensorboard/``
  (the jsonl logs are restarted as before; other files in the folder are left alone). Each node's local
  rank 0 deletes its copy (node-local or shared storage), and every rank waits for that.
- Rank 0's view decides for every rank, so ranks never disagree about refusing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from training.collectives import as_rank0_sees
from training.config import ConfigError, TrainConfig

EARLIER_OUTPUTS = ("checkpoints", "final", "rollout_videos", "eval_videos", "tensorboard")
"""The folders of ``output_dir`` that ``overwrite_output_dir`` deletes before a fresh run starts."""


def checkpoint_tags(ckpt_dir: Path) -> list[str]:
    """The ``iter_NNNNNN`` checkpoint folders in ``ckpt_dir``, oldest first; [] without the folder."""
    if not ckpt_dir.is_dir():
        return []
    return sorted((p.name for p in ckpt_dir.iterdir() if p.is_dir() and p.name.startswith("iter_")
                   and p.name[5:].isdigit()), key=lambda t: int(t[5:]))


def earlier_checkpoints(out_dir: Path) -> list[str]:
    """The checkpoint tags in ``out_dir/checkpoints`` (``checkpoint_tags``), plus what its ``latest`` file
    names when that folder is gone; [] for none."""
    ckpt_dir = out_dir / "checkpoints"
    tags = checkpoint_tags(ckpt_dir)
    latest = ckpt_dir / "latest"
    if latest.is_file():
        named = latest.read_text().strip()
        if named and named not in tags:
            tags.append(named)
    return tags


def refusal(cfg: TrainConfig, tags: list[str]) -> str | None:
    """Why a launch of ``cfg`` cannot start in its output_dir holding the checkpoints ``tags``; None when
    it can (a resume, an explicit overwrite, or no earlier checkpoint)."""
    if cfg.resume or cfg.overwrite_output_dir or not tags:
        return None
    count = f"{len(tags)} checkpoint{'s' if len(tags) != 1 else ''}"
    return (f"output_dir {cfg.output_dir} already holds an earlier run's checkpoints ({count}, the latest "
            f"{tags[-1]}); continue that run with --resume, start over in it with --overwrite_output_dir "
            "(deletes its checkpoints/, final/, rollout_videos/, eval_videos/ and tensorboard/), or set "
            "another output_dir")


def output_dir_problem(cfg: TrainConfig) -> str | None:
    """`refusal` of ``cfg`` for the checkpoints its output_dir holds now."""
    return refusal(cfg, earlier_checkpoints(Path(cfg.output_dir)))


def check_output_dir(cfg: TrainConfig) -> None:
    """ConfigError when a fresh launch of ``cfg`` would start in a folder holding an earlier run's
    checkpoints without ``overwrite_output_dir`` (the entry point, ``--check``; one process)."""
    if problem := output_dir_problem(cfg):
        raise ConfigError(problem)


def clear_earlier_run(out_dir: Path) -> list[str]:
    """Delete the ``EARLIER_OUTPUTS`` folders of ``out_dir`` that exist; returns their names."""
    removed = []
    for name in EARLIER_OUTPUTS:
        path = out_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)  # another node may delete a shared folder at the same time
            removed.append(name)
    return removed


def prepare_output_dir(cfg: TrainConfig, local_rank: int) -> list[str]:
    """Before a launch writes anything (collective: every rank calls it): ConfigError as `refusal` says,
    on every rank; with ``overwrite_output_dir`` and no ``--resume``, each node's local rank 0 deletes the
    earlier run's outputs (`clear_earlier_run`, names returned there) while the other ranks wait."""
    import torch.distributed as dist

    if cfg.resume:
        return []
    if problem := as_rank0_sees(lambda: output_dir_problem(cfg)):
        raise ConfigError(problem)
    removed = clear_earlier_run(Path(cfg.output_dir)) if cfg.overwrite_output_dir and local_rank == 0 else []
    if dist.is_initialized():
        dist.barrier()
    return removed
