"""Entry point: ``python -m training.train --config FILE [--field value ...]``.

Launch with any of::

    deepspeed --num_gpus 2 --module training.train --config training/configs/cosmos2_5_2b.yaml
    torchrun --nproc_per_node 2 -m training.train --config training/configs/smoke.yaml
    python -m training.train --config training/configs/smoke.yaml     # one process

``--check`` makes every check a launch makes before a model loads (``model_path`` included:
`training.model_check`), prints the resolved config and what a resume would load, and exits (0, or 2 with
the problem); the checks that need the model
(``lora_targets``, the clip size against the VAE) come right after a launch builds it. ``--help`` lists
the config fields.

This is the edge where the environment is read: ``LOCAL_RANK`` and the ranks per machine (set by the
launchers; without ``OMP_NUM_THREADS``, ranks on one machine split its CPUs: `share_cpu_threads`), the
reward token variables named by ``token_env`` (http rewards; an unset one is a config error), the
agent's ``RAA_*`` backbone settings (agent reward without a ``model``: endpoint, ``RAA_INSPECT_MODE``, traces), and --
for a plain single-process run without a launcher -- default ``RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT`` (the port
of a rendezvous store the process itself serves and holds: `_single_process_env`). A rank
variable that is not an integer in range is a config error naming it and its value (`rank_env`).
Config errors (a missing or malformed prompt file included; a ``model_path`` that is no checkpoint folder and
cannot be downloaded), an invalid ``RAA_*`` setting and an agent
reward without an endpoint are printed and exit with status 2 before any model loads (a run whose every reward is ineligible updates nothing).

Exit statuses: 0 done; 1 the policy diverged (``nonfinite_loss: stop``) or the final export failed; 2 a
configuration problem; 3 ``max_skipped_iterations`` iterations in a row without an update (checkpoint
saved); 128 + N stopped by signal N (``on_signal: checkpoint``, checkpoint saved).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from tools.env_numbers import number_text_error
from training.build_locks import extensions_root, launch_build_note, stale_lock_note, stale_locks
from training.config import ConfigError, PromptSpec, TrainConfig
from training.config_io import parse_cli
from training.ds_config import check_ds_json, read_ds_config
from training.model_check import check_model_path
from training.run_dir import check_output_dir

_RENDEZVOUS: Any = None  # a plain run's TCPStore (`_single_process_env`), held for the life of the process


def _single_process_env() -> None:
    """A plain run without a launcher: rank 0 of 1 on this machine, meeting at a TCPStore this process serves on
    a port the OS picks as the store binds it, held until the process exits; the process group joins it as a
    client (TORCHELASTIC_USE_AGENT_STORE, as torchrun's ranks join its agent's store). A port from a probe
    socket (bound, read, closed) was free only until the probe closed: any process on the machine could take
    it before the process group bound it, and the run failed at start (EADDRINUSE)."""
    global _RENDEZVOUS
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return
    from torch.distributed import TCPStore

    _RENDEZVOUS = TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False)
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(_RENDEZVOUS.port), "TORCHELASTIC_USE_AGENT_STORE": "True"})


class RankEnv(NamedTuple):
    """This process's place in the launch, from the launcher's environment variables (`rank_env`)."""

    rank: int
    world: int
    local_rank: int


def env_int(environ: Mapping[str, str], name: str, default: int, least: int) -> int:
    """The integer environment variable ``name`` (``default`` when unset); ConfigError naming the variable and
    its value when it is not an integer >= ``least`` (``int(os.environ[...])`` was a ValueError traceback) or not
    plainly written (`tools.env_numbers`: int() took "1_0" as 10 and non-ASCII digits, so a launcher typo set a
    rank silently)."""
    text = environ.get(name)
    if text is None:
        return default
    value = least - 1 if number_text_error(text.strip(), int) else int(text)
    if value < least:
        raise ConfigError(f"environment variable {name} must be an integer >= {least}, got {text!r}")
    return value


def rank_env(environ: Mapping[str, str]) -> RankEnv:
    """RANK, WORLD_SIZE and LOCAL_RANK (0, 1, 0 when unset: one process), checked (`env_int`), and the ranks per
    machine (LOCAL_WORLD_SIZE / LOCAL_SIZE, read by `share_cpu_threads`); ConfigError for a bad one."""
    for name in ("LOCAL_WORLD_SIZE", "LOCAL_SIZE"):
        env_int(environ, name, 1, 1)
    out = RankEnv(env_int(environ, "RANK", 0, 0), env_int(environ, "WORLD_SIZE", 1, 1),
                  env_int(environ, "LOCAL_RANK", 0, 0))
    if out.rank >= out.world:
        raise ConfigError(f"environment variable RANK {out.rank} is not below WORLD_SIZE {out.world}")
    return out


def share_cpu_threads(environ: Mapping[str, str], cpus: int | None) -> int | None:
    """Threads for this rank's torch CPU ops when the launcher did not say (``OMP_NUM_THREADS`` unset) and
    several ranks share the machine (``LOCAL_WORLD_SIZE``, torchrun; ``LOCAL_SIZE``, deepspeed; > 1): the CPUs
    split between them. torchrun sets
    ``OMP_NUM_THREADS=1`` itself; DeepSpeed's launcher does not, and two CPU ranks each using every core ran
    the smoke config ~15x slower per iteration on 2 cores. None: leave torch's default."""
    ranks = int(environ.get("LOCAL_WORLD_SIZE") or environ.get("LOCAL_SIZE") or 1)  # torchrun / deepspeed
    if "OMP_NUM_THREADS" in environ or ranks <= 1:
        return None
    return max(1, (cpus or 1) // ranks)


def device_problem(cfg: TrainConfig, cuda_available: bool) -> str | None:
    """Why this machine cannot run ``cfg``'s ``device``, or None: ``device: cuda`` where torch sees no CUDA device.
    A launch stops with it (exit 2): each rank stopped in ``torch.cuda.set_device`` with a traceback. ``--check``
    only notes it, as it may be run on a login node for a launch on GPU nodes (``auto`` falls back to the CPU)."""
    if cfg.device == "cuda" and not cuda_available:
        return ("device is cuda, but torch sees no CUDA device here (a CPU-only torch, or no GPU on this node): "
                "launch on a GPU node, or set device: auto or cpu")
    return None


def reward_tokens(cfg: TrainConfig) -> dict[str, str]:
    """The http rewards' bearer tokens: the value of every variable a ``token_env`` names (an http reward's,
    a sum's and its http parts', `training.sum_reward.token_envs`), by name; ConfigError naming one that
    is not set (every request would be refused: a whole run of ineligible rewards)."""
    from training.sum_reward import token_envs

    tokens = {name: os.environ.get(name, "") for name in token_envs(cfg.reward, cfg.reward_options)}
    missing = [name for name, value in tokens.items() if not value]
    if missing:
        raise ConfigError(f"reward_options token_env names {', '.join(missing)}, which "
                          f"{'is' if len(missing) == 1 else 'are'} not set in the environment: export the "
                          "reward service's bearer token there, or drop token_env for a service without one")
    return tokens


def uses_agent(cfg: TrainConfig) -> bool:
    """Whether the reward is the agent, or a sum with an agent part (it then needs the RAA_* settings)."""
    from training.sum_reward import used_rewards

    return "agent" in used_rewards(cfg.reward, cfg.reward_options)


def reward_settings(cfg: TrainConfig) -> Any:
    """The agent reward's `BackboneSettings` from the environment (None for other rewards); raises
    ConfigError for an invalid `RAA_*` value or an unconfigured endpoint."""
    if not uses_agent(cfg):
        return None
    from graph.settings import BackboneSettings, SettingsError

    try:
        settings = BackboneSettings.from_env()
    except SettingsError as exc:
        raise ConfigError(str(exc)) from exc
    if not settings.configured:
        raise ConfigError(f"reward: agent needs its backbone endpoint. {settings.describe_missing()}")
    from graph.endpoint import preflight

    problem = preflight(settings)  # a dead endpoint or a wrong model name: a whole run without one reward
    if problem:
        raise ConfigError(f"reward: agent: {problem}")
    return settings


def reward_tools(cfg: TrainConfig) -> Any:
    """The agent reward's evidence tools, a lazy `tools.toolbox.Toolbox` from the `RAA_*` tool settings
    (None for other rewards); ConfigError for a value that does not parse."""
    if not uses_agent(cfg):
        return None
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    try:
        return Toolbox(ToolSettings.from_env())
    except ValueError as exc:  # pydantic's ValidationError included
        raise ConfigError(f"reward: agent: invalid tool setting: {exc}") from None


def _prompts(dataset: Sequence[PromptSpec], dataset_file: str | None,
             field: str) -> tuple[list[PromptSpec], list[str]]:
    """`training.data.load_placed_prompts` (the prompts, and where each was given) with its errors as ConfigError;
    a prompt file that is not there names the setting `field` that points at it (a config's own value otherwise
    looked like a path the user never gave)."""
    from training.data import load_placed_prompts

    try:
        return load_placed_prompts(dataset, dataset_file, "held-out" if field == "eval_dataset_file" else "training")
    except FileNotFoundError as exc:
        raise ConfigError(f"{field}: {exc} (a relative path is read from the directory the run is launched from; "
                          f"write the prompts there, or give another file with --{field} PATH or `{field}:` in "
                          "the config)") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def check_prompts(cfg: TrainConfig) -> tuple[int, int]:
    """Read the training (and held-out) prompts once before anything heavy loads; returns how many of each.
    A missing or malformed prompt file, or a prompt image that is missing or not an image, is a
    ConfigError (exit 2), like any other bad setting (a bad image used to stop the run at the first
    rollout that drew it); each problem names its prompt's place (``PATH:N``, ``dataset[i]``)."""
    from training.data import check_images

    prompts, places = _prompts(cfg.dataset, cfg.dataset_file, "dataset_file")
    held_out, held_out_places = (_prompts(cfg.eval_dataset, cfg.eval_dataset_file, "eval_dataset_file")
                                 if cfg.eval_every else ([], []))
    problems = check_images(prompts + held_out, places=places + held_out_places)
    if problems:
        raise ConfigError("bad prompt images (the first ones found):\n  - " + "\n  - ".join(problems))
    return len(prompts), len(held_out)


def launch_check(cfg: TrainConfig, agent_settings: Any, agent_tools: Any, world: int,
                 counts: tuple[int, int], tokens: dict[str, str] | None = None) -> str:
    """``--check``: every check a launch of ``cfg`` on ``world`` ranks makes before a model loads (the reward
    and its options, wandb, how the ranks split the prompts, what a resume would load), after
    `check_prompts` gave ``counts``; the resolved config and a summary, or ConfigError."""
    import yaml

    from training.best import best_needs_aligned_evals
    from training.config_checks import check_world_size
    from training.config_io import config_to_dict
    from training.resume import nothing_to_train, plan_resume, state_layout
    from training.rewards import build_reward
    from training.sampler_shift import resolve_shift
    from training.wandb_log import require_wandb

    cfg, shift_note = resolve_shift(cfg)  # as the launch will (training/run_start.py)
    try:
        build_reward(cfg.reward or "", cfg.reward_options, tokens=tokens, agent_settings=agent_settings,
                     agent_tools=agent_tools)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    require_wandb(cfg.wandb_project)
    check_world_size(cfg, world)
    layout = state_layout(cfg)
    prompts, held_out = counts
    lines = [yaml.safe_dump(config_to_dict(cfg), sort_keys=False).rstrip(),
             f"check: ok for {world} rank{'s' if world != 1 else ''} (WORLD_SIZE): {prompts} training prompts, "
             f"{held_out} held-out; reward {cfg.reward}; ZeRO stage {layout.zero_stage}, {layout.dtype}", shift_note]
    if (note := best_needs_aligned_evals(cfg)) is not None:
        lines.append(note)
    if cfg.resume:
        source, changes = plan_resume(cfg, world, layout)
        lines.append(f"resume: from {source.tag}" + (" (universal checkpoint)" if source.universal else ""))
        if (note := nothing_to_train(source.tag, cfg.max_iterations)) is not None:
            lines.append(note)
        lines += [f"  changed: {line}" for line in changes]
    return "\n".join(lines)


def exit_status(exc: BaseException) -> tuple[int, bool] | None:
    """(exit code, raised on every rank) of a training run that ended with ``exc``, None for an exception
    that is a bug rather than a reported failure (it propagates with its traceback). A failure every rank
    raises is printed by rank 0 only. ConfigError 2 (the same checks fail on every rank); StoreError 2 (the
    agent reward's trace database or stage cache; may fail on one rank only); RewardLengthError 2 (a reward
    function that returned the wrong number of rewards, named in the message: the user's error, not the
    trainer's, on the rank(s) whose clips it scored); WandbError 2 (a W&B run that cannot start, rank 0);
    ExportError 1; TrainingStopped 128 + signal (a scheduler's signal, on_signal: checkpoint);
    TrainingDiverged 1; LossScaleAtMinimum 1 (fp16 overflowing at DeepSpeed's minimum loss scale, on every rank:
    training/update.py); RewardsStalled 3 (max_skipped_iterations, after the checkpoint); PromptImagesFailed 2
    (every prompt image of an iteration unreadable, agreed by every rank: training/prompt_failures.py);
    RankFailed: the failing rank's exception's code, 1 when it has none (a held-out evaluation or a checkpoint's
    files failed on one rank, agreed by every rank: training/rank_failures.py)."""
    from graph.stores import StoreError
    from training.export import ExportError
    from training.preemption import RewardsStalled, TrainingDiverged, TrainingStopped
    from training.prompt_failures import PromptImagesFailed
    from training.rank_failures import RankFailed
    from training.reward_outcome import RewardLengthError
    from training.update import LossScaleAtMinimum
    from training.wandb_log import WandbError

    match exc:
        case ConfigError() | PromptImagesFailed():
            return 2, True
        case StoreError() | RewardLengthError() | WandbError():
            return 2, False
        case ExportError():
            return 1, False
        case TrainingStopped():
            return 128 + exc.signum, True
        case TrainingDiverged() | LossScaleAtMinimum():
            return 1, True
        case RewardsStalled():
            return 3, True
        case RankFailed():
            return exc.failure.code, True
    return None


def release_process_group(every_rank: bool) -> None:
    """Destroy the process group a run that ended with a reported failure (exit_status) leaves behind, as the
    finished run does (main then frees them: training/process_groups.py): left to interpreter teardown, gloo's
    threads now and then aborted the process after it had printed its error (``terminate called without an active
    exception``, exit -6 instead of 2). Only when
    every rank raised the same failure, or the world is one rank: a lone rank destroying its group while the
    others still wait in a collective could hang under NCCL; those ranks' launcher stops them instead."""
    import torch.distributed as dist

    if not dist.is_initialized() or not (every_rank or dist.get_world_size() == 1):
        return
    import deepspeed.comm

    deepspeed.comm.destroy_process_group()  # also drops DeepSpeed's cached group references (trainer.py)


def _quiet_dependency_warnings() -> None:
    """Hide a dependency deprecation the user cannot act on: DeepSpeed's ZeRO gathers call
    `torch.distributed.all_gather_into_tensor`, which torch 2.13 deprecates with a FutureWarning printed by
    every rank (this project never calls it). Only that message is filtered; every other warning shows."""
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.all_gather_into_tensor` is deprecated",
                            category=FutureWarning)


def main(argv: Sequence[str] | None = None) -> int:
    launcher = os.getppid()  # read first: under torchrun / deepspeed, the launcher that started this rank
    args = list(sys.argv[1:] if argv is None else argv)
    if "--help" in args or "-h" in args:
        from training.cli_help import help_text

        print(help_text(), end="")
        return 0
    check = "--check" in args
    try:
        ranks = rank_env(os.environ)  # read once, here: a bad value was a traceback in --check or the launch
        cfg = parse_cli([a for a in args if a != "--check"])
        counts = check_prompts(cfg)
        check_output_dir(cfg)  # in seconds; train() decides again, agreed by every rank (training/run_dir.py)
        check_ds_json(read_ds_config(cfg.ds_config), cfg.dtype, cfg.ds_config)  # bf16 / fp16 vs dtype; no scheduler
        import torch

        device_note = device_problem(cfg, torch.cuda.is_available())
        if device_note is not None and not check:
            raise ConfigError(device_note)
        tokens = reward_tokens(cfg)
        agent_settings = reward_settings(cfg)
        agent_tools = reward_tools(cfg)
        model_note = check_model_path(cfg)  # before any model loads: a bad folder was a traceback in every rank
        lock_note = stale_lock_note(stale_locks(extensions_root(os.environ), time.time()))  # training/build_locks.py
        if check:
            report = launch_check(cfg, agent_settings, agent_tools, ranks.world, counts, tokens)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if check:
        notes = (model_note, device_note and f"note: {device_note}", lock_note)
        print(report + "".join(f"\n{note}" for note in notes if note))
        return 0
    build_note = launch_build_note(os.environ, torch.cuda.is_available())  # DeepSpeed's CPU op, at group start
    for note in (model_note, lock_note, build_note):
        if note and ranks.rank == 0:
            print(note, file=sys.stderr, flush=True)
    launched = "RANK" in os.environ and "WORLD_SIZE" in os.environ  # set by torchrun, deepspeed, srun wrappers
    _single_process_env()
    ranks = rank_env(os.environ)  # a plain run's defaults (a lone LOCAL_RANK is replaced by 0, as it was)
    _quiet_dependency_warnings()
    if launched:  # a rank whose launcher dies stops with a checkpoint instead of training on as an orphan
        from training.preemption import follow_launcher

        follow_launcher(launcher)
    if (threads := share_cpu_threads(os.environ, os.cpu_count())) is not None:
        import torch

        torch.set_num_threads(threads)
    from training.process_groups import free_process_groups
    from training.trainer import train  # heavy imports (deepspeed, diffusers) only after validation

    try:
        out = train(cfg, local_rank=ranks.local_rank, reward_tokens=tokens,
                    reward_settings=agent_settings, reward_tools=agent_tools)
    except Exception as exc:
        if (status := exit_status(exc)) is None:
            raise
        code, every_rank = status
        release_process_group(every_rank)
        if not every_rank or ranks.rank == 0:  # raised on every rank: said once
            print(f"{'stopped' if code > 128 else 'error'}: {exc}", file=sys.stderr, flush=True)  # > 128: a signal
        return code
    finally:  # after the except clause has let go of the traceback (and the engine its frames hold)
        free_process_groups()  # gloo's threads joined now, not at interpreter teardown (exit -6)
    if ranks.rank == 0:
        print(f"done: metrics in {out / 'metrics.jsonl'}; a page of the run: python -m training.report --run {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
