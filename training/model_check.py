"""Whether ``model_path`` holds what a launch loads, checked before any model loads (``--check`` and a launch).

A ``model_path`` that did not exist used to pass ``--check``; the launch then died in every rank about a
minute later with ``OSError: ... does not appear to have a file named config.json``.

`check_model_path` reads what `policy.world_model.FlowWorldModel.from_pretrained` (with
`policy.text`'s encoders) reads for the parts a launch loads (`training.models.build_world_model`):

- a local folder must hold ``transformer/config.json``, ``vae/config.json``, ``text_encoder/config.json``
  and a ``tokenizer/`` folder (``parts="transformer"``, the exporter's: the first only); the missing ones
  are named with ``model_path``;
- anything else is a hub id: fine when those files are in the Hugging Face cache (no request); otherwise
  the launch downloads them, so the hub is asked once (`tools.hub.hub_reachable`, 3 s, the probe the
  V-JEPA 2 loader uses): it answers -> a note that the launch will download it; no answer, or
  ``HF_HUB_OFFLINE`` set -> ConfigError naming ``model_path``.

A hub id is looked up at ``model_revision`` (the config's hub branch, tag or commit; None: the default
branch); a ``model_revision`` with a local folder is a ConfigError (a folder has no revisions, and
``from_pretrained`` refuses the pair, but only in every rank after the launch).

Then, for a local folder (a hub id is left as it is):

- weights: each part checked (``transformer/``, ``vae/``, ``text_encoder/``) holds a ``*.safetensors`` or
  ``*.bin`` file, or ``*.index.json`` files that are weight indexes whose shards all exist
  (`tools.weight_index`); a half-copied folder passed and the launch died after loading the parts before it.
  Missing -> ConfigError naming the part and the missing shards (a few, then a count), or the index that is
  not one (diffusers reads an index before single files), in one ConfigError with the layout problems below
  (a refused model was named only once its weights were copied). Only existence is checked, not sizes or
  contents;
- the config files above that are there but cannot be read (cut short, no JSON object: `_unreadable_configs`),
  named with the rest: they passed, and the launch failed on them in every rank;
- the transformer layout (`_layout_problems`, from ``transformer/config.json`` and ``vae/config.json``): an
  unsupported one (e.g. Wan 2.1 / 2.2 I2V-14B, ``in_channels`` 36) failed at the first transformer call,
  after loading tens of GB. Supported, read from `policy.wan.wan_velocity` / `policy.cosmos.cosmos_velocity`
  (``z`` = the VAE's ``z_dim``, the latent channels the transformer is fed): Wan TI2V ``in_channels`` =
  ``out_channels`` = ``z``, ``image_dim`` and ``added_kv_proj_dim`` null (with a CLIP image branch and no
  image embeddings, diffusers splits our text tokens into image and text context); Wan 2.1 I2V-14B
  (`policy.wan_i2v`) ``in_channels`` = ``2 z + T`` (T = the VAE's temporal factor: mask + image-latent
  channels), ``out_channels`` = ``z``; ``image_dim`` set needs ``image_encoder/config.json``, its weights and
  ``image_processor/preprocessor_config.json`` (``parts="all"``; `policy.checkpoint.clip_parts_missing`, what
  ``from_pretrained`` checks whenever ``image_dim`` is set, whatever the VAE config says; not named for a layout
  known not to be I2V-14B, refused as it is); a Wan 2.2 A14B
  two-expert folder (``transformer_2`` / ``boundary_ratio`` in ``model_index.json``), or its expert layout
  without ``image_dim`` (one expert, no ``model_index.json``; judged from the transformer config alone, as the
  loader does), is refused (`policy.wan_i2v.two_expert_problem` / ``expert_layout_problem``), and so is a
  text-to-video one (Wan 2.1 T2V: the TI2V layout with a ``model_index.json`` lacking ``expand_timesteps`` true,
  `policy.wan_i2v.text_to_video_problem`); Cosmos ``out_channels`` = ``z``, ``in_channels`` =
  ``z + 1`` (condition mask; ``concat_padding_mask`` true: diffusers appends the padding mask, which needs
  torchvision) or, with ``concat_padding_mask`` false, ``z + 2`` (`cosmos_velocity` appends it); the
  ``_class_name`` the backend loads (`policy.checkpoint.transformer_class_problem`). A field that is missing or
  unreadable is not checked (no guess), except a Wan channel count: WanTransformer3DModel's default
  (`policy.shapes.wan_channels`), and a Wan ``model_index.json`` that is there but cannot be read (cut short,
  no JSON object), which the loader refuses (`policy.wan_i2v.read_model_index`): named with the folder's other
  layout problems, the rest then judged as without an index.

Decisions where the issue was silent: a string that is not a valid repo id and not a folder (an absolute
path that does not exist) is an error without a request; the tokenizer folder's files are the loader's.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

from policy.checkpoint import (
    CheckpointFileUnreadable,
    clip_parts_missing,
    load_checkpoint_json,
    missing_parts,
    transformer_class_problem,
    weights_missing,
)
from policy.shapes import vae_compression, wan_channels
from policy.wan_i2v import expert_layout_problem, read_model_index, text_to_video_problem, two_expert_problem
from tools.jsonl import parsed_file
from training.config import ConfigError, TrainConfig

TRANSFORMER = "transformer/config.json"
WHOLE = (TRANSFORMER, "vae/config.json", "text_encoder/config.json")
"""The files ``from_pretrained`` reads first, per part (the tokenizer folder is checked apart)."""


def _needed(parts: Literal["all", "transformer"]) -> tuple[str, ...]:
    return WHOLE if parts == "all" else (TRANSFORMER,)


def _folder_missing(root: Path, parts: Literal["all", "transformer"]) -> list[str]:
    whole = parts == "all"  # the VAE and the text encoder load with the transformer (training.models)
    return missing_parts(root, load_vae=whole, load_text_encoder=whole)


def _json(path: Path) -> dict:
    """The file's JSON object; {} when it is missing or unreadable (not checked here: `_unreadable_configs`)."""
    try:
        data = parsed_file(path)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _unreadable_configs(root: Path, parts: Literal["all", "transformer"]) -> list[str]:
    """The config files the loader reads (`_needed`) that are there but cannot be read (cut short, no JSON
    object): the launch failed on them in every rank after its start; the layout checks skip them."""
    def no_hub(*_args: object, **_kwargs: object) -> None:  # a local folder's files only (never called)
        raise AssertionError("read a local folder's config through the hub")

    problems = []
    for name in _needed(parts):
        try:
            load_checkpoint_json(root, str(Path(name).parent), Path(name).name, None, no_hub)
        except CheckpointFileUnreadable as exc:
            problems.append(str(exc))
    return problems


def _int(config: dict, key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _has_torchvision() -> bool:
    return importlib.util.find_spec("torchvision") is not None


def _vae_temporal(vae: dict) -> int | None:
    """The VAE's temporal compression (`policy.shapes.vae_compression`), None when unreadable."""
    if not vae or not isinstance(vae.get("temperal_downsample", []), list) or not isinstance(vae.get("dim_mult", []), list):
        return None
    return vae_compression(vae)[0]


def _layout_problems(root: Path, backend: str, parts: Literal["all", "transformer"] = "all") -> list[str]:
    """The transformer config values ``backend`` cannot run (see the module docstring); [] when none is known."""
    tr = _json(root / TRANSFORMER)
    if wrong_class := transformer_class_problem(tr, backend):
        return [wrong_class]
    z = _int(_json(root / "vae" / "config.json"), "z_dim")
    # an unreadable config ({}) is not checked; a Wan one is read as WanTransformer3DModel builds it
    c_in, c_out = wan_channels(tr) if backend == "wan" and tr else (_int(tr, "in_channels"), _int(tr, "out_channels"))
    problems = []
    if backend == "wan":
        t = _vae_temporal(_json(root / "vae" / "config.json"))
        i2v = z is not None and t is not None and c_in == 2 * z + t
        try:
            index = read_model_index(root)
        except CheckpointFileUnreadable as exc:  # the loader stops on it; named with the folder's other problems
            problems.append(str(exc))
            index = {}
        # as the loader judges them (policy.world_model), the expert layout from the transformer config alone: with
        # i2v's VAE check too, an unreadable z_dim passed --check and every rank's load refused the folder
        if two := two_expert_problem(index, root) or expert_layout_problem(tr):
            problems.append(two)
        elif t2v := text_to_video_problem(index, tr):
            problems.append(t2v)
        not_i2v = not i2v and z is not None and t is not None  # known: not guessed without z_dim and the factor
        for key, what in (("image_dim", "CLIP image embeddings"), ("added_kv_proj_dim", "image cross-attention")):
            if tr.get(key) is not None and not_i2v:
                problems.append(f"transformer {key} {tr[key]} (Wan 2.1 I2V: {what}) is not supported without the "
                                f"I2V-14B channel layout (in_channels = 2 x VAE z_dim + {t} mask channels)")
        # whenever image_dim is set, as from_pretrained checks before it loads (policy.checkpoint): with i2v's VAE
        # check too, an unreadable z_dim passed --check and every rank's load refused the folder; not for a layout
        # refused above (its CLIP parts were one more fix that would not make it run)
        if tr.get("image_dim") is not None and parts == "all" and not not_i2v:
            problems += [f"transformer image_dim {tr['image_dim']} (Wan 2.1 I2V's CLIP branch) needs {n}" for n in
                         clip_parts_missing(root)]
        if z is not None and c_in is not None and c_in != z and not i2v:
            problems.append(f"transformer in_channels {c_in} is not supported; this trainer runs the TI2V layout "
                            f"(in_channels = VAE z_dim {z}) or the I2V-14B one (2 x z_dim + {t} mask channels)")
    else:
        pad = tr.get("concat_padding_mask")
        if z is not None and c_in is not None:
            fits = [z + 1] if pad is True else [z + 1, z + 2]  # unset: whichever diffusers' default is
            if c_in not in fits:
                extra = " + the padding mask this trainer appends" if pad is False else ""
                problems.append(f"transformer in_channels {c_in} (concat_padding_mask {pad}) is not supported; this "
                                f"trainer feeds the VAE latent (z_dim {z}) + 1 condition-mask channel{extra}: "
                                f"in_channels {' or '.join(map(str, fits))}")
        if pad is True and not _has_torchvision():
            problems.append("transformer concat_padding_mask true needs torchvision (diffusers resizes the padding "
                            "mask with it) and it is not installed: pip install torchvision")
    if z is not None and c_out is not None and c_out != z:
        problems.append(f"transformer out_channels {c_out} is not supported; the velocity is in the VAE latent "
                        f"(out_channels = VAE z_dim {z})")
    return problems


def check_model_path(cfg: TrainConfig, parts: Literal["all", "transformer"] = "all") -> str | None:
    """ConfigError when ``cfg.model_path`` cannot give the model a launch loads (see the module docstring);
    otherwise None, or a note (the launch will download the model from the hub). Nothing for ``tiny``."""
    if cfg.tiny or not cfg.model_path:
        return None  # tiny builds its model; a missing model_path is the config's own error
    path = cfg.model_path
    root = Path(path).expanduser()
    if root.is_dir():
        if cfg.model_revision is not None:  # from_pretrained refuses it too, but in every rank after start
            raise ConfigError(f"model_revision {cfg.model_revision!r} is for a hub id, but model_path {path} is a "
                              "local folder, which has no revisions: remove model_revision (download a "
                              "revision with `hf download ID --revision REV --local-dir FOLDER`)")
        missing = _folder_missing(root, parts)
        if missing:
            raise ConfigError(f"model_path {path}: missing {', '.join(missing)} (a diffusers-layout checkpoint "
                              "folder is expected: transformer/, vae/, text_encoder/ and tokenizer/; see the "
                              "config's comments for the download command)")
        no_weights = [m for name in _needed(parts) if (m := weights_missing(root / Path(name).parent))]
        problems = [f"missing weights: {'; '.join(no_weights)} (a half-copied checkpoint folder? copy or download "
                    "it again)"] if no_weights else []
        # with the layout's: a refused model was named only once its missing weights were copied
        if problems := problems + _unreadable_configs(root, parts) + _layout_problems(root, cfg.backend, parts):
            raise ConfigError(f"model_path {path}: " + "; ".join(problems))
        return None
    if root.exists():
        raise ConfigError(f"model_path {path} is a file; a diffusers-layout checkpoint folder or a hub id is expected")
    from huggingface_hub.utils import HFValidationError

    from tools.hub import cached_file, download_blocked

    try:
        cached = [cached_file(path, name, cfg.model_revision) is not None for name in _needed(parts)]
    except HFValidationError:
        raise ConfigError(f"model_path {path} is not a folder (checked from {Path.cwd()}) and not a hub id") from None
    if all(cached):
        return None
    at = f" at revision {cfg.model_revision!r}" if cfg.model_revision is not None else ""
    where = f"not a folder (checked from {Path.cwd()}), not in the Hugging Face cache{at}"
    if blocked := download_blocked():
        raise ConfigError(f"model_path {path} is {where}, and {blocked}: download the checkpoint and point "
                          "model_path at the folder")
    return (f"note: model_path {path} is {where}: the launch downloads it from the hub (if it is meant to be a "
            "folder, it does not exist)")
