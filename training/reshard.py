"""Continue a run on another number of GPUs: convert a checkpoint to DeepSpeed's universal format.

A ZeRO checkpoint holds each rank's share of the optimizer state in its own file, and DeepSpeed cannot
re-partition it on load, nor load it in another precision, so ``--resume`` with another number of
processes or another ``dtype`` is refused. Converting the
checkpoint once makes it loadable on any number::

    python -m training.reshard --run runs/cosmos   # -> runs/cosmos/checkpoints/iter_000200_universal
    torchrun --nproc_per_node 4 -m training.train --config ... --output_dir runs/cosmos --resume

The conversion is DeepSpeed's own ``deepspeed.checkpoint.ds_to_universal`` (run as a subprocess): weights
and optimizer state (Adam moments, fp32 master weights) are merged per parameter. ``--resume`` then
loads ``iter_NNNNNN_universal`` whenever the checkpoint ``latest`` names was written by another number
of ranks or in another dtype (training/resume.py ``resume_source``); later checkpoints are ordinary ones
of the new size and dtype.

Decisions where the issue was silent:

* An explicit step, not done by ``--resume`` itself: converting a full fine-tune's checkpoint reads and
  writes tens of GB, which would sit inside the launch's collective timeouts on every other rank.
* Written under a temporary name and renamed into place when DeepSpeed is done, so a conversion cut
  short never looks finished; an existing conversion is kept unless ``--force``, which renames it aside
  before the new one moves in and deletes it last (``_swap_in``), so a failed delete never leaves a
  half-deleted conversion where ``--resume`` looks.
* The resumed run is the same model and optimizer, not the same trajectory: rollout noise is seeded by
  rank (``trainer.py``), so from the first resumed iteration the samples differ from what the old number
  of ranks would have drawn. Each rank's RNG state comes from the checkpoint where it had that rank, else
  rank 0's.
* ``keep_checkpoints`` deletes a conversion together with its checkpoint.
* A save killed part-way (no ``layout.json``, training/run_dir.py ``unfinished_save``) is refused, as the exporter
  refuses it: DeepSpeed's converter merged whatever shard files it found. So is a ``--tag`` that is no folder
  name (``..``, a path: an absolute one put the conversion outside the run).
* The shard files must be every rank's: with DeepSpeed's node-local checkpoint storage each node's folder holds
  only its own ranks' files, and the conversion is refused (``training.resume.incomplete_copy``, against the
  number of ranks ``layout.json`` records) until every node's files are copied into one folder.

Checked on CPU (float32): ZeRO-2 full fine-tune 2 -> 1 and 1 -> 2 ranks, ZeRO-2 LoRA and ZeRO-3 2 -> 1; a
resumed iteration at a learning rate below float32 resolution leaves the 2-rank run's weights exact
(tests/test_checkpoints.py). A float32 ZeRO-2 run resumes in bfloat16 through the conversion (tests/test_resume.py);
ZeRO-3 float32 -> bfloat16 and ZeRO-2 bfloat16 -> float32 were checked by hand. bf16 runs on GPUs are not
verified.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from training.engine import UNIVERSAL_SUFFIX, checkpoint_ranks, latest_tag, plain_tag
from training.resume import incomplete_copy
from training.run_dir import unfinished_save


class ReshardError(RuntimeError):
    """The checkpoint cannot be converted (missing, or DeepSpeed's converter failed)."""


def reshard(ckpt_dir: Path, tag: str | None = None, *, force: bool = False, workers: int = 2) -> Path:
    """Convert ``ckpt_dir/tag`` (default: the one ``latest`` names) to ``ckpt_dir/<tag>_universal`` and
    return that folder."""
    if tag is None:
        tag = latest_tag(ckpt_dir)
        if tag is None:
            raise ReshardError(f"no checkpoint in {ckpt_dir} (no 'latest' file)")
    if not plain_tag(tag):  # "/abs" would replace ckpt_dir in the join: a conversion outside the run
        raise ReshardError(f"{tag!r} is not a checkpoint tag (a folder name in {ckpt_dir}, e.g. iter_000010)")
    if problem := unfinished_save(ckpt_dir, tag):  # no layout.json: its files may be cut short
        raise ReshardError(problem)
    source = ckpt_dir / tag
    if not source.is_dir() or checkpoint_ranks(source) == 0:
        raise ReshardError(f"{source} is not a ZeRO checkpoint (no *zero_pp_rank_*_optim_states.pt files)")
    if problem := incomplete_copy(source):  # one node's share of a node-local checkpoint (module docstring)
        raise ReshardError(problem)
    target = ckpt_dir / (tag + UNIVERSAL_SUFFIX)
    if (target / "zero").is_dir() and not force:
        return target
    partial = ckpt_dir / (target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", str(source),
           "--output_folder", str(partial), "--inject_missing_state", "--num_extract_workers", str(workers),
           "--num_merge_workers", str(max(1, workers // 2))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (ckpt_dir / "latest_universal").unlink(missing_ok=True)  # the converter's own pointer; resume never reads it
    if proc.returncode != 0 or not (partial / "zero").is_dir():
        shutil.rmtree(partial, ignore_errors=True)
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise ReshardError(f"DeepSpeed's ds_to_universal failed on {source} (exit {proc.returncode}): "
                           + " | ".join(tail))
    _swap_in(partial, target)
    return target


def _swap_in(partial: Path, target: Path) -> None:
    """Put the finished conversion ``partial`` at ``target``, replacing what is there, so that no failure
    leaves a folder at ``target`` that looks complete (holds ``zero/``) but is not: the old conversion is
    renamed aside first (atomic), the new one renamed in, and only then is the aside copy deleted (under a
    hidden name neither ``--resume`` nor ``keep_checkpoints`` reads, so a half-failed delete is only litter).
    If the new one cannot be moved in, the old one is moved back and ReshardError raised; if that fails too, both
    are kept where they are and the ReshardError names them (`_stranded`)."""
    aside = target.with_name(f".{target.name}.replaced")
    shutil.rmtree(aside, ignore_errors=True)  # litter of an earlier --force
    try:
        if target.exists():
            target.rename(aside)
        partial.rename(target)
    except OSError as exc:
        if aside.exists() and not target.exists():
            try:
                aside.rename(target)
            except OSError as restore:
                raise ReshardError(_stranded(partial, target, aside, exc, restore)) from restore
        shutil.rmtree(partial, ignore_errors=True)
        raise ReshardError(f"could not move the new conversion into {target}: {exc}") from exc
    shutil.rmtree(aside, ignore_errors=True)


def _stranded(partial: Path, target: Path, aside: Path, move: OSError, restore: OSError) -> str:
    """What a failed move-in followed by a failed move-back leaves, and how to finish by hand (both kept)."""
    return (f"could not move the new conversion {partial} into {target} ({move}), nor move the old one back from "
            f"{aside} ({restore}): there is no conversion at {target} now, so --resume on another number of ranks "
            f"or dtype finds none for this checkpoint (the checkpoint itself is untouched). Both conversions are "
            f"whole: the old one at {aside}, the new one at {partial}; rename either to {target} by hand, or run "
            "reshard again once the file system is writable (it discards both and converts afresh)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.reshard", description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, type=Path, help="The run's output_dir (holds checkpoints/).")
    parser.add_argument("--tag", default=None, help="Checkpoint to convert (default: the latest).")
    parser.add_argument("--force", action="store_true", help="Convert again even if a conversion exists.")
    parser.add_argument("--workers", type=int, default=2, help="Processes extracting ZeRO shards (default 2).")
    args = parser.parse_args(argv)
    try:
        target = reshard(args.run / "checkpoints", args.tag, force=args.force, workers=max(1, args.workers))
    except ReshardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"universal checkpoint: {target}\nresume it with any number of processes: "
          f"... -m training.train --config CONFIG --output_dir {args.run} --resume")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
