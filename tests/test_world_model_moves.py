"""FlowWorldModel.cpu() / .cuda() move the prompt encoders (kept outside the module tree) as .to(device) does;
a parent module's .to() (DeepSpeed's, on its wrapper) leaves them where they are (an offloaded text encoder
stays in host memory). CPU only: a spy on the encoders' .to."""

from __future__ import annotations

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
