"""Which files a Hugging Face model folder must hold for ``from_pretrained`` to load it, and (V-JEPA 2) whether
they hold every weight of the model: `raa doctor`'s V-JEPA 2 check asks this of a local folder and of the Hugging
Face cache (moved out of graph/doctor.py, which had reached its size limit).

The weight check reads names only: the safetensors header (or the index's ``weight_map``) and the parameter names
of a ``VJEPA2Model`` built on the meta device from config.json (no memory, no weights read). The explanation is
the loader's own (`tools.surprise.missing_weights_problem`). Decision where the issue was silent: a
``pytorch_model.bin`` is checked for presence only (its names are in a pickle; V-JEPA 2 is published as
safetensors), and the loader remains the judge there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from tools.jsonl import json_text
from tools.weight_index import VJEPA_WEIGHTS, index_tensor_names, weights_problem

__all__ = ["VJEPA_WEIGHTS", "vjepa_weights_missing", "weights_problem"]


def vjepa_weights_missing(find: Callable[[str], Path | None]) -> str | None:
    """Why the V-JEPA 2 files `find` locates (all present: `weights_problem` said None) would load with weights
    left at random, in `tools.surprise.missing_weights_problem`'s words, or why their names cannot be read;
    None when every weight is there (or the weights are a pytorch_model.bin: see the module docstring)."""
    from tools.surprise import missing_weights_problem

    config = find("config.json")
    weights = find("model.safetensors") or find("model.safetensors.index.json")
    if config is None or weights is None:
        return None
    try:
        names = _safetensors_names(weights)
    except Exception as exc:  # noqa: BLE001 - what the loader would fail on, said as a problem
        return f"{weights} cannot be read as safetensors weights ({type(exc).__name__}: {exc})"
    try:
        expected = _vjepa_parameter_names(config)
    except Exception as exc:  # noqa: BLE001
        return f"{config} is not a V-JEPA 2 config ({type(exc).__name__}: {exc})"
    return missing_weights_problem({"missing_keys": _missing(expected, names, "vjepa2")})


def _safetensors_names(weights: Path) -> set[str]:
    """The tensor names of `weights`, a safetensors file (its header) or index (its ``weight_map``): no tensor is
    read."""
    if weights.name.endswith(".index.json"):
        return set(index_tensor_names(json_text(weights)))
    from safetensors import safe_open

    with safe_open(str(weights), "pt") as tensors:
        return set(tensors.keys())


def _vjepa_parameter_names(config: Path) -> set[str]:
    """The state-dict names of ``VJEPA2Model`` with the config at `config` (what ``from_pretrained`` expects),
    built on the meta device."""
    import torch
    from transformers import VJEPA2Config, VJEPA2Model

    with torch.device("meta"):
        return set(VJEPA2Model(VJEPA2Config.from_json_file(str(config))).state_dict())


def _missing(expected: set[str], names: Iterable[str], prefix: str) -> list[str]:
    """The expected names no checkpoint name loads into: a name counts as itself or, as transformers loads a
    base model from a task model's checkpoint, less its base-model `prefix` (VJEPA2Model's ``vjepa2``)."""
    given = {n.removeprefix(f"{prefix}.") if n.removeprefix(f"{prefix}.") in expected else n for n in names}
    return sorted(expected - given)
