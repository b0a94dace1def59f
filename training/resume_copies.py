"""Whether every rank sees the whole checkpoint ``--resume`` loads, and the refusal when some rank does not.

Rank 0 picks the checkpoint from its own ``latest`` (training/resume.py, `plan_resume`); every other rank loads
that tag from its own view of ``output_dir``. Which advice fits a rank that lacks files depends on where the
launch keeps checkpoints:

* shared storage (the DeepSpeed JSON does not set ``checkpoint.use_node_local_storage``): every rank reads rank 0's
  folder, so a host that lacks files does not see that storage; the fix is storage every node shares, or a
  copy of rank 0's folder at the same path there;
* node-local folders (``use_node_local_storage: true``): each node holds only its own ranks' files of a checkpoint,
  so the missing files exist (if anywhere) on the node that ran those ranks when it was saved; the fix is copying
  them there, or moving rank 0's ``latest`` (the only one read: another node's ``latest`` was once named in the
  advice, though changing it changes nothing) to an earlier checkpoint every node holds whole.

A rank on rank 0's own host that lacks files gets no advice to copy them onto that host from itself: with node-local
folders that host saved them, so they are gone there (another node has them only if it ran those ranks at that
save); with shared storage rank 0 saw every rank's files in its folder, so that rank reads another filesystem
under the same host name (a container or a mount of its own).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

from training.config import ConfigError
from training.engine import checkpoint_ranks

if TYPE_CHECKING:
    from training.resume import ResumeSource, StateLayout


def missing_here(ckpt_dir: Path, source: ResumeSource, rank: int, zero_stage: int) -> list[str]:
    """The files of checkpoint ``source`` that rank ``rank`` opens in DeepSpeed's load and this process does not
    see (["the folder"] when the folder itself is not there): under ZeRO stage 3 its own
    ``zero_pp_rank_R_mp_rank_00_model_states.pt``, else ``mp_rank_00_model_states.pt``, and its own share of
    the optimizer state (``*zero_pp_rank_R_mp_rank_00_optim_states.pt``) under stages 1-3, or under stage 0
    where the folder holds such shares (bf16); a universal conversion, its ``zero/`` folder."""
    folder = ckpt_dir / source.tag
    if not folder.is_dir():
        return ["the folder"]
    if source.universal:
        return [] if (folder / "zero").is_dir() else ["zero/"]
    model = f"zero_pp_rank_{rank}_mp_rank_00_model_states.pt" if zero_stage == 3 else "mp_rank_00_model_states.pt"
    missing = [] if (folder / model).is_file() else [model]
    shard = f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"
    if (zero_stage > 0 or checkpoint_ranks(folder)) and not any(folder.glob(f"*{shard}")):
        missing.append(shard)
    return missing


def check_every_copy(ckpt_dir: Path, source: ResumeSource, layout: StateLayout, *, node_local: bool) -> None:
    """Every rank checks that it sees the files of ``source`` it will load (`missing_here`), and all stop with
    one ConfigError naming each rank, host and file that is not there (a collective when torch.distributed is
    initialised: call it on all ranks; without it `resume_source` has checked the one view there is).
    ``node_local``: the launch keeps checkpoints in node-local folders (`training.resume.node_local_storage`),
    which decides the advice (module docstring).

    Rank 0 picks the checkpoint from its own view of ``output_dir``. The assumption is that every rank sees
    that checkpoint: on storage every node shares, or, with node-local checkpoint folders (DeepSpeed's
    ``checkpoint.use_node_local_storage: true``, under which each node's local rank 0 writes the model-states
    file and each rank its own optimizer share), on each node's own disk. A node whose copy lacked the
    folder or its ranks' files (a node replaced, a disk cleared, a save killed there) got no word of it:
    DeepSpeed failed there with a FileNotFoundError after the model loaded, while the other ranks waited in a
    collective."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    rank = dist.get_rank()
    mine = (rank, socket.gethostname(), str(ckpt_dir), missing_here(ckpt_dir, source, rank, layout.zero_stage))
    everyone: list[tuple[int, str, str, list[str]] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    views = [view for view in everyone if view is not None]  # all of them, in rank order, after the gather
    gaps = [(r, host, files) for r, host, _, files in views if files]
    if gaps:  # rank 0's path and host in every rank's message, as rank 0's view decided
        raise ConfigError(incomplete_message(Path(views[0][2]), source.tag, gaps, node_local=node_local,
                                             rank0_host=views[0][1]))


def incomplete_message(ckpt_dir: Path, tag: str, gaps: list[tuple[int, str, list[str]]], *, node_local: bool,
                       rank0_host: str) -> str:
    """The refusal of `check_every_copy` (``ckpt_dir``: rank 0's, on ``rank0_host``): ``gaps`` are (rank, host,
    files that rank does not see); the advice for ``node_local`` folders or shared storage (module docstring)."""
    where = "; ".join(f"rank {rank} (host {host}) reads it: it lacks {', '.join(files)}" for rank, host, files in gaps)
    # each host once, in rank order; rank 0's own host apart: no copy from it onto itself can help there
    others = ", ".join(dict.fromkeys(host for _, host, _ in gaps if host != rank0_host))
    own_ranks = [str(rank) for rank, host, _ in gaps if host == rank0_host]
    own = _ranks(own_ranks)
    run, do, it, read, its = ("run", "do", "they", "read", "their") if len(own_ranks) > 1 else \
        ("runs", "does", "it", "reads", "its")  # "ranks 1 and 3 run", "rank 1 runs"
    head = (f"--resume: {ckpt_dir / tag} is incomplete where {where}; rank 0 (host {rank0_host}) picked it from "
            f"its own {ckpt_dir / 'latest'}. ")
    if node_local:
        copies = [f"copy those ranks' files of {tag} onto host {others} from the node that saved them"] if others \
            else []
        if own_ranks:
            copies.append(f"{own} {run} on host {rank0_host}, rank 0's own: unless another node ran {own} when "
                          f"{tag} was saved (copy {its} files from there), they were lost on {rank0_host} (a save "
                          "cut short, files removed)")
        return head + ("With node-local checkpoint folders (DeepSpeed's checkpoint.use_node_local_storage: true) "
                       f"each node holds only its own ranks' files: {'; '.join(copies)}; or, where they are lost, "
                       f"write the tag of an earlier checkpoint every node holds whole into {ckpt_dir / 'latest'} on "
                       f"host {rank0_host} (rank 0's 'latest' alone decides what every rank loads)")
    fixes = [f"put output_dir on storage every node shares, or copy {ckpt_dir / tag} whole from host {rank0_host} "
             f"to the same path on host {others}"] if others else []
    if own_ranks:  # rank 0 saw every rank's files in that folder (training.resume.resume_source checked them)
        whose = "their" if len(own_ranks) > 1 else f"{own}'s"
        fixes.append(f"{own} {run} under host name {rank0_host} as rank 0 does, yet {do} not see the files rank 0 "
                     f"found at that path, so {it} {read} another filesystem there (a container or a mount of {its} "
                     f"own): put output_dir on storage every node shares, mounted for {own} too, or copy "
                     f"{ckpt_dir / tag} whole into {whose} view of the same path")
    return head + ("This launch's DeepSpeed JSON does not set checkpoint.use_node_local_storage, so every rank reads "
                   f"rank 0's folder: {'; '.join(fixes)}")


def _ranks(ranks: list[str]) -> str:
    """"rank 1", "ranks 1 and 3", "ranks 1, 3 and 5" ("" for none)."""
    if len(ranks) < 2:
        return f"rank {ranks[0]}" if ranks else ""
    return f"ranks {', '.join(ranks[:-1])} and {ranks[-1]}"
