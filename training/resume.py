"""What ``--resume`` may load: the latest checkpoint, its universal conversion, or a clear refusal.

DeepSpeed stores the optimizer state in a layout that depends on three things of the launch that wrote
it: the number of ranks (ZeRO splits the state over them), the ZeRO stage and the dtype. A resume that
changes any of them either loads the checkpoint's universal conversion (``python -m training.reshard``)
or cannot work; DeepSpeed itself only finds out after the model has loaded, with a traceback
(``AttributeError: 'NoneType' object has no attribute 'copy'`` for stage 2 -> 0, a bare
``AssertionError`` for 2 -> 3, ``FileNotFoundError: ...bf16_zero_pp_rank_0...`` for float32 -> bfloat16).
:func:`resume_source` decides from file names and one small JSON file, before anything loads.

What loads into what, measured on CPU with DeepSpeed 0.19.8 (float16 cannot run on CPU and is unverified):

* stages 1 and 2 share one layout: 2 -> 1 and 1 -> 2 load directly;
* stage 0, stages 1-2 and stage 3 do not load into one another, not even through the universal form
  (loading a stage-2 conversion under stage 3 fails in DeepSpeed's state-dict loader, and stage 0
  has no ZeRO files to convert);
* a dtype change (float32 <-> bfloat16) loads through the universal form under stages 1-3; a stage-0
  checkpoint cannot change dtype.

Decisions where the issue was silent:

* Each checkpoint records the layout that wrote it in ``iter_NNNNNN/layout.json`` (each node's local
  rank 0, after the save). A run's ``config.yaml`` describes the *launch*, which may have died before its first checkpoint
  (a bfloat16 resume that ran out of memory), so it is only the fallback for checkpoints from before
  this file; with neither, DeepSpeed's load is the check, as before.
* Rank 0 decides what every rank loads (`plan_resume`): each rank read ``latest`` itself, so a ``latest``
  that moved between their reads (another process writing the run, a node-local copy behind) had ranks load
  different checkpoints; a refusal is rank 0's too, with the same message on every rank.
* Checkpoint storage is shared (every node reads rank 0's folder) unless the DeepSpeed JSON sets
  ``checkpoint.use_node_local_storage`` (`node_local_storage`): then each node's folder holds its own ranks'
  files, the number of ranks that saved comes from ``layout.json`` (``world_size``) rather than from the
  shares rank 0's node holds, and either way every rank checks that it sees the files it loads
  (training/resume_copies.py), so an incomplete copy on any node stops every rank with one message.
* The universal form is used only when it is needed: it costs a conversion and reloads every parameter
  through DeepSpeed's slower path.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tools.jsonl import parsed_file
from training.collectives import as_rank0_sees
from training.config import ConfigError, TrainConfig
from training.config_resume import read_saved_run, resume_conflicts
from training.ds_config import read_ds_config
from training.engine import UNIVERSAL_SUFFIX, checkpoint_ranks, latest_tag, plain_tag, tag_iteration
from training.lr_schedule import resume_refusal
from training.resume_copies import check_every_copy
from training.run_dir import LAYOUT_FILE, finished_checkpoints


@dataclass(frozen=True)
class StateLayout:
    """How a launch lays out its optimizer state in a checkpoint (besides the number of ranks)."""

    zero_stage: int
    """The ZeRO stage the engine ran (``zero_stage``, else the DeepSpeed JSON's)."""
    dtype: str
    """``TrainConfig.dtype`` (float32 keeps plain fp32 state; bfloat16/float16 add fp32 master weights)."""


@dataclass(frozen=True)
class ResumeSource:
    """What ``--resume`` loads."""

    tag: str
    """Folder in the checkpoint directory."""
    universal: bool
    """In DeepSpeed's universal format (loaded with ``checkpoint.load_universal``), because the latest
    checkpoint was written by another number of ranks or another dtype than this launch has."""


def state_layout(cfg: TrainConfig) -> StateLayout:
    """The layout a launch of ``cfg`` writes (reads its DeepSpeed JSON; ConfigError when that is gone)."""
    if cfg.zero_stage is not None:
        return StateLayout(cfg.zero_stage, cfg.dtype)
    return StateLayout(json_zero_stage(read_ds_config(cfg.ds_config), cfg.ds_config), cfg.dtype)


def json_zero_stage(ds: dict[str, Any], name: str) -> int:
    """``zero_optimization.stage`` of the DeepSpeed JSON ``ds`` (file ``name``; 0, DeepSpeed's default, when not
    set); ConfigError naming the file unless it is the JSON number 0, 1, 2 or 3. A stage 4 passed ``--check`` and
    failed in DeepSpeed after the model had loaded; text such as "two" was a bare int() traceback, and text "3"
    was stage 3 here but not to `training.numerics.zero3_linear`, which compares numbers."""
    section = ds.get("zero_optimization") or {}
    stage = section.get("stage", 0) if isinstance(section, dict) else section
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3) or not isinstance(stage, int):
        raise ConfigError(f"ds_config {name!r}: zero_optimization.stage must be 0, 1, 2 or 3 (a JSON number), "
                          f"got {stage!r}")
    return stage


def layout_change(saved: StateLayout, now: StateLayout) -> Literal["same", "universal", "impossible"]:
    """Whether a checkpoint written with ``saved`` loads under ``now`` as it is, only through its universal
    form, or not at all (the table in the module docstring): the stage groups {0}, {1, 2} and {3} never
    mix; a dtype change needs the universal form, which stage 0 does not have."""
    group = {0: 0, 1: 1, 2: 1, 3: 3}
    if group[saved.zero_stage] != group[now.zero_stage]:
        return "impossible"
    if saved.dtype == now.dtype:
        return "same"
    return "impossible" if now.zero_stage == 0 else "universal"


def run_layout(cfg: TrainConfig | None) -> StateLayout | None:
    """:func:`state_layout` of a run's saved config (``config_resume.SavedRun.config``); None without one, or when
    its DeepSpeed JSON is gone."""
    try:
        return state_layout(cfg) if cfg is not None else None
    except ConfigError:
        return None


def write_layout(folder: Path, layout: StateLayout, world: int | None = None,
                 schedule: dict[str, Any] | None = None) -> None:
    """Record ``layout`` (and ``world``, the number of ranks that saved, as ``world_size``; ``schedule``, the
    learning-rate record `training.lr_schedule.schedule_state`, as ``lr_schedule``) in a checkpoint folder, after
    the save; each node's local rank 0 calls it (as with pruning, node-local checkpoint folders
    get one too), so the temporary name is unique per host and process. A folder this node holds nothing of
    is left alone."""
    if not folder.is_dir():
        return
    record = {"zero_stage": layout.zero_stage, "dtype": layout.dtype}
    if world is not None:
        record["world_size"] = world
    if schedule is not None:
        record["lr_schedule"] = schedule
    tmp = folder / f".{LAYOUT_FILE}.{socket.gethostname()}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record) + "\n")
    tmp.replace(folder / LAYOUT_FILE)


def read_layout(folder: Path) -> StateLayout | None:
    """The layout a checkpoint folder records; None for one without it (or an unreadable one)."""
    try:
        data = parsed_file(folder / LAYOUT_FILE)
        return StateLayout(int(data["zero_stage"]), str(data["dtype"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_world(folder: Path) -> int | None:
    """The number of ranks that saved a checkpoint folder (``world_size`` in its ``layout.json``); None for a
    checkpoint saved before it was recorded (or an unreadable record)."""
    try:
        world = parsed_file(folder / LAYOUT_FILE)["world_size"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return world if isinstance(world, int) and not isinstance(world, bool) and world >= 1 else None


def read_schedule(folder: Path) -> Any:
    """The learning-rate record of a checkpoint folder's ``layout.json`` (`write_layout`); None without one."""
    try:
        return parsed_file(folder / LAYOUT_FILE).get("lr_schedule")
    except (OSError, ValueError, AttributeError):
        return None


def incomplete_copy(folder: Path) -> str | None:
    """Why the shard files in checkpoint ``folder`` are not the whole checkpoint its ``layout.json`` records
    (``world_size``), for the tools that read every rank's files from one folder (training.reshard,
    training.export); None when they are, and when the number is unknown (saved before it was recorded) or
    there are no shards (stage 0: one module file). Under node-local storage (module docstring) each node's
    folder holds only its own ranks' files, which a count of the files took for the whole checkpoint; more
    files than ranks means another save's are mixed in. Either would be merged wrongly, so it is refused."""
    world, ranks = read_world(folder), checkpoint_ranks(folder)
    if world is None or ranks == 0 or ranks == world:
        return None
    if ranks < world:
        return (f"{folder} holds {ranks} of {world} ranks' files; copy every node's shard files into one folder "
                "first (a checkpoint saved with DeepSpeed's checkpoint.use_node_local_storage keeps each node's "
                "ranks' files on that node)")
    return (f"{folder} holds shard files of {ranks} ranks, but {world} saved it (its {LAYOUT_FILE}): files of "
            f"another save are mixed in; remove those of rank {world} and up, or use another checkpoint")


def node_local_storage(cfg: TrainConfig) -> bool:
    """Whether the launch keeps checkpoints in node-local folders: DeepSpeed's
    ``checkpoint.use_node_local_storage`` in its JSON (each node's local rank 0 then writes the model-states
    file; without it only rank 0 does, and other nodes must read rank 0's folder: shared storage)."""
    return bool((read_ds_config(cfg.ds_config).get("checkpoint") or {}).get("use_node_local_storage", False))


def resume_source(ckpt_dir: Path, world: int, layout: StateLayout | None = None, *,
                  fallback: StateLayout | None = None, node_local: bool = False) -> ResumeSource:
    """The checkpoint ``--resume`` continues from with ``world`` ranks and this launch's ``layout``: the one
    ``latest`` names, or its universal conversion when it was written by another number of ranks or in
    another dtype. The checkpoint's own layout is its ``layout.json``, else ``fallback`` (the run's saved
    config); ``layout`` None skips that comparison. Read from file names and that file alone, before any
    model loads; ValueError saying what is missing and what to do (no ``latest``; ``latest`` naming a
    folder that is gone or one without its model-state files; a change no conversion can make; a needed
    conversion not made yet).

    ``node_local`` (`node_local_storage`): ``ckpt_dir`` is this node's copy, holding only its own ranks'
    optimizer shares (and, under ZeRO-3, model states), so the number of ranks that saved is the one
    ``layout.json`` records (unknown for an older checkpoint: DeepSpeed's load is the check) and each rank's
    files are checked by that rank (`training.resume_copies.check_every_copy`)."""
    tag = latest_tag(ckpt_dir)
    if tag is None:
        # saved, then stopped before 'latest' moved: a fresh launch is refused too (training.run_dir)
        if finished := finished_checkpoints(ckpt_dir):
            raise ValueError(f"--resume: {ckpt_dir} has no 'latest' file, but {finished[-1]} was saved in full (it "
                             "has layout.json; the run stopped before 'latest' moved): write that tag into "
                             f"{ckpt_dir / 'latest'} to resume from it, or start over with --overwrite_output_dir")
        raise ValueError(f"--resume: no checkpoint in {ckpt_dir} (no 'latest' file); start the run without "
                         "--resume (with --overwrite_output_dir when it holds the earlier attempt's logs), or "
                         "set output_dir to the run to continue")
    if not plain_tag(tag):
        raise ValueError(f"--resume: {ckpt_dir / 'latest'} is empty or unreadable ({tag!r}); write the tag of the "
                         "newest complete checkpoint folder (iter_NNNNNN) into it, then resume again")
    folder = ckpt_dir / tag
    if not folder.is_dir():
        raise ValueError(f"--resume: {ckpt_dir / 'latest'} names {tag}, but {folder} is missing")
    written = read_layout(folder) or fallback
    change = layout_change(written, layout) if written is not None and layout is not None else "same"
    if change == "impossible":
        assert written is not None and layout is not None  # a change is a comparison of the two
        raise ValueError(_impossible(folder, written, layout))
    ranks = (read_world(folder) or 0) if node_local else checkpoint_ranks(folder)
    if change == "same" and (not ranks or ranks == world):
        if not node_local and (missing := _missing_model_states(folder, written, world)):
            raise ValueError(f"--resume: {folder} lacks {', '.join(missing)} (the model's parameters, which "
                             "DeepSpeed loads first): the checkpoint is incomplete. Point "
                             f"{ckpt_dir / 'latest'} at an earlier complete checkpoint folder, or start over")
        return ResumeSource(tag, universal=False)
    converted = ckpt_dir / (tag + UNIVERSAL_SUFFIX)
    if (converted / "zero").is_dir():
        return ResumeSource(converted.name, universal=True)
    convert = f"`python -m training.reshard --run {ckpt_dir.parent}`"
    if change == "universal":
        assert written is not None and layout is not None  # a change is a comparison of the two
        raise ValueError(f"--resume: {folder} was saved in {written.dtype} and this launch runs {layout.dtype}; "
                         "DeepSpeed loads optimizer state of another precision only from a checkpoint's universal "
                         f"form. Convert the checkpoint once with {convert}, then resume again, or resume with "
                         f"`--dtype {written.dtype}`")
    raise ValueError(f"--resume: {folder} was written by {_n(ranks, 'rank')} and this launch has {world}; ZeRO "
                     f"splits the optimizer state over the ranks that wrote it. Resume with {_n(ranks, 'process')} "
                     f"(`torchrun --nproc_per_node {ranks} ...` or `deepspeed --num_gpus {ranks} ...`), or "
                     f"convert the checkpoint once, after which any number of processes can resume it: {convert}")


def nothing_to_train(tag: str, max_iterations: int) -> str | None:
    """A note when the checkpoint ``tag`` (``iter_NNNNNN``, ``_universal`` or not) is at or past ``max_iterations``,
    which counts the iterations before a resume too: such a launch trained nothing, exported the checkpoint again
    and said only "done" (a user asking for N more gave ``--max_iterations N``). None for another tag."""
    match = re.fullmatch(r"iter_(\d+)(_universal)?", tag)
    if match is None or int(match.group(1)) < max_iterations:
        return None
    done = int(match.group(1))
    return (f"note: the checkpoint is at iteration {done} and max_iterations {max_iterations} counts the iterations "
            f"before the resume too, so nothing is trained: give the total, e.g. --max_iterations "
            f"{done + max_iterations} for {max_iterations} more")


def plan_resume(cfg: TrainConfig, world: int, layout: StateLayout) -> tuple[ResumeSource, list[str]]:
    """What a ``--resume`` launch of ``cfg`` (its `state_layout` ``layout``) with ``world`` ranks loads, and the
    settings it changes against the run's saved config (`config_resume.config_changes`, for the warning);
    ConfigError, before any model loads, for a resume that cannot work (`resume_source`,
    `config_resume.resume_conflicts`). Rank 0's answer on every rank (module docstring; a collective when
    torch.distributed is initialised: call it on all ranks)."""
    def plan() -> tuple[ResumeSource | None, list[str], str | None]:
        try:
            return (*_plan_resume(cfg, world, layout), None)
        except ConfigError as exc:
            return None, [], str(exc)

    source, changes, problem = as_rank0_sees(plan)
    if source is None:
        raise ConfigError(problem or "--resume: rank 0 found nothing to resume")
    check_every_copy(Path(cfg.output_dir) / "checkpoints", source, layout, node_local=node_local_storage(cfg))
    return source, changes


def _plan_resume(cfg: TrainConfig, world: int, layout: StateLayout) -> tuple[ResumeSource, list[str]]:
    """`plan_resume` as this process reads the run folder."""
    out_dir = Path(cfg.output_dir)
    saved = read_saved_run(out_dir / "config.yaml", cfg)
    try:
        source = resume_source(out_dir / "checkpoints", world, layout, fallback=run_layout(saved.config),
                               node_local=node_local_storage(cfg))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    saved_in = out_dir / "checkpoints" / source.tag.removesuffix(UNIVERSAL_SUFFIX)  # its layout.json
    if (problem := resume_refusal(cfg, read_schedule(saved_in), tag_iteration(source.tag))) is not None:
        raise ConfigError(problem)  # a rate of 0 (training/lr_schedule.py), before the model is built
    if conflicts := resume_conflicts(saved.changes, cfg):
        raise ConfigError(f"--resume: {out_dir} was trained with another model, and a checkpoint keeps its "
                          "parameters: " + "; ".join(conflicts) + ". Resume with the run's settings, or start a "
                          "new run in another output_dir")
    return source, saved.changes


def _missing_model_states(folder: Path, written: StateLayout | None, world: int) -> list[str]:
    """The model-state files DeepSpeed's ``load_checkpoint`` opens in ``folder`` that are not there: under
    ZeRO stage 3 each rank's ``zero_pp_rank_R_mp_rank_00_model_states.pt``, else ``mp_rank_00_model_states.pt``
    (every rank reads it). Without the checkpoint's layout, any ``*model_states.pt`` will do."""
    if written is None:
        return [] if any(folder.glob("*model_states.pt")) else ["*model_states.pt"]
    names = ([f"zero_pp_rank_{r}_mp_rank_00_model_states.pt" for r in range(world)] if written.zero_stage == 3
             else ["mp_rank_00_model_states.pt"])
    return [name for name in names if not (folder / name).is_file()]


def _impossible(folder: Path, written: StateLayout, now: StateLayout) -> str:
    if written.zero_stage != now.zero_stage:
        same = "`--zero_stage 1` or `--zero_stage 2`" if written.zero_stage in (1, 2) \
            else f"`--zero_stage {written.zero_stage}`"
        return (f"--resume: {folder} was saved under ZeRO stage {written.zero_stage} and this launch runs stage "
                f"{now.zero_stage}; DeepSpeed keeps the optimizer state of stage 0, of stages 1-2 and of stage 3 "
                "in layouts that do not load into one another, not even through `training.reshard`. Resume "
                f"with {same}, or start a new run in another output_dir")
    return (f"--resume: {folder} was saved in {written.dtype} under ZeRO stage 0 and this launch runs "
            f"{now.dtype}; a stage-0 checkpoint has no universal form, so its precision cannot change. Resume "
            f"with `--dtype {written.dtype}`, or start a new run in another output_dir")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun.endswith('s') else 's'}"
