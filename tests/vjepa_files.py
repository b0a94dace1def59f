"""A tiny V-JEPA 2 model saved as ``save_pretrained`` writes it, optionally without some of its weights (an
encoder-only export): what `raa doctor`'s V-JEPA 2 check and the surprise loader are given in tests."""

from __future__ import annotations

from pathlib import Path


def save_tiny_vjepa(folder: Path, *, drop_prefix: str | None = None) -> Path:
    """`tests.test_surprise.tiny_model` saved to ``folder`` (config.json, model.safetensors), less the weights
    whose names start with ``drop_prefix`` (e.g. "predictor.")."""
    from safetensors.torch import load_file, save_file

    from tests.test_surprise import tiny_model

    tiny_model().save_pretrained(folder)
    if drop_prefix is not None:
        weights = load_file(folder / "model.safetensors")
        save_file({k: v for k, v in weights.items() if not k.startswith(drop_prefix)},
                  folder / "model.safetensors", metadata={"format": "pt"})
    return folder
