"""Text encoders that turn prompts into the transformer's cross-attention inputs [B, L, D].

* :class:`HashTextEncoder` -- for tiny random models in tests / smoke runs: each prompt maps to a
  fixed random [L, D] table seeded by the SHA-256 of its text (same prompt -> same embedding,
  different prompts -> different embeddings, no weights, no network).
* :class:`CosmosQwenTextEncoder` -- Cosmos-Predict2.5's encoder: Qwen2.5-VL run on the pipeline's
  chat template; every hidden layer after the embeddings is normalised per token (zero mean,
  unit std over features) and the layers are concatenated on the feature axis (28 x 3584 =
  100352 features for the 7B encoder), as ``Cosmos2_5_PredictBasePipeline`` does.
* :class:`WanT5TextEncoder` -- Wan's UMT5-XXL encoder: last hidden state, positions past the
  prompt length zeroed, padded to ``max_sequence_length`` (``WanImageToVideoPipeline``).

The real encoders load with ``from_pretrained`` from a local checkpoint folder (subfolders
``text_encoder`` and ``tokenizer`` of the diffusers repository layout); untested here without
weights. Like the transformer and the VAE (``policy.checkpoint``), a ``text_encoder`` folder whose weights
do not cover the part that computes the prompt features (transformers would warn and initialise the rest
randomly) is a ValueError naming the folder and the missing weights. For Cosmos that part is Qwen2.5-VL's
language model (``get_decoder()``: embeddings, layers, final norm): prompts are text tokens only, so the
vision tower and the lm_head may be missing (a text-only checkpoint) and are left as transformers builds
them; a missing language-model weight is refused. The encoder also runs that part alone
(:func:`language_model_hidden_states`): the lm_head's logits were computed and thrown away. A ``tokenizer``
folder that cannot load is an OSError naming it (:func:`_load_tokenizer`).

Wan prompts are cleaned as the pipeline's ``prompt_clean`` does (:func:`wan_prompt_clean`): ``ftfy.fix_text``,
HTML entities unescaped twice, whitespace runs collapsed to one space, stripped. This used to be whitespace
normalisation alone, so a prompt with an HTML entity (``"red &amp; blue"``) or text ftfy repairs (curly
quotes, mojibake) reached UMT5 as other tokens than the pipeline's and the policy trained on conditioning
the pretrained model never saw. Decision: ``ftfy`` is optional here (diffusers needs it for this
pipeline); without it that one step is skipped and the rest still matches.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

import torch
from torch import Tensor

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class TextEncoder(Protocol):
    """Prompts -> cross-attention embeddings [B, L, D]."""

    def encode(self, texts: Sequence[str], *, device: torch.device | str, dtype: torch.dtype) -> Tensor: ...

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> TextEncoder: ...


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a sequence of strings")
    if not texts:
        raise ValueError("texts is empty")
    return list(texts)


@dataclass
class HashTextEncoder:
    """Deterministic random embeddings keyed by the prompt's SHA-256 (tiny models only)."""

    seq_len: int = 8
    """Number of text tokens L."""
    dim: int = 32
    """Embedding width D (the transformer's text input width)."""

    def encode(self, texts: Sequence[str], *, device: torch.device | str = "cpu",
               dtype: torch.dtype = torch.float32) -> Tensor:
        rows = []
        for text in _check_texts(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little") >> 1
            g = torch.Generator().manual_seed(seed)
            rows.append(torch.randn(self.seq_len, self.dim, generator=g))
        return torch.stack(rows).to(device=device, dtype=dtype)

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> HashTextEncoder:
        return self


def _load_tokenizer(path: str | Path, revision: str | None) -> Any:
    """``AutoTokenizer`` of ``path``'s ``tokenizer`` subfolder; an OSError naming that folder when it cannot load:
    transformers' message for an empty or half-copied folder ("Couldn't instantiate the backend tokenizer from
    one of: ...") named no path."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), subfolder="tokenizer", revision=revision)
    except (OSError, ValueError) as exc:
        raise OSError(f"cannot load the tokenizer in {Path(path).expanduser()}/tokenizer: {exc}") from exc


def _load_strict(model_cls: Any, path: str | Path, torch_dtype: torch.dtype, revision: str | None,
                 used: Callable[[PreTrainedModel], torch.nn.Module] = lambda model: model) -> PreTrainedModel:
    """``model_cls`` from ``path``'s ``text_encoder`` subfolder (at hub ``revision``); ValueError
    (``policy.checkpoint``) when transformers reports weights it did not find (it would leave them randomly
    initialised) among those of ``used(model)``, the part that computes the prompt features. Weights of
    other parts (Qwen2.5-VL's vision tower and lm_head) may be missing: they are never run on a prompt."""
    from policy.checkpoint import require_all_weights

    model, info = model_cls.from_pretrained(str(path), subfolder="text_encoder", torch_dtype=torch_dtype,
                                            output_loading_info=True, revision=revision)
    require_all_weights(weights_of(info, model, used(model)), f"{Path(path).expanduser()}/text_encoder")
    return model


def weights_of(info: dict[str, Any], model: torch.nn.Module, part: torch.nn.Module) -> dict[str, list[Any]]:
    """transformers' loading ``info`` (names in ``model``'s naming) cut to the tensors of ``part``, a submodule.
    The part is matched by tensor identity, not by name prefix: the prefixes differ between transformers
    versions (Qwen2.5-VL's language model is ``model.*`` in 4.x, ``model.language_model.*`` in 5.x)."""
    ids = {id(t) for t in (*part.parameters(), *part.buffers())}
    named: dict[str, Tensor] = dict(model.named_parameters(remove_duplicate=False))
    named.update(model.named_buffers(remove_duplicate=False))
    keep = {name for name, tensor in named.items() if id(tensor) in ids}
    return {key: [k for k in info.get(key, []) if (k if isinstance(k, str) else k[0]) in keep]
            for key in ("missing_keys", "mismatched_keys")}


class _HFTextEncoder:
    """Shared holder of a Hugging Face tokenizer + encoder model (frozen, eval mode)."""

    def __init__(self, tokenizer: Any, model: PreTrainedModel, max_sequence_length: int = 512) -> None:
        self.tokenizer = tokenizer
        self.model = model.eval().requires_grad_(False)
        self.max_sequence_length = max_sequence_length

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> Self:
        self.model.to(device=device, dtype=dtype)
        return self

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


class CosmosQwenTextEncoder(_HFTextEncoder):
    """Qwen2.5-VL prompt encoder of Cosmos-Predict2.5 (all layers, normalised, concatenated)."""

    SYSTEM = "You are a helpful assistant who will provide prompts to an image generator."

    @classmethod
    def from_pretrained(cls, path: str | Path, *, torch_dtype: torch.dtype = torch.bfloat16,
                        max_sequence_length: int = 512, revision: str | None = None) -> CosmosQwenTextEncoder:
        from transformers import Qwen2_5_VLForConditionalGeneration

        tok = _load_tokenizer(path, revision)
        model = _load_strict(Qwen2_5_VLForConditionalGeneration, path, torch_dtype, revision,
                             used=lambda m: m.get_decoder())
        return cls(tok, model, max_sequence_length)

    def prompt_ids(self, texts: Sequence[str]) -> Tensor:
        """(B, max_sequence_length) token ids of ``texts`` in the pipeline's chat template, on the model's device."""
        ids = []
        for text in _check_texts(texts):
            chat = [
                {"role": "system", "content": [{"type": "text", "text": self.SYSTEM}]},
                {"role": "user", "content": [{"type": "text", "text": text}]},
            ]
            out = self.tokenizer.apply_chat_template(
                chat, tokenize=True, add_generation_prompt=False, add_vision_id=False,
                max_length=self.max_sequence_length, truncation=True, padding="max_length")
            # transformers 5 returns a BatchEncoding (a Mapping, not a dict) by default; 4.x a list of ids
            ids.append(torch.as_tensor(out["input_ids"] if isinstance(out, Mapping) else out, dtype=torch.long))
        return torch.stack(ids).to(self.device)

    @torch.no_grad()
    def encode(self, texts: Sequence[str], *, device: torch.device | str, dtype: torch.dtype) -> Tensor:
        hidden = language_model_hidden_states(self.model, self.prompt_ids(texts))
        layers = [(h - h.mean(-1, keepdim=True)) / (h.std(-1, keepdim=True) + 1e-8) for h in hidden[1:]]
        return torch.cat(layers, dim=-1).to(device=device, dtype=dtype)


def language_model_hidden_states(model: PreTrainedModel, ids: Tensor) -> tuple[Tensor, ...]:
    """Every hidden state (embeddings first) of Qwen2.5-VL's language model (``get_decoder()``) on text-only
    ``ids``, bit-identical to the full model's ``hidden_states``.

    Why not the full ``Qwen2_5_VLForConditionalGeneration``: it runs the same decoder and then ``lm_head`` on
    every token, logits the encoder never reads (vocab 151936 x 512 tokens, ~155 MB per prompt in bf16).
    Why identical: with no image or video the full model embeds the ids with the same table and leaves the
    position ids to the decoder (no multimodal rope index to build), which numbers the tokens 0..L-1 on all
    three mrope axes whichever entry point called it. No KV cache (``use_cache=False``): one pass, nothing to
    reuse, and the cache does not change the attention's result."""
    return model.get_decoder()(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states


def wan_prompt_clean(text: str) -> str:
    """Diffusers' Wan ``prompt_clean``: ``ftfy.fix_text`` (when installed), ``html.unescape`` twice, strip,
    then every whitespace run -> one space, strip."""
    try:
        import ftfy
    except ImportError:  # optional: see the module docstring
        pass
    else:
        text = ftfy.fix_text(text)
    text = html.unescape(html.unescape(text)).strip()
    return re.sub(r"\s+", " ", text).strip()


class WanT5TextEncoder(_HFTextEncoder):
    """UMT5 prompt encoder of Wan 2.x (last hidden state, zero past each prompt's length)."""

    @classmethod
    def from_pretrained(cls, path: str | Path, *, torch_dtype: torch.dtype = torch.bfloat16,
                        max_sequence_length: int = 512, revision: str | None = None) -> WanT5TextEncoder:
        from transformers import UMT5EncoderModel

        tok = _load_tokenizer(path, revision)
        model = _load_strict(UMT5EncoderModel, path, torch_dtype, revision)
        return cls(tok, model, max_sequence_length)

    @torch.no_grad()
    def encode(self, texts: Sequence[str], *, device: torch.device | str, dtype: torch.dtype) -> Tensor:
        clean = [wan_prompt_clean(t) for t in _check_texts(texts)]
        tok = self.tokenizer(clean, padding="max_length", max_length=self.max_sequence_length, truncation=True,
                             add_special_tokens=True, return_attention_mask=True, return_tensors="pt")
        mask = tok.attention_mask.to(self.device)
        hidden = self.model(tok.input_ids.to(self.device), mask).last_hidden_state
        hidden = hidden * mask.unsqueeze(-1).to(hidden.dtype)
        return hidden.to(device=device, dtype=dtype)
