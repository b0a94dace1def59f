"""Sharded Hugging Face weights: the shards a weight index (``*.index.json``) names, and which of them are missing.
The one reading behind `raa doctor`'s V-JEPA 2 check and the surprise loader (`weights_problem`) and the training
launch check (`training.model_check`, through `policy.checkpoint.weights_missing`, which
`FlowWorldModel.from_pretrained` runs too), which had each written it and differed on a broken index (the launch
check skipped it, and passed a folder the loader then failed on).

The shards are read as diffusers' and transformers' loaders read them: the distinct values of the index's
``weight_map``. Decision where they are silent: an index that names no shard (an empty ``weight_map``) is not a
weight index here, since loading it would leave every weight at its random initialisation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tools.jsonl import json_text


def index_shards(text: str) -> list[str]:
    """The shard files (sorted, each once) the weight index ``text`` names; ValueError saying why when the text
    is not such an index (not JSON, no ``weight_map`` object, a shard that is not a file name, no shard)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict):
        raise ValueError("no weight_map object")
    shards = set(weight_map.values())
    if not all(isinstance(s, str) and s for s in shards):
        raise ValueError("a weight_map value is not a file name")
    if not shards:
        raise ValueError("its weight_map names no shard")
    return sorted(shards)


def index_tensor_names(text: str) -> list[str]:
    """The tensor names (the ``weight_map`` keys) of the weight index ``text``; ValueError as `index_shards`."""
    index_shards(text)  # refuses what is not a weight index
    return sorted(json.loads(text)["weight_map"])


def _few(names: list[str], few: int = 3) -> str:
    more = f" and {len(names) - few} more" if len(names) > few else ""
    return ", ".join(names[:few]) + more


def shards_problem(where: str, text: str, exists: Callable[[str], bool]) -> str | None:
    """Why the weights of the index ``text`` (named ``where`` in the answer) cannot be loaded, or None:
    `index_shards` refuses it, or shards it names are missing (``exists``: a shard name -> whether it is there;
    a few named, then a count)."""
    try:
        shards = index_shards(text)
    except ValueError as exc:
        return f"{where} is not a weight index ({exc})"
    lost = [s for s in shards if not exists(s)]
    return f"{where} names {len(lost)} of {len(shards)} shards that are missing: {_few(lost)}" if lost else None


# the weight files `VJEPA2Model.from_pretrained` reads, in its order (transformers.utils: SAFE_WEIGHTS_NAME,
# SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME); an index names the shards it needs
VJEPA_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def weights_problem(find: Callable[[str], Path | None]) -> str | None:
    """Why the model files `find` locates (a file name -> its path, or None) cannot be loaded, or None: a
    config.json and one weight file (an index: every shard it names, `shards_problem`)."""
    if find("config.json") is None:
        return "no config.json (a Hugging Face model folder is expected)"
    for name in VJEPA_WEIGHTS:
        path = find(name)
        if path is None:
            continue
        if not name.endswith(".index.json"):
            return None
        try:
            text = json_text(path)
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8 (`json_text`)
            return f"{path} cannot be read ({type(exc).__name__}: {exc})"
        return shards_problem(str(path), text, lambda shard: find(shard) is not None)
    return f"no weights ({', '.join(VJEPA_WEIGHTS)})"


def folder_weights_problem(folder: str | Path) -> str | None:
    """`weights_problem` of the files in local model folder ``folder``: what the surprise loader says before
    transformers is asked (without config.json transformers built its default config and failed on the first
    weight of another size, never naming the file)."""
    root = Path(folder)

    def here(name: str) -> Path | None:
        return root / name if (root / name).is_file() else None

    return weights_problem(here)
