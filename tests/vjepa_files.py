"""A tiny V-JEPA 2 model (`tiny_vjepa2`: the surprise and tool-service tests' scorer), and saved as
``save_pretrained`` writes it, optionally without some of its weights (an encoder-only export): what `raa doctor`'s
V-JEPA 2 check and the surprise loader are given in tests."""

from __future__ import annotations

from pathlib import Path


def tiny_vjepa2(layers: int = 2, *, drawn_mask_tokens: bool = True):
    """A randomly initialised V-JEPA 2 in eval mode, the same for the same arguments (torch seed 0): 32-pixel
    crops, 16 frames a clip, hidden size 48, ``layers`` encoder and predictor layers. ``drawn_mask_tokens``: its
    predictor's mask tokens drawn from N(0, 0.02) instead of zeros, so the predictor's output depends on its
    inputs richly."""
    import torch
    from transformers import VJEPA2Config, VJEPA2Model

    torch.manual_seed(0)
    cfg = VJEPA2Config(crop_size=32, patch_size=16, frames_per_clip=16, tubelet_size=2, hidden_size=48,
                       num_attention_heads=2, num_hidden_layers=layers, pred_hidden_size=48,
                       pred_num_attention_heads=2, pred_num_hidden_layers=layers, num_pooler_layers=1)
    model = VJEPA2Model(cfg).eval()
    if drawn_mask_tokens:
        with torch.no_grad():
            model.predictor.embeddings.mask_tokens.normal_(0, 0.02)
    return model


def save_tiny_vjepa(folder: Path, *, drop_prefix: str | None = None) -> Path:
    """`tiny_vjepa2` saved to ``folder`` (config.json, model.safetensors), less the weights
    whose names start with ``drop_prefix`` (e.g. "predictor.")."""
    from safetensors.torch import load_file, save_file

    tiny_vjepa2().save_pretrained(folder)
    if drop_prefix is not None:
        weights = load_file(folder / "model.safetensors")
        save_file({k: v for k, v in weights.items() if not k.startswith(drop_prefix)},
                  folder / "model.safetensors", metadata={"format": "pt"})
    return folder
