"""FlowWorldModel.cpu() / .cuda() move the prompt encoders (kept outside the module tree) as .to(device) does, and
.half() / .bfloat16() / .float() / .double() cast them as .to(dtype) does; a parent module's .to() or cast
(DeepSpeed's, on its wrapper) leaves them where they are (an offloaded text encoder stays in host memory). CPU
only: a spy on the encoders' .to."""

from __future__ import annotations

import pytest
import torch

from policy.world_model import FlowWorldModel


class _Spy:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def to(self, device=None, dtype=None):  # noqa: ANN001, ANN201
        self.calls.append({"device": device, "dtype": dtype})
        return self


def _model() -> tuple[FlowWorldModel, _Spy]:
    tiny = FlowWorldModel.tiny_wan(seed=0)
    spy = _Spy()
    tiny._frozen["text_encoder"] = spy
    return tiny, spy


def test_cpu_moves_the_text_encoder_as_to_does():
    tiny, spy = _model()
    tiny.to("cpu")
    via_to = list(spy.calls)
    spy.calls.clear()
    tiny.cpu()
    assert via_to == [{"device": torch.device("cpu"), "dtype": None}]
    assert spy.calls == via_to


def test_a_parent_modules_to_leaves_the_encoders():
    tiny, spy = _model()
    torch.nn.Sequential(tiny).to("cpu")
    assert spy.calls == []


@pytest.mark.parametrize(("method", "dtype"), [("half", torch.float16), ("bfloat16", torch.bfloat16),
                                               ("double", torch.float64), ("float", torch.float32)])
def test_dtype_casts_cast_the_prompt_encoders_as_to_does(method, dtype):
    """``.half()`` / ``.bfloat16()`` / ``.float()`` / ``.double()`` cast the transformer and the VAE (``_apply``)
    but left the text and CLIP encoders in their dtype, while ``.to(dtype)`` cast them: a user's
    ``world_model.half()`` then encoded prompts in float32 weights. They now go through ``.to(dtype)``."""
    from policy.text import _HFTextEncoder

    def parts(model: FlowWorldModel) -> tuple[torch.dtype, ...]:
        return (next(model.transformer.parameters()).dtype, next(model.vae.parameters()).dtype,
                model.text_encoder.model.weight.dtype)

    done: list[tuple[tuple[torch.dtype, ...], list[dict]]] = []
    for cast in (lambda m: m.to(dtype), lambda m: getattr(m, method)()):
        tiny = FlowWorldModel.tiny_wan(seed=0)
        start = torch.float64 if dtype == torch.float32 else torch.float32  # so that float() has work to do
        tiny.to(start)
        tiny._frozen["text_encoder"] = _HFTextEncoder(None, torch.nn.Linear(2, 2).to(start))
        tiny._frozen["image_encoder"] = spy = _Spy()
        assert cast(tiny) is tiny
        done.append((parts(tiny), spy.calls))
    assert done[0] == done[1] == ((dtype, dtype, dtype), [{"device": None, "dtype": dtype}]), done


def test_a_parent_modules_dtype_cast_leaves_the_encoders():
    tiny, spy = _model()
    torch.nn.Sequential(tiny).half()
    assert spy.calls == [] and next(tiny.transformer.parameters()).dtype == torch.float16
