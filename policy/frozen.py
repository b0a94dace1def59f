"""The frozen helpers of `policy.world_model.FlowWorldModel` (VAE, text encoder, CLIP image encoder) and how they
follow the module's device and dtype moves (split out of policy/world_model.py, which had reached its size limit).

They are kept outside the module tree, so ``parameters()`` / ``state_dict()`` / DeepSpeed see the trainable
transformer alone. The rules:

* ``_apply`` carries the VAE, so every cast or move of the tree reaches it, a parent module's included.
* The text and CLIP encoders follow this module's own ``.to(device, dtype)``, ``.cpu()``, ``.cuda()``, ``.xpu()``,
  ``.mtia()``, ``.ipu()``, ``.to_empty(device)`` and its dtype casts ``.float()``, ``.double()``, ``.half()``,
  ``.bfloat16()``, ``.type(dtype)`` (all through `_encoders_to`), but not a move or
  cast of a module that holds this one (DeepSpeed's ``.to(device)`` or ``.bfloat16()`` of its wrapper): with
  ``text_encoder: offload`` they stay in host memory (`training.models.text_encoder_on`).

Decision where the issue was silent: the dtype casts keep ``nn.Module``'s own meaning for the tree (floating-point
tensors only; ``.to(dtype)`` also casts complex ones) and then cast the encoders as ``.to(dtype)`` does. They used to
skip the text and CLIP encoders, which ``.to(dtype)`` casts.

Decision where the issue was silent: ``.to_empty(device)`` (meta-device initialisation) gives fresh storage to the
trainable tree only; the VAE and the encoders move as ``.to(device)`` moves them. It used to give the frozen VAE
uninitialised weights through ``_apply`` (a parent module's ``to_empty`` still does: ``_apply`` cannot tell it
from a move). ``.type()`` takes a dtype only: a tensor type name would move the tree without the encoders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self, TypedDict

import torch

if TYPE_CHECKING:  # pragma: no cover
    # its module, not the package: mypy reads diffusers/__init__ as giving its torch-less placeholder class
    from diffusers.models.autoencoders.autoencoder_kl_wan import AutoencoderKLWan

    from policy.text import TextEncoder
    from policy.wan_i2v import ClipImageEncoder


class FrozenHelpers(TypedDict):
    """The frozen helpers of a `FrozenHelpersModule` (None where absent)."""

    vae: AutoencoderKLWan | None
    text_encoder: TextEncoder | None
    image_encoder: ClipImageEncoder | None


class FrozenHelpersModule(torch.nn.Module):
    """A module holding frozen helpers in ``_frozen`` (`FrozenHelpers`) that follow its moves as the module
    docstring says."""

    _frozen: FrozenHelpers

    @property
    def vae(self) -> AutoencoderKLWan | None:
        return self._frozen["vae"]

    @property
    def text_encoder(self) -> TextEncoder | None:
        return self._frozen["text_encoder"]

    @property
    def image_encoder(self) -> ClipImageEncoder | None:
        """Wan 2.1 I2V's CLIP image encoder (`policy.wan_i2v`); None for the other checkpoints."""
        return self._frozen["image_encoder"]

    def _apply(self, fn, recurse: bool = True):  # noqa: D401 - torch hook
        super()._apply(fn, recurse)
        if self.vae is not None and recurse:
            self.vae._apply(fn)
        return self

    def to_empty(self, *, device: torch.device | str | int | None, recurse: bool = True) -> Self:
        """nn.Module.to_empty for the trainable tree only; the frozen helpers keep their weights and move as
        ``.to(device)`` moves them (module docstring)."""
        torch.nn.Module._apply(self, lambda t: torch.empty_like(t, device=device), recurse)  # not through the VAE
        if device is None:  # empty_like on each tensor's own device: nothing moves
            return self
        device = torch.device(device)
        if self.vae is not None:  # as an nn.Module: diffusers' @wraps(Module.to) leaves ModelMixin.to unbound to mypy
            vae: torch.nn.Module = self.vae
            vae.to(device)
        self._encoders_to(device, None)
        return self

    def type(self, dst_type: torch.dtype | str) -> Self:
        """nn.Module.type (every tensor of the tree and the VAE), and the prompt encoders cast as ``.to(dst_type)``
        casts them; a tensor type name ("torch.cuda.HalfTensor", which also moves) is refused."""
        if not isinstance(dst_type, torch.dtype):
            raise TypeError(f"{type(self).__name__}.type takes a torch.dtype, got {dst_type!r}: use .to(device, "
                            "dtype) to move")
        return self._cast(super().type(dst_type), dst_type)

    def _encoders_to(self, device: torch.device | None, dtype: torch.dtype | None) -> None:
        if self.text_encoder is not None:
            self.text_encoder.to(device=device, dtype=dtype)
        if self.image_encoder is not None:
            self.image_encoder.to(device=device, dtype=dtype)

    def to(self, *args, **kwargs):
        out = super().to(*args, **kwargs)
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        self._encoders_to(device, dtype)
        return out

    def cpu(self):
        """``.to("cpu")``: the prompt encoders move too (nn.Module.cpu goes through ``_apply`` only)."""
        return self.to("cpu")

    def cuda(self, device: int | torch.device | None = None):
        """``.to(cuda device)``: the prompt encoders move too (nn.Module.cuda goes through ``_apply`` only)."""
        if isinstance(device, int):
            device = torch.device("cuda", device)
        return self.to("cuda" if device is None else device)  # "cuda": the current device, as nn.Module.cuda

    def xpu(self, device: int | torch.device | None = None):
        """``.to(xpu device)``: the prompt encoders move too (nn.Module.xpu goes through ``_apply`` only)."""
        return self.to(_accelerator("xpu", device))

    def mtia(self, device: int | torch.device | None = None):
        """``.to(mtia device)``: the prompt encoders move too (nn.Module.mtia goes through ``_apply`` only)."""
        return self.to(_accelerator("mtia", device))

    def ipu(self, device: int | torch.device | None = None):
        """``.to(ipu device)``: the prompt encoders move too (nn.Module.ipu goes through ``_apply`` only)."""
        return self.to(_accelerator("ipu", device))

    def float(self) -> Self:
        """nn.Module.float, and the prompt encoders cast as ``.to(torch.float32)`` casts them."""
        return self._cast(super().float(), torch.float32)

    def double(self) -> Self:
        """nn.Module.double, and the prompt encoders cast as ``.to(torch.float64)`` casts them."""
        return self._cast(super().double(), torch.float64)

    def half(self) -> Self:
        """nn.Module.half, and the prompt encoders cast as ``.to(torch.float16)`` casts them."""
        return self._cast(super().half(), torch.float16)

    def bfloat16(self) -> Self:
        """nn.Module.bfloat16, and the prompt encoders cast as ``.to(torch.bfloat16)`` casts them."""
        return self._cast(super().bfloat16(), torch.bfloat16)

    def _cast(self, out: Self, dtype: torch.dtype) -> Self:
        self._encoders_to(None, dtype)
        return out


def _accelerator(kind: str, device: int | torch.device | None) -> torch.device:
    """The device ``nn.Module.<kind>(device)`` moves to: the current one of that kind when None."""
    return torch.device(kind) if device is None else torch.device(kind, device) if isinstance(device, int) else device
