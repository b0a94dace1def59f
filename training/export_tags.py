"""The checkpoint tag ``python -m training.export --tag`` names (training/export.py ``main``): a tag as saved
(``iter_000010``), ``best`` (the best held-out checkpoint, training/best.py) or ``latest`` (the checkpoint the
run's DeepSpeed ``latest`` file names, what ``--resume`` would load).

Decisions where the issue was silent: ``latest`` is the file DeepSpeed writes beside the checkpoint folders, so
``--tag latest`` used to be read as a folder of that name ("no checkpoint 'latest' in ...; saved: iter_000004"
while the file named iter_000004). Both aliases resolve to the tag they name, which then names the default
output (``export-iter_000004``, as ``best`` always did), so two exports of one checkpoint share a folder and an
export's name says which checkpoint it holds even after ``latest`` moved on.
"""

from __future__ import annotations

import sys
from pathlib import Path

from training.best import best_checkpoint, no_best_reason, passed_over
from training.engine import latest_tag
from training.export import ExportError
from training.metrics_log import EVAL_LOG
from training.run_dir import checkpoint_tags

ALIASES = ("best", "latest")


def resolve_tag(run: Path, tag: str | None) -> str | None:
    """The saved tag ``tag`` stands for in the run folder ``run`` (``tag`` itself unless an alias; None stays None:
    the exporter's default, the latest into ``final/``); ExportError when the alias names nothing. What ``best``
    passed over is noted on stderr, the choice on stdout."""
    ckpt_dir, eval_path = run / "checkpoints", run / EVAL_LOG
    if tag == "best":
        found = best_checkpoint(ckpt_dir, eval_path)
        if found is None:
            raise ExportError(no_best_reason(ckpt_dir, eval_path))
        print(f"best held-out checkpoint: {found[0]} (eval_reward_mean {found[2]:.4f})")
        for note in passed_over(ckpt_dir, eval_path, found):  # left aside, named
            print(f"note: {note}", file=sys.stderr)
        return found[0]
    if tag == "latest":
        named = latest_tag(ckpt_dir) if ckpt_dir.is_dir() else None
        if not named:
            saved = checkpoint_tags(ckpt_dir) if ckpt_dir.is_dir() else []
            raise ExportError(f"--tag latest: {ckpt_dir} has no 'latest' file (or an empty one) naming a checkpoint; "
                              f"pass a tag (saved: {', '.join(saved[-8:]) or 'none'})")
        print(f"latest checkpoint: {named}")
        return named
    return tag
