"""FlowWorldModel.cpu() / .cuda() move the prompt encoders (kept outside the module tree) as .to(device) does, and
.half() / .bfloat16() / .float() / .double() cast them as .to(dtype) does; a parent module's .to() or cast
(DeepSpeed's, on its wrapper) leaves them where they are (an offloaded text encoder stays in host memory). The movers
FrozenHelpersModule did not override (``.to_empty()``, ``.type()``, ``.xpu()`` / ``.mtia()`` / ``.ipu()``) go
through ``_apply``, which carries the VAE but not the prompt encoders (policy/frozen.py): they are covered too. CPU
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


def test_to_empty_gives_the_transformer_fresh_storage_but_keeps_the_frozen_vae_weights():
    """Before: ``to_empty`` (meta-device initialisation: the trainable tree gets storage, then weights loaded)
    replaced the pretrained VAE's weights with uninitialised memory through ``_apply``, and every video decoded
    afterwards was noise; the prompt encoders did not move. Now the VAE and the encoders move as ``.to(device)``
    moves them, their weights kept."""
    tiny = FlowWorldModel.tiny_wan(seed=0)
    tiny._frozen["text_encoder"] = spy = _Spy()
    before = {k: v.clone() for k, v in tiny.vae.state_dict().items()}
    assert tiny.to_empty(device="cpu") is tiny
    after = tiny.vae.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert spy.calls == [{"device": torch.device("cpu"), "dtype": None}]


def test_type_casts_the_prompt_encoders_as_to_does():
    """Before: ``.type(torch.float16)`` cast the transformer and the VAE but left the text and CLIP encoders in
    float32, unlike ``.to(torch.float16)``."""
    from policy.text import _HFTextEncoder

    tiny = FlowWorldModel.tiny_wan(seed=0)
    tiny._frozen["text_encoder"] = _HFTextEncoder(None, torch.nn.Linear(2, 2))
    tiny._frozen["image_encoder"] = spy = _Spy()
    assert tiny.type(torch.float16) is tiny
    assert next(tiny.transformer.parameters()).dtype == torch.float16
    assert next(tiny.vae.parameters()).dtype == torch.float16
    assert tiny.text_encoder.model.weight.dtype == torch.float16
    assert spy.calls == [{"device": None, "dtype": torch.float16}]


def test_type_with_a_tensor_type_name_is_refused():
    tiny = FlowWorldModel.tiny_wan(seed=0)
    with pytest.raises(TypeError, match=r"takes a torch.dtype"):
        tiny.type("torch.HalfTensor")


@pytest.mark.parametrize(("method", "device", "expected"), [
    ("xpu", None, torch.device("xpu")), ("xpu", 1, torch.device("xpu", 1)), ("mtia", 0, torch.device("mtia", 0)),
    ("ipu", torch.device("ipu", 2), torch.device("ipu", 2))])
def test_accelerator_moves_move_the_prompt_encoders(monkeypatch, method, device, expected):
    """Before: ``.xpu()`` / ``.mtia()`` / ``.ipu()`` moved the transformer and the VAE only (``_apply``): prompts
    were then encoded on another device than the model's. They now go through ``.to(device)`` as ``.cuda()`` does.
    CPU only: nn.Module.to is stubbed, so what is checked is where the encoders are sent."""
    tiny = FlowWorldModel.tiny_wan(seed=0)
    tiny._frozen["text_encoder"] = spy = _Spy()
    moved: list[tuple] = []
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: moved.append(a) or self)
    assert getattr(tiny, method)(device) is tiny
    assert moved == [(expected,)]
    assert spy.calls == [{"device": expected, "dtype": None}]
