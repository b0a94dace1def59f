"""WMReward-style prediction surprise with V-JEPA 2 (transformers ``VJEPA2Model``).

For every window of ``window`` (16) frames, stride ``stride`` (2): the encoder sees the first
``context`` (8) frames ONLY and the predictor, given those context tokens and the positions of the
remaining (target) tokens, predicts the target latents. The actual target latents come from the
encoder run on the full window. Both are layer-normed (no affine) over the feature dimension and

    surprise(window) = 1 - mean over target tokens of cos(LN(predicted), LN(actual)).

``VJEPA2Model.forward`` is not used: it encodes the full window before masking, so the context
tokens would already have attended to the future frames (a leak).

Decisions where the issue was silent:
- Preprocessing (resize, crop, normalise as the VJEPA2 video processor does) is tools/surprise_frames.py's;
  the frames are converted per batch of windows as they reach the model (`window_batches`), each frame once.
- Windows start at 0, 2, 4, ... while a full window fits; when that leaves the last frames uncovered
  (an odd ``T - 16``, as for the common 33- and 81-frame clips) one more window ends on the last frame
  (it starts one frame after the previous one), so the end state -- where a task succeeds or fails -- is
  always predicted. No frames are padded. A clip shorter than one window returns
  ``status="not_enough_frames"`` (missing evidence, never a crash); frame numbers are indices into
  the frames passed in.
- ``end`` of a window is its last frame (inclusive). ``top`` holds up to ``top_k`` of the most
  surprising windows, highest first, no two of them sharing a predicted frame (`distinct_windows`): with
  stride 2 the windows ranked by surprise alone are mostly neighbours around one event (the top 3 of a
  clip often were 10-25, 12-27 and 8-23), so the trace's summary and the evaluation report named one event
  three times. The reflect stage picks the windows it shows with the same rule. Windows are scored
  ``batch_size`` at a time.
- The frames need not be full size: ``SURPRISE_SHORT_SIDE`` (448) is the short side the agent and the
  tool service decode them at (aspect kept, never upscaled; ``ToolSettings.surprise_short_side``),
  since preprocessing brings the short side down to 292 (crop 256) or 438 (crop 384) anyway. 512
  frames of a 1080p clip are 3.2 GB at full size and 0.5 GB at 448.
- The model loads lazily on first use (or explicitly with ``load()``); any load or run failure
  raises ``ToolFault("surprise", ...)``. So does a checkpoint that lacks weights of the model (an
  encoder-only export has no predictor): transformers initialised them at random with a warning only,
  and the random predictor's surprise was reported as evidence (`missing_weights_problem`). A model id that is a file, or neither a folder nor a hub id, is
  named as such (``tools.hub.local_path_problem``) before transformers is asked, and so is a local folder
  without config.json, weights or a shard its index names (``tools.weight_index.folder_weights_problem``).
- What an injected scorer returns is checked by the agent (`evidence_problem`: frame count, windows inside
  the frames, finite values); a violation is a surprise tool fault, never evidence.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, cast, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

from tools.errors import LoadFailureMemo, ToolFault
from tools.sampling import order_problem as order_problem  # its home before /v1/track used it too
from tools.surprise_frames import IMAGENET_MEAN as IMAGENET_MEAN  # re-exported (their home before the split)
from tools.surprise_frames import IMAGENET_STD as IMAGENET_STD
from tools.surprise_frames import MAX_PREPROCESS_ASPECT as MAX_PREPROCESS_ASPECT
from tools.surprise_frames import preprocess_frames as preprocess_frames
from tools.surprise_frames import window_batches

DEFAULT_VJEPA2 = "facebook/vjepa2-vitl-fpc64-256"
SURPRISE_SHORT_SIDE = 448
"""Short side (pixels) of the frames decoded for the surprise scorer: at least the 438 that V-JEPA 2's
largest crop (384) resizes to, so scoring sees what it would at full size, in a fraction of the memory."""


class SurpriseWindow(BaseModel):
    """Surprise of one window."""

    start: int = Field(ge=0, description="first frame of the window")
    end: int = Field(ge=0, description="last frame of the window (inclusive)")
    frames: list[int] = Field(description="all frames the window covers", max_length=256)
    surprise: float = Field(description="1 - mean cosine(LN(predicted), LN(actual)) over target tokens; 0..2")


class SurpriseEvidence(BaseModel):
    """Per-window latent prediction surprise of a clip (supporting evidence, never a reward term)."""

    status: Literal["ok", "not_enough_frames"]
    windows: list[SurpriseWindow] = Field(default_factory=list)
    top: list[SurpriseWindow] = Field(default_factory=list, description="most surprising windows first")
    mean: float | None = Field(default=None, description="mean surprise over windows; None without windows")
    num_frames: int = Field(default=0, ge=0, description="frames in the scored clip")
    window_size: int = Field(default=16, ge=2)
    stride: int = Field(default=2, ge=1)
    context_frames: int = Field(default=8, ge=1)

    def _first_predicted(self, w: SurpriseWindow) -> int:
        return w.frames[self.context_frames] if len(w.frames) > self.context_frames else w.start + self.context_frames

    def on_frames(self, indices: Sequence[int]) -> SurpriseEvidence:
        """The same evidence with its windows named by `indices`, the clip frames that were scored (in order),
        instead of by position among them (what a scorer given those frames alone reports). Indices that go
        backwards are a ValueError (`order_problem`): a window would start after its end."""
        idx = [int(i) for i in indices]
        if (problem := order_problem(idx)) is not None:
            raise ValueError(problem)
        if len(idx) != self.num_frames:
            raise ValueError(f"{len(idx)} frame indices for evidence over {self.num_frames} frames")
        if any(not 0 <= f < len(idx) for w in self.windows + self.top for f in (w.start, w.end, *w.frames)):
            raise ValueError(f"the scorer returned windows past the {len(idx)} frames it was given")

        def named(w: SurpriseWindow) -> SurpriseWindow:
            return w.model_copy(update={"start": idx[w.start], "end": idx[w.end], "frames": [idx[f] for f in w.frames]})

        return self.model_copy(update={"windows": [named(w) for w in self.windows], "top": [named(w) for w in self.top]})

    def text(self) -> str:
        """A short account for the LLM."""
        if self.status != "ok":
            return (f"Prediction surprise (V-JEPA 2): not available, the clip has {self.num_frames} frames, "
                    f"fewer than one {self.window_size}-frame window. Treat as missing evidence.")
        tops = "; ".join(f"frames {w.start}-{w.end} (predicted {self._first_predicted(w)}-{w.end}): "
                         f"{w.surprise:.3f}" for w in self.top) or "none listed (top_k 0)"
        return (f"Prediction surprise (V-JEPA 2 latent prediction error; 0 = fully predicted, higher = less "
                f"predictable; supporting evidence only, not a physics verdict): mean {self.mean:.3f} over "
                f"{len(self.windows)} windows of {self.window_size} frames (stride {self.stride}, the first "
                f"{self.context_frames} frames as context). Most surprising: {tops}.")


def evidence_problem(evidence: object, num_frames: int) -> str | None:
    """Why what a scorer returned for ``num_frames`` frames breaks the `SurpriseScorer` contract, or None: not a
    `SurpriseEvidence`, evidence over another number of frames, a status its windows contradict ("ok" without a
    window or a mean: its `text()` raised TypeError in the agent, an internal error; "not_enough_frames" with
    windows), a window past the frames, or a NaN or infinite surprise (the agent showed
    "nan" to the model, and a window ending at frame 900 of 33, as evidence)."""
    if not isinstance(evidence, SurpriseEvidence):
        return f"the scorer returned {type(evidence).__name__}, not SurpriseEvidence"
    if evidence.num_frames != num_frames:
        return f"the scorer returned evidence over {evidence.num_frames} frames for {num_frames} frames"
    if evidence.status == "ok" and not (evidence.windows and evidence.mean is not None):  # text() formats the mean
        return f"the scorer returned status ok with {'no mean' if evidence.windows else 'no window'}"
    if evidence.status == "not_enough_frames" and (evidence.windows or evidence.top):
        return "the scorer returned not_enough_frames with windows"
    windows = evidence.windows + evidence.top
    if any(not 0 <= f < num_frames for w in windows for f in (w.start, w.end, *w.frames)):
        return f"the scorer returned windows past the {num_frames} frames it was given"
    values = [w.surprise for w in windows] + ([] if evidence.mean is None else [evidence.mean])
    if not all(np.isfinite(values)):
        return "the scorer returned a NaN or infinite surprise"
    return None


def split_window(frames: Sequence[int], context_frames: int) -> tuple[list[int], list[int]]:
    """(context frames, predicted frames) of a window's `frames`: those after its first `context_frames` were
    predicted (all of them when the window is no longer than its context)."""
    cut = context_frames if len(frames) > context_frames else 0
    return list(frames[:cut]), list(frames[cut:])


def distinct_windows(windows: Sequence[SurpriseWindow], k: int, context_frames: int) -> list[SurpriseWindow]:
    """Up to `k` of `windows`, most surprising first (ties: the earlier window), skipping a window whose
    predicted frames (those after its first `context_frames`; all of its frames when it has no more) overlap
    those of a window chosen before: distinct events, greedily by surprise."""
    chosen: list[SurpriseWindow] = []
    taken: set[int] = set()
    for w in sorted(windows, key=lambda w: (-w.surprise, w.start)):
        if len(chosen) == k:
            break
        predicted = set(split_window(w.frames or range(w.start, w.end + 1), context_frames)[1])
        if predicted & taken:
            continue
        chosen.append(w)
        taken |= predicted
    return chosen


@runtime_checkable
class SurpriseScorer(Protocol):
    """Anything that scores a clip's frames ``[T,H,W,3]`` uint8 with prediction surprise."""

    def score(self, frames: np.ndarray) -> SurpriseEvidence: ...


def window_starts(num_frames: int, window: int = 16, stride: int = 2) -> list[int]:
    """Start frames of all full windows: 0, stride, 2*stride, ... while ``start + window <= num_frames``, plus
    one window ending on the last frame when those leave it uncovered (module docstring)."""
    if num_frames < window:
        return []
    starts = list(range(0, num_frames - window + 1, stride))
    if starts[-1] + window < num_frames:
        starts.append(num_frames - window)
    return starts


def surprise_from_latents(predicted: Any, actual: Any) -> Any:
    """``1 - mean_tokens cos(LN(predicted), LN(actual))`` per window (module docstring equation).

    ``predicted`` and ``actual`` are tensors ``[B,N,D]``; returns ``[B]`` float32.
    """
    import torch.nn.functional as F

    p = F.layer_norm(predicted.float(), predicted.shape[-1:])
    a = F.layer_norm(actual.float(), actual.shape[-1:])
    return 1.0 - F.cosine_similarity(p, a, dim=-1).mean(dim=-1)


def missing_weights_problem(loading_info: dict[str, Any]) -> str | None:
    """Why a model that ``from_pretrained(..., output_loading_info=True)`` reported on is not the checkpoint's:
    weights the checkpoint lacks (transformers initialises them at random and only warns), or None."""
    missing = sorted(loading_info.get("missing_keys") or ())
    if not missing:
        return None
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return (f"the checkpoint is missing {len(missing)} V-JEPA 2 weight(s) ({shown}); they would be random, and "
            "the surprise with them (the predictor and the encoder are both needed)")


class VJEPA2SurpriseScorer:
    """SurpriseScorer backed by a V-JEPA 2 encoder + predictor (lazy-loaded)."""

    def __init__(self, model_id: str = DEFAULT_VJEPA2, *, device: Literal["cpu", "cuda"] = "cpu",
                 dtype: Literal["float32", "bfloat16", "float16"] = "float32", batch_size: int = 8,
                 top_k: int = 3, window: int = 16, stride: int = 2, context: int = 8,
                 model: Any | None = None, load_retry_s: float = 60.0) -> None:
        if not 0 < context < window:
            raise ValueError(f"context ({context}) must be between 1 and window-1 ({window - 1})")
        if batch_size < 1 or top_k < 0 or stride < 1:
            raise ValueError("batch_size and stride must be >= 1, top_k >= 0")
        from tools.hub import absolute_model

        self.model_id, self.device, self.dtype = absolute_model(model_id), device, dtype  # a folder: where given
        self.batch_size, self.top_k = batch_size, top_k
        self.window, self.stride, self.context = window, stride, context
        self._model = model
        self.given_model = model is not None  # not loaded from model_id: its identity is the object's
        self._lock = threading.Lock()
        self._load_failure = LoadFailureMemo(load_retry_s)  # a failed load is retried after load_retry_s
        if model is not None:
            self._check_config(model.config)

    @classmethod
    def from_pretrained(cls, model_id: str = DEFAULT_VJEPA2, **kwargs: Any) -> VJEPA2SurpriseScorer:
        """A scorer that loads ``VJEPA2Model.from_pretrained(model_id)`` (hub id or local path) on first use."""
        return cls(model_id, **kwargs)

    def _check_config(self, config: Any) -> None:
        tub = int(config.tubelet_size)
        if self.context % tub or self.window % tub:
            raise ValueError(f"window ({self.window}) and context ({self.context}) must be multiples of the "
                             f"tubelet size {tub}")

    def load(self) -> VJEPA2SurpriseScorer:
        """Load the model now (idempotent); raises ToolFault("surprise", "load", ...) on failure, and at
        once, with the same reason, for `load_retry_s` seconds after one (`tools.errors.LoadFailureMemo`)."""
        with self._lock:
            if self._model is None:
                self._load_failure.check()
                offline: dict[str, Any] = {}
                try:
                    import torch
                    from transformers import VJEPA2Model

                    from tools.hub import hub_load_kwargs, local_path_problem
                    from tools.weight_index import folder_weights_problem

                    if (problem := local_path_problem(self.model_id)) is not None:
                        raise FileNotFoundError(problem)
                    if Path(self.model_id).is_dir() and (problem := folder_weights_problem(self.model_id)):
                        raise FileNotFoundError(problem)  # names config.json, the weights or a shard
                    offline = hub_load_kwargs(self.model_id)  # the hub does not answer: the local cache only
                    loaded = VJEPA2Model.from_pretrained(self.model_id, dtype=getattr(torch, self.dtype),
                                                         output_loading_info=True, **offline)
                    # transformers types from_pretrained as the model alone; output_loading_info=True returns
                    # (model, loading info)
                    model, info = cast(tuple[VJEPA2Model, dict[str, Any]], loaded)
                    if (problem := missing_weights_problem(info)) is not None:
                        raise ValueError(problem)
                    self._check_config(model.config)
                    # transformers' PreTrainedModel.to is @wraps(nn.Module.to), which mypy reads as the unbound
                    # function (its first argument the model): a device is what it takes
                    self._model = model.to(self.device).eval()  # type: ignore[arg-type]
                except Exception as exc:  # noqa: BLE001 - every load failure becomes a typed fault
                    hint = (" (the Hugging Face hub did not answer, so only the local cache was read: download "
                            "the model where there is network, or set RAA_VJEPA_MODEL to a local folder)"
                            if offline else "")
                    raise self._load_failure.record(ToolFault(
                        "surprise", "load",
                        f"cannot load V-JEPA 2 from {self.model_id!r}{hint}: {type(exc).__name__}: {exc}"
                    )) from exc
        return self

    @property
    def model(self) -> Any:
        return self.load()._model

    def window_latents(self, clips: Any) -> tuple[Any, Any]:
        """Predicted and actual target latents for windows ``clips`` ``[B,window,3,S,S]`` (preprocessed).

        Predicted: encoder on the context frames only -> predictor with context positions
        ``0..Nc-1`` and target positions ``Nc..Nf-1``. Actual: encoder on the full window, target tokens.
        """
        import torch

        model = self.model
        tub = int(model.config.tubelet_size)
        with torch.inference_mode():
            b = clips.shape[0]
            grid = (clips.shape[-1] // int(model.config.patch_size)) * (clips.shape[-2] // int(model.config.patch_size))
            n_ctx, n_all = (self.context // tub) * grid, (self.window // tub) * grid
            context = model.encoder(pixel_values_videos=clips[:, : self.context]).last_hidden_state
            if context.shape[1] != n_ctx:
                raise ToolFault("surprise", "run", f"encoder gave {context.shape[1]} context tokens, expected {n_ctx}")
            ctx_mask = [torch.arange(n_ctx, device=clips.device).unsqueeze(0).repeat(b, 1)]
            tgt_mask = [torch.arange(n_ctx, n_all, device=clips.device).unsqueeze(0).repeat(b, 1)]
            predicted = model.predictor(encoder_hidden_states=context, context_mask=ctx_mask,
                                        target_mask=tgt_mask).last_hidden_state
            actual = model.encoder(pixel_values_videos=clips).last_hidden_state[:, n_ctx:n_all]
        return predicted, actual

    def score_windows(self, pixels: np.ndarray, starts: list[int], batch_size: int | None = None) -> list[float]:
        """Surprise of the windows starting at ``starts`` over preprocessed frames ``[T,3,S,S]``."""
        bs = batch_size or self.batch_size
        out: list[float] = []
        for i in range(0, len(starts), bs):
            out.extend(self._batch_surprise(np.stack([pixels[s:s + self.window] for s in starts[i:i + bs]])))
        return out

    def score_frames(self, frames: np.ndarray, starts: list[int], crop_size: int) -> list[float]:
        """`score_windows` over raw uint8 frames ``[T,H,W,3]``, each batch's frames preprocessed as it reaches
        the model (`tools.surprise_frames.window_batches`): at most one batch of windows' frames converted at
        a time, with the same values as preprocessing them all first."""
        out: list[float] = []
        for chunk in window_batches(frames, starts, self.batch_size, self.window, crop_size):
            out.extend(self._batch_surprise(chunk))
        return out

    def _batch_surprise(self, chunk: np.ndarray) -> list[float]:
        """Surprise of the preprocessed windows ``chunk`` ``[B,window,3,S,S]``."""
        import torch

        clips = torch.from_numpy(chunk).to(self.device, dtype=getattr(torch, self.dtype))
        predicted, actual = self.window_latents(clips)
        return [float(v) for v in surprise_from_latents(predicted, actual).cpu().tolist()]

    def score(self, frames: np.ndarray) -> SurpriseEvidence:
        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(f"frames must be uint8 [T,H,W,3], got {frames.dtype} {frames.shape}")
        n = int(frames.shape[0])
        meta: dict[str, Any] = dict(num_frames=n, window_size=self.window, stride=self.stride, context_frames=self.context)
        starts = window_starts(n, self.window, self.stride)
        if not starts:
            return SurpriseEvidence(status="not_enough_frames", **meta)
        model = self.model
        try:
            values = self.score_frames(frames, starts, int(model.config.crop_size))
        except ToolFault:
            raise
        except Exception as exc:  # noqa: BLE001 - every run failure becomes a typed fault
            raise ToolFault("surprise", "run", f"V-JEPA 2 surprise failed: {type(exc).__name__}: {exc}") from exc
        if not np.isfinite(values).all():
            raise ToolFault("surprise", "run", "V-JEPA 2 produced non-finite surprise values")
        windows = [SurpriseWindow(start=s, end=s + self.window - 1, frames=list(range(s, s + self.window)),
                                  surprise=v) for s, v in zip(starts, values, strict=True)]
        top = distinct_windows(windows, self.top_k, self.context)
        return SurpriseEvidence(status="ok", windows=windows, top=top, mean=float(np.mean(values)), **meta)
