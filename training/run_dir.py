"""What a fresh launch (no ``--resume``) does with an ``output_dir`` that already holds a run.

A fresh run used to write into such a folder as if it were empty: it restarted the logs but left the
earlier run's checkpoints beside its own. With ``keep_checkpoints`` the pruning then kept the earlier
run's higher-numbered checkpoints and deleted the new run's, and a later ``--resume`` that needed a
universal conversion could load the earlier run's conversion of the same tag.

Decisions where the issues were silent (the behaviour of ``transformers.Trainer``'s
``overwrite_output_dir`` in its first years, which researchers know):

- A fresh launch into a folder whose ``checkpoints/`` holds a checkpoint (the folder its ``latest`` file
  names, or an ``iter_NNNNNN`` folder with ``layout.json``) is refused before any model loads
  (ConfigError, exit 2), naming the latest one and the two ways on: ``--resume`` to continue it,
  ``--overwrite_output_dir`` to start over. The entry point checks it in seconds, before DeepSpeed starts
  (`check_output_dir`; ``--check`` reports the same), and the trainer decides again with rank 0's view
  (`prepare_output_dir`). An ``iter_NNNNNN`` folder with neither is a first save killed part-way: it
  counted as a checkpoint, so the launch was refused while ``--resume`` found no ``latest``, each message
  recommending the other; it no longer counts.
- A folder without a checkpoint but with ``final/`` or a ``metrics.jsonl`` with rows (a finished run whose
  ``checkpoints/`` was deleted to save space, or one that stopped before its first save) is refused
  the same way, with ``--overwrite_output_dir`` as the way on: reusing it deleted the earlier run's
  eval.jsonl and other logs, replaced its metrics.jsonl and left its ``final/`` beside the new run's.
  Other files (a config, notes) do not count. A metrics.jsonl that cannot be read or is not UTF-8 text refuses
  the launch too, naming the file and why (`metrics_rows`): it counted as no rows, and the launch replaced it.
- ``overwrite_output_dir: true`` deletes the earlier run's outputs that a fresh run would otherwise mix
  with its own: ``checkpoints/``, ``final/``, ``rollout_videos/``, ``eval_videos/`` and ``tensorboard/``
  and every ``export-TAG/`` folder ``python -m training.export --run DIR --tag TAG`` wrote there (one holding
  ``export.json``: an earlier run's exports were left beside the new run's, under the same names its own
  exports of those tags would take); the jsonl logs are restarted as before; other files in the folder,
  an ``export-*`` folder without ``export.json`` included, are left alone. Each node's local
  rank 0 deletes its copy (node-local or shared storage), and every rank waits for that.
- A log the run writes (`training.metrics_log.LOG_FILES`, ``launches.jsonl``) that is a folder, a FIFO or another
  file that is not a regular one refuses every launch, ``--resume`` and ``--overwrite_output_dir`` included, naming
  it (`log_file_problem`): those two do not read the logs, so a folder named metrics.jsonl passed the checks and the
  launch ended in an IsADirectoryError traceback when it restarted or appended to the log (and a FIFO blocked the
  fresh launch's count of its rows). Overwriting does not delete it: it deletes the earlier run's output folders
  by name, and a folder in a log's place is no output of a run and may hold anything.
- A log linked to ``/dev/null`` (a user discarding metrics) is refused the same way, by every launch, its message naming
  the link's target and why: decided so rather than accepted, since the run reads its logs back (``--resume`` trims
  and continues them, eval.jsonl picks the best checkpoint ``keep_checkpoints`` keeps, a metrics.jsonl with rows marks
  a finished run's folder, training.report draws them), and a device answers each as if the run had logged nothing
  (a second fresh launch into the folder was not refused). Before this check, ``--resume`` wrote into the device
  while a fresh launch deleted the link (`training.metrics_log.MetricsLog` restarts its logs) and wrote a file: the
  two disagreed. To keep a run's logs out of the way, set its output_dir where they may go.
- Rank 0's view decides for every rank, so ranks never disagree about refusing.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

from tools.file_kinds import file_kind
from tools.jsonl import NotUtf8Error, json_text, read_text, text_lines
from training.collectives import as_rank0_sees
from training.config import ConfigError, TrainConfig
from training.launches import LAUNCHES
from training.metrics_log import EVAL_LOG, LOG_FILES, METRICS_LOG

LAYOUT_FILE = "layout.json"
"""``checkpoints/iter_NNNNNN/layout.json``: the layout (`training.resume.StateLayout`) of the launch that wrote
it, written last, so it also marks a finished save."""
UNIVERSAL_SUFFIX = "_universal"
"""``checkpoints/iter_NNNNNN_universal``: that checkpoint in DeepSpeed's universal format (training/reshard.py)."""
EARLIER_OUTPUTS = ("checkpoints", "final", "rollout_videos", "eval_videos", "tensorboard")
"""The folders of ``output_dir`` that ``overwrite_output_dir`` deletes before a fresh run starts (and the
exports `tag_exports` finds)."""
TAG_EXPORT_PREFIX = "export-"
"""``python -m training.export --tag TAG`` writes ``RUN/export-TAG`` by default (training/export.py)."""
EXPORT_FILE = "export.json"
"""What marks a folder as a policy export (``training.export_folder.EXPORT_FILE``; not imported: that module loads torch)."""


def enclosing_export(path: Path) -> Path | None:
    """The policy export folder (it holds ``export.json``) that ``path`` is or lies in, or None: an export into it
    (training/export_folder.py ``save_policy``) replaces that folder whole, so nothing else may be written there."""
    resolved = Path(path).resolve()
    return next((f for f in (resolved, *resolved.parents) if (f / EXPORT_FILE).is_file()), None)


def checkpoint_tags(ckpt_dir: Path) -> list[str]:
    """The ``iter_NNNNNN`` checkpoint folders in ``ckpt_dir``, oldest first; [] without the folder."""
    if not ckpt_dir.is_dir():
        return []
    return sorted((p.name for p in ckpt_dir.iterdir() if p.is_dir() and p.name.startswith("iter_")
                   and p.name[5:].isdigit()), key=lambda t: int(t[5:]))


def read_latest(ckpt_dir: Path) -> str | None:
    """The tag DeepSpeed's ``latest`` file in ``ckpt_dir`` names, stripped; None without the file. Bytes
    that are not UTF-8 come back backslash-escaped (``iter_\\xff``): never a tag (`training.engine.plain_tag`
    refuses a backslash), so each reader's own "empty or unreadable" refusal names it (decoding raised a
    traceback). A leading UTF-8 byte-order mark (an editor's) is skipped: it read as part of the tag."""
    latest = ckpt_dir / "latest"
    return read_text(latest, "backslashreplace").strip() if latest.is_file() else None


def finished_checkpoints(ckpt_dir: Path, named: str = "") -> list[str]:
    """The ``iter_NNNNNN`` folders of ``ckpt_dir`` holding ``layout.json`` (`LAYOUT_FILE`: written once the
    save finished), and the folder ``named`` (what ``latest`` names) if it is there, oldest first."""
    return [t for t in checkpoint_tags(ckpt_dir) if t == named or (ckpt_dir / t / LAYOUT_FILE).is_file()]


def unfinished_checkpoints(ckpt_dir: Path, latest: str | None) -> list[str]:
    """The ``iter_NNNNNN`` folders of ``ckpt_dir`` that are saves killed part-way, oldest first: without
    `LAYOUT_FILE`, not ``latest``, and numbered above a folder that has one. A folder without the file below
    every folder with one may be a checkpoint from before the file existed (training/resume.py), so it is not
    listed: ``keep_checkpoints`` counts it as it always did."""
    tags = checkpoint_tags(ckpt_dir)
    done = finished_checkpoints(ckpt_dir)
    first = int(done[0][5:]) if done else None
    return [t for t in tags if first is not None and int(t[5:]) > first and t != latest and t not in done]


def unfinished_save(ckpt_dir: Path, tag: str) -> str | None:
    """Why checkpoint ``tag`` cannot be exported or converted when `unfinished_checkpoints` names it (a save killed
    part-way: its files may be cut short or missing, and a ZeRO-3 one whose shard files were never written read as a
    ZeRO stage-0 checkpoint without weights), naming the finished ones; None otherwise."""
    if tag not in unfinished_checkpoints(ckpt_dir, read_latest(ckpt_dir)):
        return None
    done = finished_checkpoints(ckpt_dir)
    return (f"{ckpt_dir / tag} is a save killed part-way (no {LAYOUT_FILE}, which every save of this run writes when it "
            f"has finished): its files may be partial; finished checkpoints: {', '.join(done[-8:])}")


def universal_checkpoint(ckpt_dir: Path, tag: str) -> str | None:
    """Why ``tag`` cannot be exported when it is a universal conversion (``iter_NNNNNN_universal``, which
    training/reshard.py writes for a resume on another number of GPUs or in another dtype), saying what to export
    instead; None for another tag. The exporter reads ZeRO shard files or a stage-0 module file; a conversion has
    neither (its weights are per-parameter files under ``zero/``), so it read as a stage-0 checkpoint and, after a
    ZeRO-3 run, was said not to match the config's model."""
    if not tag.endswith(UNIVERSAL_SUFFIX):
        return None
    source = tag.removesuffix(UNIVERSAL_SUFFIX)
    what = (f"{ckpt_dir / tag} is a DeepSpeed universal checkpoint (training/reshard.py's conversion of {source}, "
            "for a --resume on another number of GPUs), which the exporter does not read")
    if (ckpt_dir / source).is_dir():
        return f"{what}: export the checkpoint it was converted from, --tag {source}"
    saved = checkpoint_tags(ckpt_dir)
    return (f"{what}, and {source} is not in {ckpt_dir}: export a checkpoint that is (--tag; saved: "
            f"{', '.join(saved[-8:]) or 'none'}), or resume from the conversion and export a checkpoint it saves")


def not_exportable(ckpt_dir: Path, tag: str) -> str | None:
    """Why checkpoint ``tag`` cannot be exported by its name alone: a universal conversion
    (`universal_checkpoint`) or a save killed part-way (`unfinished_save`); None otherwise."""
    return universal_checkpoint(ckpt_dir, tag) or unfinished_save(ckpt_dir, tag)


def earlier_checkpoints(out_dir: Path) -> list[str]:
    """The checkpoints in ``out_dir/checkpoints``, oldest first: the folder its ``latest`` file names (also
    when that folder is gone) and every ``iter_NNNNNN`` folder holding ``layout.json`` (written once its save
    finished: `training.resume.write_layout`); [] for none. An ``iter_NNNNNN`` folder with neither is a save
    killed part-way, which nothing can resume; a new run's save of that tag deletes it
    (`training.engine.clear_unfinished`)."""
    ckpt_dir = out_dir / "checkpoints"
    named = read_latest(ckpt_dir) or ""
    tags = finished_checkpoints(ckpt_dir, named)
    if named and named not in tags:
        tags.append(named)
    return tags


def tag_exports(out_dir: Path) -> list[str]:
    """The ``export-TAG`` folders of ``out_dir`` that are policy exports (they hold ``export.json``), by name."""
    if not out_dir.is_dir():
        return []
    return sorted(p.name for p in out_dir.iterdir() if p.name.startswith(TAG_EXPORT_PREFIX) and p.is_dir()
                  and (p / EXPORT_FILE).is_file())


def earlier_outputs(out_dir: Path) -> list[str]:
    """What a finished run leaves besides checkpoints, which a fresh run would delete or write over: its
    ``final/`` export, its ``export-TAG/`` exports and a ``metrics.jsonl`` with rows ("final/",
    "export-iter_000010/", "metrics.jsonl (N rows)"); [] for none."""
    found = (["final/"] if (out_dir / "final").is_dir() else []) + [f"{name}/" for name in tag_exports(out_dir)]
    rows = metrics_rows(out_dir / METRICS_LOG)
    return found + ([f"{METRICS_LOG} ({rows} row{'s' if rows != 1 else ''})"] if rows else [])


def metrics_rows(path: Path) -> int:
    """The non-blank lines of the metrics log ``path`` (0 without the file); ConfigError naming it when it cannot be
    read or is not UTF-8 text (`tools.jsonl.json_text`'s words): counted as no rows, such a log was replaced by the
    fresh launch it did not stop."""
    try:
        text = json_text(path)
    except FileNotFoundError:
        return 0
    except NotUtf8Error as exc:
        raise ConfigError(f"{path}: {exc}; {_UNREAD_WAYS}") from None
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror or exc}); {_UNREAD_WAYS}") from None
    return sum(1 for line in text_lines(text) if line.strip())


_UNREAD_WAYS = ("it may hold an earlier run's metrics, which a fresh launch replaces: start over with "
                "--overwrite_output_dir (restarts the logs), or set another output_dir")


def refusal(cfg: TrainConfig, tags: list[str], outputs: Sequence[str] = ()) -> str | None:
    """Why a launch of ``cfg`` cannot start in its output_dir holding the checkpoints ``tags`` and the other
    outputs ``outputs`` (`earlier_outputs`); None when it can (a resume, an explicit overwrite, or neither)."""
    if cfg.resume or cfg.overwrite_output_dir or not (tags or outputs):
        return None
    if not tags:
        return (f"output_dir {cfg.output_dir} already holds an earlier run's outputs ({', '.join(outputs)}) and no "
                "checkpoint to continue from; start over in it with --overwrite_output_dir (deletes its final/, "
                "export-TAG/ exports, rollout_videos/, eval_videos/ and tensorboard/ and restarts its logs), or set "
                "another output_dir")
    count = f"{len(tags)} checkpoint{'s' if len(tags) != 1 else ''}"
    return (f"output_dir {cfg.output_dir} already holds an earlier run's checkpoints ({count}, the latest "
            f"{tags[-1]}); continue that run with --resume, start over in it with --overwrite_output_dir "
            "(deletes its checkpoints/, final/, export-TAG/ exports, rollout_videos/, eval_videos/ and "
            "tensorboard/), or set another output_dir")


def not_a_folder(out_dir: Path) -> str | None:
    """Why ``out_dir`` cannot be made a folder (it, or the nearest of its parents that exists, is not a folder),
    or None. Such a launch passed ``--check``, loaded the model and then failed in a traceback (FileExistsError,
    NotADirectoryError) when the metrics log made the folder."""
    for path in (out_dir, *out_dir.parents):
        if path.exists() or path.is_symlink():
            if path.is_dir():
                return None
            return f"output_dir {out_dir} cannot be a folder: {path} is a file; set another output_dir"
    return None


def log_file_problem(out_dir: Path) -> str | None:
    """Why a launch cannot write its logs in ``out_dir``: one of them (`LOG_FILES`, ``launches.jsonl``) is there and is
    not a regular file (module docstring); None otherwise."""
    for name in (*LOG_FILES, LAUNCHES):
        path = out_dir / name
        try:
            mode = path.stat().st_mode
        except OSError:  # no such file (a dangling link: written through as a new file)
            continue
        if not stat.S_ISREG(mode):
            what = f"a link to {os.path.realpath(path)}, {file_kind(mode)}" if path.is_symlink() else file_kind(mode)
            why = "" if stat.S_ISDIR(mode) else f" ({_NOT_DISCARDED})"  # a folder discards nothing
            return (f"{path} is {what}, where the run writes its log {name}: neither --resume nor "
                    "--overwrite_output_dir (which deletes only the earlier run's output folders, by name) removes "
                    f"it; move or delete it, or set another output_dir{why}")
    return None


_NOT_DISCARDED = ("a log cannot be discarded: the run reads its logs back, a --resume to trim and continue them, "
                  f"{EVAL_LOG} to pick the best checkpoint, {METRICS_LOG} to tell a finished run's folder, "
                  "training.report to draw them")


def output_dir_problem(cfg: TrainConfig) -> str | None:
    """`not_a_folder`, else `log_file_problem`, else `refusal` of ``cfg`` for the checkpoints and outputs its
    output_dir holds now."""
    out_dir = Path(cfg.output_dir)
    if problem := not_a_folder(out_dir) or log_file_problem(out_dir):
        return problem
    if cfg.resume or cfg.overwrite_output_dir:  # `refusal` is None: the earlier outputs are not read
        return None
    if tags := earlier_checkpoints(out_dir):  # its refusal names no other output: the metrics log is not read
        return refusal(cfg, tags)
    try:
        outputs = earlier_outputs(out_dir)
    except ConfigError as exc:  # a metrics log that cannot be read (`metrics_rows`)
        return str(exc)
    return refusal(cfg, [], outputs)


def check_output_dir(cfg: TrainConfig) -> None:
    """ConfigError when a fresh launch of ``cfg`` would start in a folder holding an earlier run's
    checkpoints or outputs without ``overwrite_output_dir``, or when output_dir cannot be a folder (a resume
    too: `not_a_folder`) (the entry point, ``--check``; one process)."""
    if problem := output_dir_problem(cfg):
        raise ConfigError(problem)


def clear_earlier_run(out_dir: Path) -> list[str]:
    """Delete the ``EARLIER_OUTPUTS`` folders of ``out_dir`` that exist, then its `tag_exports`; returns their
    names."""
    removed = []
    for name in (*EARLIER_OUTPUTS, *tag_exports(out_dir)):
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
