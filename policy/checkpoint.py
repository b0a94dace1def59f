"""Checks around ``FlowWorldModel.from_pretrained``: what a checkpoint must hold before and after diffusers loads it.

diffusers' ``from_pretrained`` does not refuse a checkpoint of another class or with weights missing: it warns
("Some weights ... were not used", "... are newly initialized") and returns a partly *random* model. A Cosmos
checkpoint loaded with ``backend="wan"`` gave a random ``WanTransformer3DModel`` that sampled and trained
without an error. A missing folder was reported as a failed hub connection, and a folder without
``transformer/config.json`` as "no file named config.json found in directory ROOT" (the root, not the part).

Decisions where the issue was silent:

* The backend is validated before anything loads (a typo used to load a whole checkpoint as Wan first).
* A local folder must hold ``<transformer_subfolder>/config.json`` and, for the parts loaded,
  ``vae/config.json``, ``text_encoder/config.json`` and a ``tokenizer/`` folder; the missing ones are named in
  one FileNotFoundError (an OSError, as diffusers' own loading errors are). Then each of those parts must hold
  its weights (`weights_missing`: a plain ``*.safetensors`` / ``*.bin`` file, not only a variant's such as
  ``*.fp16.safetensors``, which loads only with ``variant=``, or a weight index whose shards all
  exist): a part without them was "no file named diffusion_pytorch_model.bin found in directory ROOT" (the root,
  and the fallback file name), after loading the parts before it. Wan 2.1 I2V's CLIP parts
  (`clip_parts_missing`) are checked once the transformer config says they load, before its weights do.
* A path that is not a folder and cannot be a hub repo id (absolute, ``./``, ``~``; what
  ``huggingface_hub.utils.validate_repo_id`` refuses) is a FileNotFoundError with no hub request; anything
  else is left to diffusers (a hub id).
* The transformer's ``_class_name`` (read with the class's ``load_config``: a small file, before the weights)
  must be the class ``backend`` loads; missing or mismatched weights after loading (diffusers'
  ``output_loading_info``) are a ValueError naming a few of them. The weights' existence and the layout
  beyond the class are the training edge's (``training/model_check.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tools.jsonl import json_text, parsed_file
from tools.weight_index import index_shards, shards_problem

BACKEND_TRANSFORMERS = {"cosmos": "CosmosTransformer3DModel", "wan": "WanTransformer3DModel"}
"""The diffusers transformer class each backend loads."""


def check_backend(backend: object) -> None:
    """ValueError unless ``backend`` is one of ``BACKEND_TRANSFORMERS``."""
    if backend not in BACKEND_TRANSFORMERS:
        raise ValueError(f"backend must be 'cosmos' or 'wan', got {backend!r}")


def _could_be_repo_id(text: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if text.startswith((".", "~", "/")):
        return False
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def missing_parts(root: Path, *, transformer_subfolder: str = "transformer", load_vae: bool,
                  load_text_encoder: bool) -> list[str]:
    """What the local checkpoint folder ``root`` lacks for the parts loaded: each part's ``config.json`` (the file
    ``from_pretrained`` reads first) and, with the text encoder, the ``tokenizer/`` folder; [] when nothing
    (also `training.model_check`'s launch check)."""
    needed = [f"{transformer_subfolder}/config.json"]
    if load_vae:
        needed.append("vae/config.json")
    if load_text_encoder:
        needed.append("text_encoder/config.json")
    missing = [n for n in needed if not (root / n).is_file()]
    return missing + (["tokenizer/"] if load_text_encoder and not (root / "tokenizer").is_dir() else [])


WEIGHTS = ("*.safetensors", "*.bin")
"""The weight files diffusers' and transformers' ``from_pretrained`` read (sharded: a ``*.index.json``)."""

_VARIANT = re.compile(r"[^.]+\.[A-Za-z0-9_]+(-\d+-of-\d+)?\.(safetensors|bin)")
"""A variant's weight file (``diffusion_pytorch_model.fp16.safetensors``, a shard of one): read only with
``from_pretrained(..., variant=...)``, which nothing here passes."""


def weights_missing(folder: Path) -> str | None:
    """None when the part folder ``folder`` holds its weights; otherwise what is missing, named with the part
    (an index: every shard it names, `tools.weight_index.shards_problem`). Only existence is checked.

    Weights are there when no ``*.safetensors.index.json`` is incomplete (diffusers reads it before any other
    weights) and a weight index has all its shards or a plain weight file is there: both loaders read safetensors
    before a ``*.bin.index.json``, which a safetensors-only download leaves without its shards."""
    indexes = sorted(folder.glob("*.index.json"))
    problems = {index.name: _index_problem(index) for index in indexes}
    if safe := [p for name, p in problems.items() if p and name.endswith(".safetensors.index.json")]:
        return "; ".join(safe)  # read before any other weights: the load would fail on it
    if indexes and not all(problems.values()):  # a complete index: the loaders find their weights
        return None
    files = sorted(f.name for pattern in WEIGHTS for f in folder.glob(pattern) if f.is_file())
    shards = {s for index in indexes for s in _shards(index)}  # an index's shard is not a plain file
    if [name for name in files if not _VARIANT.fullmatch(name) and name not in shards]:
        return None  # a plain file, read before any .bin index (which a safetensors-only download leaves shardless)
    if indexes:
        return "; ".join(p for p in problems.values() if p)
    if files:  # only a variant's: diffusers loads them with variant= only, and the loaders here pass none
        return (f"{folder.name}/ has only a variant's weights ({files[0]}), which load only with "
                "from_pretrained(variant=...) and nothing here passes one; add the plain weight files "
                "(e.g. rename or convert them)")
    return f"{folder.name}/ has no weights (no *.safetensors or *.bin file, no *.safetensors.index.json)"


def _shards(index: Path) -> list[str]:
    """The shard files the weight index ``index`` names ([] when it cannot be read as one)."""
    try:
        return index_shards(json_text(index))
    except (OSError, ValueError):
        return []


def _index_problem(index: Path) -> str | None:
    where = f"{index.parent.name}/{index.name}"
    try:
        text = json_text(index)
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8 (`json_text`)
        return f"{where} cannot be read ({type(exc).__name__}: {exc})"
    return shards_problem(where, text, lambda shard: (index.parent / shard).is_file())


def clip_parts_missing(root: Path) -> list[str]:
    """What a local Wan 2.1 I2V folder lacks for its CLIP image encoder (`policy.wan_i2v.ClipImageEncoder`):
    ``image_encoder/config.json``, its weights (`weights_missing`) and
    ``image_processor/preprocessor_config.json``; [] when nothing."""
    missing = [n for n in ("image_encoder/config.json",) if not (root / n).is_file()]
    if (root / "image_encoder").is_dir() and (problem := weights_missing(root / "image_encoder")):
        missing.append(f"image_encoder weights ({problem})")
    return missing + [n for n in ("image_processor/preprocessor_config.json",) if not (root / n).is_file()]


def check_clip_parts(path: str | Path) -> None:
    """FileNotFoundError naming what a local folder lacks for Wan 2.1 I2V's CLIP encoder; nothing for a hub id."""
    root = Path(path).expanduser()
    if root.is_dir() and (missing := clip_parts_missing(root)):
        raise FileNotFoundError(f"checkpoint folder {str(root)!r} lacks {'; '.join(missing)} (the transformer's "
                                "image_dim is Wan 2.1 I2V's CLIP branch: image_encoder/ and image_processor/)")


def check_checkpoint_folder(path: str | Path, *, transformer_subfolder: str, load_vae: bool,
                            load_text_encoder: bool) -> None:
    """FileNotFoundError naming what a local checkpoint lacks for the parts loaded (module docstring);
    nothing for a hub id."""
    root = Path(path).expanduser()
    if not root.is_dir():
        if root.exists():
            raise NotADirectoryError(f"model path {str(path)!r} is a file, not a checkpoint folder")
        if not _could_be_repo_id(str(path)):
            raise FileNotFoundError(f"model folder {str(path)!r} does not exist (and is not a hub repo id)")
        return
    missing = missing_parts(root, transformer_subfolder=transformer_subfolder, load_vae=load_vae,
                            load_text_encoder=load_text_encoder)
    if missing:
        raise FileNotFoundError(f"checkpoint folder {str(root)!r} lacks {', '.join(missing)} "
                                "(a diffusers-layout folder: transformer/, vae/, text_encoder/, tokenizer/)")
    parts = [transformer_subfolder] + ["vae"] * load_vae + ["text_encoder"] * load_text_encoder
    if no_weights := [m for part in parts if (m := weights_missing(root / part))]:
        raise FileNotFoundError(f"checkpoint folder {str(root)!r} lacks weights: {'; '.join(no_weights)} "
                                "(a half-copied checkpoint folder? copy or download it again)")


def transformer_class_problem(config: dict[str, Any], backend: str) -> str | None:
    """Why the transformer config's ``_class_name`` is not the class ``backend`` loads, or None (also when it is
    missing: not checked). The one check and message behind `check_transformer_class` and
    `training.model_check`'s launch check."""
    name, want = config.get("_class_name"), BACKEND_TRANSFORMERS[backend]
    if not isinstance(name, str) or name == want:
        return None
    other = [b for b, c in BACKEND_TRANSFORMERS.items() if c == name]
    fix = f"use backend {other[0]!r}" if other else f"supported: {', '.join(BACKEND_TRANSFORMERS.values())}"
    return f"transformer _class_name {name} is not the {want} that backend {backend!r} loads; {fix}"


def check_transformer_class(config: dict[str, Any], backend: str, where: str) -> None:
    """ValueError (`transformer_class_problem`, after ``where``) when the transformer config's ``_class_name``
    is not the class ``backend`` loads."""
    if problem := transformer_class_problem(config, backend):
        raise ValueError(f"{where}: {problem}")


def require_all_weights(info: dict[str, list[Any]], where: str) -> None:
    """ValueError when diffusers' loading info reports parameters it found no weights for (missing, or of another
    shape): they would keep their random initialisation. Unused extra weights are not an error."""
    problems = []
    for key, what in (("missing_keys", "missing"), ("mismatched_keys", "of another shape")):
        names = sorted(str(k if isinstance(k, str) else k[0]) for k in info.get(key, []))  # transformers: sets
        if names:
            shown = ", ".join(names[:5]) + (f" (+{len(names) - 5} more)" if len(names) > 5 else "")
            problems.append(f"{len(names)} weights {what}: {shown}")
    if problems:
        raise ValueError(f"{where} does not match its model class (the rest would be random): {'; '.join(problems)}")


class CheckpointFileUnreadable(OSError):
    """A checkpoint's JSON file that may be there but could not be read (`load_checkpoint_json`)."""


class CheckpointFileUnreachable(CheckpointFileUnreadable):
    """A hub checkpoint's JSON file not in the HF cache, with the hub not reached (offline: ``HF_HUB_OFFLINE`` or
    ``local_files_only``; no connection; a timeout): nothing was read to tell whether the repo has it. Not a
    hub that answered with an error (down, access refused), nor a file that is no JSON object: those are
    `CheckpointFileUnreadable` itself."""


def load_checkpoint_json(root: str | Path, subfolder: str | None, name: str, revision: str | None,
                         load_config: Callable[..., Any]) -> dict[str, Any] | None:
    """A checkpoint's JSON file ``name`` (in ``subfolder``, or at the top) as a dict: a local folder's file, or a hub
    id's at ``revision`` through diffusers' ``load_config`` of the class that reads it (``load_config``, looked up
    when called). None when the checkpoint has no such file: a local folder without it, a hub repo that answers it
    has none (an entry 404, or offline the HF cache's record of one), a path that is neither a folder nor a
    possible hub id (the model checks name it).
    `CheckpointFileUnreachable` when the hub was not reached and the file is not in its cache;
    `CheckpointFileUnreadable`, with why, when it could not be read otherwise: the hub's error (down, access
    refused), a file that is no JSON object. Which of them a caller may go on without is its own decision."""
    folder = Path(root).expanduser()
    where = f"{root}'s {subfolder + '/' if subfolder else ''}{name}"
    try:
        if folder.is_dir():
            data = parsed_file(((folder / subfolder) if subfolder else folder).joinpath(name))
        elif not _could_be_repo_id(str(root)):
            return None
        else:
            data = load_config(str(root), **({"subfolder": subfolder} if subfolder else {}), revision=revision)
    except (OSError, ValueError) as exc:
        local = folder.is_dir()
        if _not_there(exc, local=local) or (not local and _cached_as_absent(str(root), subfolder, name, revision)):
            return None
        if not local and _hub_not_reached(exc):
            raise CheckpointFileUnreachable(f"{where} cannot be read: not in the Hugging Face cache, and the hub "
                                            f"was not reached ({_why(exc)})") from exc
        raise CheckpointFileUnreadable(f"{where} cannot be read ({_why(exc)})") from exc
    if not isinstance(data, Mapping):
        raise CheckpointFileUnreadable(f"{where} holds no JSON object")
    return dict(data)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the errors it was raised from or while handling (diffusers' ``load_config`` re-raises the
    hub's error as an OSError in its ``except``), outermost first, as Python's traceback shows them: the
    ``__cause__``, else the ``__context__`` unless suppressed (``raise ... from None`` replaced it on purpose:
    `tools.jsonl.parsed_file`'s errors for text that is not UTF-8 or a too long number read as the error replaced)."""
    seen: list[BaseException] = []
    at: BaseException | None = exc
    while at is not None and at not in seen:
        seen.append(at)
        at = at.__cause__ if at.__cause__ is not None else None if at.__suppress_context__ else at.__context__
    return seen


def _why(exc: BaseException) -> str:
    """The error at the bottom of ``exc``'s chain as "Type: text": under diffusers' OSError, the hub client's own,
    which says what happened (diffusers files every error it sees as an entry not found, "does not appear to
    have a file named ...", for a hub that answered 500 too), or the JSON decoder's."""
    last = _chain(exc)[-1]
    return f"{type(last).__name__}: {last}"


def _hub_not_reached(exc: BaseException) -> bool:
    """Whether ``exc`` (raised by diffusers' ``load_config`` for a hub id) says the file is not in the HF cache
    and the hub was not asked or did not answer: huggingface_hub's LocalEntryNotFoundError not raised from the
    hub's answer (an HfHubHTTPError: 5xx, 403; a FileMetadataError: a reply that is not the hub's), i.e. raised
    offline (``HF_HUB_OFFLINE``'s OfflineModeIsEnabled, or ``local_files_only`` with no cause) or from the HTTP
    client's connection error or timeout."""
    from huggingface_hub.errors import FileMetadataError, HfHubHTTPError, LocalEntryNotFoundError

    chain = _chain(exc)
    local = [i for i, e in enumerate(chain) if isinstance(e, LocalEntryNotFoundError)]
    return bool(local) and not any(isinstance(e, (HfHubHTTPError, FileMetadataError)) for e in chain[local[0]:])


def _not_there(exc: BaseException, *, local: bool) -> bool:
    """Whether ``exc`` (reading a local file, or raised by diffusers' ``load_config``) says the file does not
    exist: FileNotFoundError of a local file; the hub's EntryNotFoundError other than its LocalEntryNotFoundError
    (not in the cache and the hub not reached, `_hub_not_reached`)."""
    if local:
        return isinstance(exc, FileNotFoundError)
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    for seen in _chain(exc):
        if isinstance(seen, EntryNotFoundError):
            return not isinstance(seen, LocalEntryNotFoundError)
    return False


def _cached_as_absent(repo_id: str, subfolder: str | None, name: str, revision: str | None) -> bool:
    """Whether the HF cache records that hub repo ``repo_id`` at ``revision`` has no ``subfolder/name`` (the marker
    huggingface_hub writes on the hub's 404): offline, or with the hub not reached, its download raises "not in the
    cache" as for a file never fetched, yet the hub already answered there is none, as it would online."""
    from huggingface_hub import _CACHED_NO_EXIST, try_to_load_from_cache

    filename = f"{subfolder}/{name}" if subfolder else name
    try:
        return try_to_load_from_cache(repo_id, filename, revision=revision) is _CACHED_NO_EXIST
    except (OSError, ValueError):
        return False
