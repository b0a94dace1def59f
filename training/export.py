"""The trained policy out of a DeepSpeed checkpoint, in the formats peft and diffusers load, and back.

DeepSpeed checkpoints hold ZeRO shards that only a DeepSpeed engine reads. ``export_policy``
consolidates one with DeepSpeed's own ``get_fp32_state_dict_from_zero_checkpoint`` (ZeRO-1, -2 or -3,
written by any number of ranks; on CPU, no process group), or reads a ZeRO stage-0 checkpoint's single
module file, and writes::

    OUT/export.json           format, finetune mode, iteration, source checkpoint and the run's TrainConfig
    OUT/transformer_lora/     finetune: lora -> the peft adapter (adapter_config.json, adapter_model.safetensors)
    OUT/transformer/          finetune: full -> the transformer in diffusers layout, in the run's dtype

``load_policy(OUT)`` rebuilds the base model the run started from (``training.models``) and applies
the trained weights (a full export's transformer is loaded instead of the base's, which was read and thrown
away); ``weights="base"`` returns the untouched base, for paired before/after samples
(training/generate.py). The trainer exports its last checkpoint to ``output_dir/final`` at the end
of a run (``TrainConfig.export``); ``python -m training.export --run DIR [--tag iter_000010]``
exports any checkpoint of a run afterwards. The export folder itself (export.json, writing it in place,
reading it back) is training/export_folder.py.

Decisions where the issue was silent:

* Only the transformer is exported. Training never changes the VAE or the text encoder, so they stay
  in the base model (``model_path``), which export.json names; a LoRA export is megabytes.
* LoRA adapters keep float32 (DeepSpeed's master weights); a full transformer is saved in the run's
  dtype. A ZeRO stage-0 checkpoint is read from its module file, which holds the weights in the run's
  dtype: a bfloat16 stage-0 LoRA run exports its adapters as those bf16 values, not the fp32 masters.
  ``load_policy`` merges the adapter into the transformer (``merge_and_unload``): sampling then costs
  what the base costs. In a bfloat16 / float16 run it keeps the adapter beside the base weights, as the
  engine computed it: merged weights are rounded to the run's dtype once more, and the samples then
  differed from the training's held-out samples of the same checkpoint by up to 5 pixel levels.
* ``load_policy`` samples in the numerics of the run's DeepSpeed engine (training/numerics.py): in a
  bfloat16 (or float16) run the modules diffusers keeps in float32 (Wan's time embedder, norms,
  modulation tables) are cast to the run's dtype, and after a ZeRO-3 run the linear layers compute
  as ZeRO-3's, for ``weights="trained"`` and ``"base"`` alike, so the training's held-out samples are
  reproduced from the export and trained-vs-base pairs differ by training only. The export files keep
  those modules in float32 (DeepSpeed's master weights), as diffusers saves them.
* The consolidated weights must name every trainable parameter of the config's model, and nothing the
  model lacks: a checkpoint of another config is an ExportError naming the first mismatches, never a
  partial load. ``load_policy`` likewise refuses an export folder lacking weights (ExportError naming them):
  diffusers left a full transformer's missing weight on the meta device (a NotImplementedError at ``.to``),
  and peft only warned about a missing adapter weight, which then stayed at its initialisation (the base).
* A checkpoint is exported in the dtype it was trained in, which its ``layout.json`` records
  (training/resume.py), not the dtype of the config handed in: a run's ``config.yaml`` is its last launch's,
  and a launch that changed ``dtype`` on a resume (through the universal form) may have died before its first
  checkpoint, or the checkpoint exported (``--tag``) may be from before the change. The export would then
  have saved and sampled a float32-trained transformer in bfloat16 (or the reverse). export.json's config
  carries the checkpoint's dtype; a checkpoint without ``layout.json`` keeps the config's.
* With DeepSpeed's node-local checkpoint storage a node's folder holds only its own ranks' shard files: a
  folder with fewer (or more) than the ranks its ``layout.json`` records is refused by name
  (``training.resume.incomplete_copy``): DeepSpeed's merge said only that it expected another number of
  ``*_optim_states.pt`` files, "possibly due to an overwrite", naming neither cause nor remedy. So is a save
  killed part-way, or a universal conversion (``training.run_dir.not_exportable``): each read as stage 0.
"""

from __future__ import annotations

import pickle
import re
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import torch

from policy.checkpoint import BACKEND_TRANSFORMERS, require_all_weights
from policy.world_model import FlowWorldModel
from training.config import TrainConfig, is_dtype
from training.engine import latest_tag, plain_tag
from training.export_folder import ExportError, check_prompt_file, read_export, save_policy
from training.models import DTYPES, build_world_model
from training.numerics import like_engine
from training.run_dir import checkpoint_tags

_PREFIX = "world_model.transformer."  # parameter names in the engine's module (training.engine.PolicyStep)


def checkpoint_tag(checkpoint_dir: Path, tag: str | None = None) -> str:
    """The checkpoint tag to export: `tag`, or the one DeepSpeed's `latest` file names."""
    if not checkpoint_dir.is_dir():
        raise ExportError(f"no checkpoint folder at {checkpoint_dir}")
    if tag is None:
        tag = latest_tag(checkpoint_dir)
        if tag is None:
            raise ExportError(f"{checkpoint_dir} has no 'latest' file; pass a tag (one of "
                              f"{sorted(p.name for p in checkpoint_dir.iterdir() if p.is_dir())})")
        if not plain_tag(tag):  # read as the checkpoint folder itself, or one outside it
            raise ExportError(f"{checkpoint_dir}'s 'latest' is empty or does not name a checkpoint folder ({tag!r}); "
                              f"pass a tag (saved: {', '.join(checkpoint_tags(checkpoint_dir)[-8:]) or 'none'})")
    if not plain_tag(tag):
        raise ExportError(f"{tag!r} is not a checkpoint tag (a folder name in {checkpoint_dir}, e.g. iter_000010)")
    if not (checkpoint_dir / tag).is_dir():
        saved = checkpoint_tags(checkpoint_dir)
        raise ExportError(f"no checkpoint {tag!r} in {checkpoint_dir}; saved: "
                          + (", ".join(saved[-8:]) + (" ..." if len(saved) > 8 else "") if saved else "none"))
    return tag


def consolidate(checkpoint_dir: Path, tag: str) -> dict[str, torch.Tensor]:
    """float32 trained weights of the transformer (names as in `world_model.transformer.state_dict()`)
    from a ZeRO checkpoint, merged over ranks by DeepSpeed. Frozen weights (the LoRA base) are left
    out: they equal the base model's, which the exporter loads anyway."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    from training.engine import checkpoint_ranks
    from training.resume import incomplete_copy
    from training.run_dir import not_exportable

    folder = checkpoint_dir / tag
    if problem := not_exportable(checkpoint_dir, tag) or incomplete_copy(folder):  # by name; one node's share
        raise ExportError(problem)
    try:
        if checkpoint_ranks(folder) == 0:  # ZeRO stage 0: one file holds the whole module
            state = _stage0_module(folder)
        else:
            state = get_fp32_state_dict_from_zero_checkpoint(str(checkpoint_dir), tag=tag,
                                                             exclude_frozen_parameters=True)
    except (OSError, ValueError, KeyError, RuntimeError, EOFError, pickle.UnpicklingError) as exc:
        # RuntimeError: torch.load of a truncated or corrupt file ("PytorchStreamReader failed reading zip archive")
        raise ExportError(f"cannot read checkpoint {folder}: {type(exc).__name__}: {exc}") from exc
    return {k[len(_PREFIX):]: v for k, v in state.items() if k.startswith(_PREFIX)}


def _stage0_module(folder: Path) -> dict[str, torch.Tensor]:
    """The module weights of a ZeRO stage-0 checkpoint (no ZeRO shards: DeepSpeed saves the module whole,
    frozen weights included, in the run's dtype), as float32."""
    path = folder / "mp_rank_00_model_states.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    # DeepSpeed pickles its own objects next to the tensors, so weights_only would refuse the file; a checkpoint
    # is trusted as much as the code that trained it.
    module = torch.load(path, map_location="cpu", weights_only=False)["module"]
    return {k: v.float() for k, v in module.items()}


def apply_weights(world_model: FlowWorldModel, state: dict[str, torch.Tensor]) -> None:
    """Load trained transformer weights; ExportError unless they cover every trainable parameter of
    the model and name nothing it lacks."""
    own = world_model.transformer.state_dict()
    trainable = [n for n, p in world_model.transformer.named_parameters() if p.requires_grad]
    missing = [n for n in trainable if n not in state]
    unknown = [n for n in state if n not in own]
    wrong = [n for n in state if n in own and own[n].shape != state[n].shape]
    if missing or unknown or wrong:
        parts = [f"{label} ({len(names)}): {names[:3]}" for label, names in
                 (("missing trainable weights", missing), ("unknown names", unknown), ("shape mismatches", wrong))
                 if names]
        raise ExportError("the checkpoint does not match this config's model: " + "; ".join(parts))
    with torch.no_grad():
        for name, value in state.items():
            own[name].copy_(value.to(own[name].dtype))


def export_policy(cfg: TrainConfig, out: Path, *, checkpoint_dir: Path | None = None,
                  tag: str | None = None) -> Path:
    """Export checkpoint `tag` (default: the latest) of the run `cfg` describes to `out`."""
    from training.engine import add_lora, set_full_finetune

    check_prompt_file(cfg)  # before the checkpoint and the base model load
    checkpoint_dir = Path(checkpoint_dir or Path(cfg.output_dir) / "checkpoints")
    tag = checkpoint_tag(checkpoint_dir, tag)
    cfg = trained_dtype(cfg, checkpoint_dir / tag)
    state = consolidate(checkpoint_dir, tag)
    world_model = _base(cfg, "transformer")
    if cfg.finetune == "lora":
        add_lora(world_model, cfg)
    else:
        set_full_finetune(world_model)
    apply_weights(world_model, state)
    match = re.fullmatch(r"iter_(\d+)", tag)
    return save_policy(world_model, cfg, out, iteration=int(match.group(1)) if match else None,
                       source=str((checkpoint_dir / tag).resolve()))


def trained_dtype(cfg: TrainConfig, folder: Path) -> TrainConfig:
    """``cfg`` with the dtype the checkpoint ``folder`` was trained in (its ``layout.json``; module docstring),
    saying so on stderr when that differs; ``cfg`` itself for a folder without the file."""
    from training.resume import read_layout

    written = read_layout(folder)
    if written is None or written.dtype == cfg.dtype or not is_dtype(written.dtype):
        return cfg
    print(f"note: {folder.name} was trained in {written.dtype} (its layout.json), not the config's {cfg.dtype}: "
          f"exported in {written.dtype}", file=sys.stderr)
    return replace(cfg, dtype=written.dtype)


def _base(cfg: TrainConfig, parts: Literal["all", "transformer"],
          transformer: torch.nn.Module | None = None) -> FlowWorldModel:
    """The run's base model on CPU (with ``transformer`` in place of its own: `build_world_model`); ExportError
    naming `model_path` when it cannot be loaded."""
    try:
        return build_world_model(cfg, "cpu", parts=parts, transformer=transformer)
    except (OSError, ValueError) as exc:  # no such folder, missing files, hub unreachable; a checkpoint of
        # another class or with weights missing (policy/checkpoint.py)
        raise ExportError(f"cannot load the base model at model_path {cfg.model_path!r} (the weights training "
                          f"started from, needed beside the trained ones): {exc}") from exc


def load_policy(path: str | Path, device: torch.device | str = "cpu",
                weights: Literal["trained", "base"] = "trained") -> tuple[FlowWorldModel, dict[str, Any], TrainConfig]:
    """(the policy in eval mode, export.json, the run's TrainConfig). `weights="base"` skips the trained
    weights: the model the run started from. Both in the numerics of the run's DeepSpeed engine
    (training/numerics.py)."""
    info, cfg = read_export(path)
    folder = Path(path) / info["weights"]
    transformer = None  # a full export's transformer replaces the base one, which is then not loaded
    if weights == "trained" and info["finetune"] == "full":
        import diffusers

        cls = getattr(diffusers, BACKEND_TRANSFORMERS[cfg.backend])
        transformer, loading = cls.from_pretrained(str(folder), torch_dtype=DTYPES[cfg.dtype],
                                                   output_loading_info=True)
        _require(lambda: require_all_weights(loading, str(folder)))
    world_model = _base(cfg, "all", transformer)
    if weights == "trained" and info["finetune"] == "lora":
        from peft import PeftModel

        lora = PeftModel.from_pretrained(world_model.transformer, str(folder))
        _require_adapter(lora, folder)
        # merged W + BA is rounded to bf16 once more than the engine's separate adapter pass
        world_model.transformer = lora if cfg.dtype != "float32" else lora.merge_and_unload()
    like_engine(world_model, cfg)  # the numerics the run trained and evaluated in (training/numerics.py)
    return world_model.to(device=device).eval(), info, cfg


def _require(check: Callable[[], None]) -> None:
    """``check()``, its ValueError as an ExportError (the message names the folder and the weights)."""
    try:
        check()
    except ValueError as exc:
        raise ExportError(str(exc)) from None


def _require_adapter(lora: Any, folder: Path) -> None:
    """ExportError when the adapter file lacks weights of the adapter its config builds: peft only warns, and the
    missing ones keep their initialisation (B = 0: that adapter is the base model's layer)."""
    from peft.utils import get_peft_model_state_dict, load_peft_weights

    saved = load_peft_weights(str(folder), device="cpu")
    missing = sorted(set(get_peft_model_state_dict(lora)) - set(saved))
    _require(lambda: require_all_weights({"missing_keys": missing}, str(folder)))


def main(argv: list[str] | None = None) -> int:
    """``python -m training.export --run RUN_DIR [--tag iter_000010 | best | latest] [--out DIR] [--config FILE]``."""
    import argparse

    from training.config import ConfigError
    from training.config_io import load_config, read_run_config
    from training.export_tags import resolve_tag

    parser = argparse.ArgumentParser(prog="python -m training.export",
                                     description="Export a DynDiff-GRPO checkpoint as peft / diffusers weights.")
    parser.add_argument("--run", required=True, type=Path, help="the run's output_dir (checkpoints/, config.yaml)")
    parser.add_argument("--tag", help="checkpoint tag, e.g. iter_000010; best: the best held-out reward in "
                                      "RUN/eval.jsonl that has a checkpoint; latest: the one RUN/checkpoints/latest "
                                      "names (default: the latest, into RUN/final)")
    parser.add_argument("--out", type=Path, help="export folder (default: RUN/final, or RUN/export-TAG with --tag)")
    parser.add_argument("--config", type=Path, help="the run's YAML config (default: RUN/config.yaml)")
    args = parser.parse_args(argv)
    try:  # the run's own config.yaml was saved by the trainer: read as trained (config_io.read_run_config)
        cfg = load_config(args.config) if args.config else read_run_config(args.run / "config.yaml")
        args.tag = resolve_tag(args.run, args.tag)  # best / latest -> the saved tag (training/export_tags.py)
        out = args.out or args.run / ("final" if args.tag is None else f"export-{args.tag}")
        out = export_policy(cfg, out, checkpoint_dir=args.run / "checkpoints", tag=args.tag)
    except (ConfigError, ExportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file the steps above read or write (the message names it): bad input
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"policy exported to {out}")
    return 0


if __name__ == "__main__":
    # main of the imported module: training/export_tags.py raises training.export.ExportError, a class this
    # `__main__` copy of the module does not catch as its own
    from training.export import main as module_main

    raise SystemExit(module_main())
