"""policy.checkpoint.weights_missing: a folder holding only a variant's weights (``*.fp16.safetensors``) has no
weights this repo loads (it never passes diffusers' ``variant=``); the hint names the variant file."""

from __future__ import annotations

import pytest

from policy.checkpoint import weights_missing


@pytest.mark.parametrize("name", ["diffusion_pytorch_model.fp16.safetensors", "model.bf16.bin",
                                  "diffusion_pytorch_model.fp16-00001-of-00002.safetensors"])
def test_variant_only_weights_are_missing_with_a_hint(tmp_path, name):
    part = tmp_path / "transformer"
    part.mkdir()
    (part / name).write_bytes(b"x")
    problem = weights_missing(part)
    assert problem is not None
    assert name in problem and "variant" in problem


@pytest.mark.parametrize("names", [["diffusion_pytorch_model.safetensors"],
                                   ["diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.fp16.safetensors"],
                                   ["diffusion_pytorch_model-00001-of-00002.safetensors"], ["pytorch_model.bin"]])
def test_plain_weights_count(tmp_path, names):
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    assert weights_missing(tmp_path) is None
