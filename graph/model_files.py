"""Which files a Hugging Face model folder must hold for ``from_pretrained`` to load it: `raa doctor`'s V-JEPA 2
check asks this of a local folder and of the Hugging Face cache (moved out of graph/doctor.py, which had
reached its size limit)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tools.weight_index import shards_problem

# the weight files `VJEPA2Model.from_pretrained` reads, in its order (transformers.utils: SAFE_WEIGHTS_NAME,
# SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME); an index names the shards it needs
VJEPA_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def weights_problem(find: Callable[[str], Path | None]) -> str | None:
    """Why the model files `find` locates (a file name -> its path, or None) cannot be loaded, or None: a
    config.json and one weight file (an index: every shard it names, `tools.weight_index.shards_problem`)."""
    if find("config.json") is None:
        return "no config.json (a Hugging Face model folder is expected)"
    for name in VJEPA_WEIGHTS:
        path = find(name)
        if path is None:
            continue
        if not name.endswith(".index.json"):
            return None
        try:
            text = path.read_text()
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8
            return f"{path} cannot be read ({type(exc).__name__}: {exc})"
        return shards_problem(str(path), text, lambda shard: find(shard) is not None)
    return f"no weights ({', '.join(VJEPA_WEIGHTS)})"
