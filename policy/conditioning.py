"""What a rollout of the world model is conditioned on (`Conditioning`: the first-frame latent, text features, the
conditioning-frame mask and the optional guidance and Wan I2V inputs, batch-aligned and shape-checked on creation) and
the mask of conditioning latent frames (`make_cond_mask`). Used by `policy.world_model.FlowWorldModel`, the rollout
and the trainer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from policy.masks import check_binary_mask


@dataclass
class Conditioning:
    """What a rollout is conditioned on (batch-aligned tensors)."""

    first_frame_latent: Tensor
    """[B, C, 1, H, W] normalised latent of the initial frame (float32)."""
    text_embeds: Tensor
    """[B, L, D] text features in the transformer's input width."""
    cond_mask: Tensor
    """[B, 1, F, 1, 1]: 0 on conditioning frames (kept, no noise, no likelihood), 1 on generated ones (nothing
    else: policy/masks.py)."""
    negative_text_embeds: Tensor | None = None
    """[B, L, D] features of the negative prompt (the unconditional branch of classifier-free
    guidance); None when the conditioning is used without guidance."""
    image_condition: Tensor | None = None
    """[B, T + C, F, H, W] the Wan I2V-14B channel-concat condition (mask + image latent,
    `policy.wan_i2v.image_condition`); None for the other layouts."""
    image_embeds: Tensor | None = None
    """[B, N, D] CLIP image embeddings for a transformer with ``image_dim`` (Wan 2.1 I2V); else None."""

    def __post_init__(self) -> None:
        b = self.first_frame_latent.shape[0]
        if self.first_frame_latent.ndim != 5 or self.first_frame_latent.shape[2] != 1:
            raise ValueError(f"first_frame_latent must be [B, C, 1, H, W], got {tuple(self.first_frame_latent.shape)}")
        if self.text_embeds.ndim != 3 or self.text_embeds.shape[0] != b:
            raise ValueError(f"text_embeds must be [B={b}, L, D], got {tuple(self.text_embeds.shape)}")
        neg = self.negative_text_embeds
        if neg is not None and neg.shape != self.text_embeds.shape:
            raise ValueError(f"negative_text_embeds must match text_embeds {tuple(self.text_embeds.shape)}, "
                             f"got {tuple(neg.shape)}")
        cm = self.cond_mask
        if cm.ndim != 5 or cm.shape[0] != b or cm.shape[1] != 1 or cm.shape[3:] != (1, 1):
            raise ValueError(f"cond_mask must be [B={b}, 1, F, 1, 1], got {tuple(cm.shape)}")
        check_binary_mask("cond_mask", cm)
        ic, ie = self.image_condition, self.image_embeds
        if ic is not None and (ic.ndim != 5 or ic.shape[0] != b or ic.shape[2] != cm.shape[2]
                               or ic.shape[3:] != self.first_frame_latent.shape[3:]):
            raise ValueError(f"image_condition must be [B={b}, T + C, F={cm.shape[2]}, H, W] like the latent, "
                             f"got {tuple(ic.shape)}")
        if ie is not None and (ie.ndim != 3 or ie.shape[0] != b):
            raise ValueError(f"image_embeds must be [B={b}, N, D], got {tuple(ie.shape)}")

    @property
    def batch_size(self) -> int:
        return self.first_frame_latent.shape[0]

    @property
    def num_latent_frames(self) -> int:
        return self.cond_mask.shape[2]

    def select(self, index: Tensor | slice | Sequence[int]) -> Conditioning:
        """The rows ``index`` of every field."""
        return self._map(lambda t: t[index])

    def repeat_interleave(self, n: int) -> Conditioning:
        """Each row repeated ``n`` times in place (a prompt -> its group of ``n`` rollouts)."""
        return self._map(lambda t: t.repeat_interleave(n, dim=0))

    def to(self, device: torch.device | str) -> Conditioning:
        return self._map(lambda t: t.to(device))

    def _map(self, fn: Callable[[Tensor], Tensor]) -> Conditioning:
        def opt(t: Tensor | None) -> Tensor | None:
            return None if t is None else fn(t)

        return Conditioning(fn(self.first_frame_latent), fn(self.text_embeds), fn(self.cond_mask),
                            opt(self.negative_text_embeds), opt(self.image_condition), opt(self.image_embeds))


def make_cond_mask(batch: int, num_latent_frames: int, num_cond_frames: int = 1,
                   device: torch.device | str = "cpu") -> Tensor:
    """[B, 1, F, 1, 1] float mask: 0 on the first ``num_cond_frames`` latent frames, 1 elsewhere."""
    if not 0 <= num_cond_frames < num_latent_frames:
        raise ValueError(f"need 0 <= num_cond_frames < num_latent_frames, got {num_cond_frames}, {num_latent_frames}")
    m = torch.ones(batch, 1, num_latent_frames, 1, 1, device=device)
    m[:, :, :num_cond_frames] = 0
    return m
