"""CoTracker3 (offline) backend: the real model, loaded from an installed ``cotracker`` package or a local
clone of the co-tracker repository through ``torch.hub`` (``cotracker3_offline``, ``source="local"``).

The cotracker code is CC-BY-NC and is never copied into this project; it is imported at run time.

Decisions where the issue was silent:
- Loading order: an injected predictor; else ``hub_dir`` (``torch.hub.load(hub_dir,
  "cotracker3_offline", source="local", pretrained=checkpoint is None)``, then the checkpoint's
  state dict if given); else the installed package (``CoTrackerPredictor(checkpoint=PATH,
  window_len=60)``, the offline model's window). Without a checkpoint and without a hub dir the
  model would run with random weights, which would fabricate evidence: that is refused with a
  ToolFault unless ``allow_random_weights=True`` (tests, GPU timing only).
- Queries go to the model as explicit ``(t, x, y)`` points (grid points are the same cell centres
  the LK backend uses), with ``backward_tracking=True`` so points queried mid-clip are tracked in
  both directions. Visibility is the model's (thresholded by the predictor) and the
  point must be inside the image (on one of its pixels, `tools.motion.base.inside_image`: a point jittering
  a fraction of a pixel past an edge pixel's centre is clamped onto it, not made invisible). A non-finite
  position the model gives is invisible and replaced by the last finite one
  (``tools.motion.base.fill_lost_positions``; it stayed NaN in ``tracks`` and the service's JSON answer
  failed on it).
- ``interp_shape`` overrides the model's working resolution (default 384x512, the trained one);
  only tests use a smaller one. A one-frame clip returns the query points without running the model.
- The frames reach the predictor already at its working shape (`_model_video`): it resizes whatever it is given
  to ``interp_shape`` (``F.interpolate``, bilinear, ``align_corners=True``, on the channels-last float video) and
  scales the query points by ``(interp - 1) / (size - 1)`` per axis, its tracks back by the inverse. The wrapper
  does those steps itself, the resize ``RESIZE_CHUNK_BYTES`` of full-size float frames at a time (bilinear
  resizing works frame by frame), so the predictor's own resize and scales are identities (scale 1.0) and the
  tracks are bit for bit those of its own resize (tests/test_cotracker_resize.py, on the CPU; on a GPU the chunks
  travel as uint8 and are resized there, untested: no GPU was lent). It was handed the whole clip
  as full-size float32: a 720p 93-frame stretch is ~1 GB, its working video 0.2 GB. An injected predictor must
  so have ``interp_shape`` and answer in the pixels of the video it is given (a stand-in at the clip's own size
  sees the clip unchanged). Frames already at the working shape are converted into the video without the resize
  (its identity there: the same bits, tests/test_cotracker_same_size.py). The predictor's own code still copies
  the working video, which is not ours to change: its resize to the same size returns a new tensor, and its
  backward tracking runs on ``video.flip(1).clone()`` (torch has no negative strides, so a flip is never a view).
- Any failure to load or run raises ``ToolFault("motion", ...)``; there is never a silent switch to LK.
- ``torch.hub.load`` puts ``hub_dir`` first on ``sys.path`` while its hubconf runs, so the clone's
  ``cotracker`` wins over an installed one, unless an installed one was already imported in this process:
  then Python hands the hubconf that module, and the installed code would run under the hub dir's name.
  That is a load fault naming the package's file (`shadowing_source`), never a silent switch.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tools.errors import LoadFailureMemo, ToolFault
from tools.hub import absolute_path
from tools.motion.base import (
    MotionTracks,
    fill_lost_positions,
    inside_image,
    resolve_queries,
    validate_frames,
)
from tools.torch_frames import uint8_tensor

OFFLINE_WINDOW_LEN = 60
RESIZE_CHUNK_BYTES = 32 << 20
"""Most bytes of full-size float32 frames `_model_video` holds at once (at least one frame): two 720p frames."""


def shadowing_source(predictor: Any, hub_dir: Path) -> Path | None:
    """The file of `predictor`'s class when it is a module of a ``cotracker`` package lying outside `hub_dir`
    (an installed one the hubconf's ``from cotracker... import`` was handed), else None."""
    name = type(predictor).__module__
    module = sys.modules.get(name) if name.split(".")[0] == "cotracker" else None
    origin = None if module is None or module.__spec__ is None else module.__spec__.origin
    if origin is None or Path(origin).resolve().is_relative_to(Path(hub_dir).resolve()):
        return None
    return Path(origin)


class CoTracker3Tracker:
    """MotionTracker backend running the CoTracker3 offline predictor."""

    name = "cotracker3"

    def __init__(self, *, checkpoint: str | Path | None = None, hub_dir: str | Path | None = None,
                 device: Literal["cpu", "cuda"] = "cpu", interp_shape: tuple[int, int] | None = None,
                 allow_random_weights: bool = False, predictor: Any | None = None,
                 load_retry_s: float = 60.0) -> None:
        self.checkpoint = absolute_path(checkpoint)  # the files of the folder they were given in: loaded on first use
        self.hub_dir = absolute_path(hub_dir)
        self.device = device
        self.interp_shape = interp_shape
        self.allow_random_weights = allow_random_weights
        self._predictor = predictor
        self.given_predictor = predictor is not None  # not loaded from its settings: identity is the object's
        self._lock = threading.Lock()
        self._load_failure = LoadFailureMemo(load_retry_s)  # a failed load is retried after load_retry_s

    # ----------------------------------------------------------------------------------- loading
    def load(self) -> CoTracker3Tracker:
        """Build the predictor now (idempotent); raises ToolFault("motion", "load", ...) on failure, and at
        once, with the same reason, for `load_retry_s` seconds after one (`tools.errors.LoadFailureMemo`)."""
        with self._lock:
            if self._predictor is None:
                self._load_failure.check()
                try:
                    self._predictor = self._build()
                except ToolFault as fault:
                    self._load_failure.record(fault)
                    raise
        return self

    @property
    def predictor(self) -> Any:
        """The loaded predictor (loads it: ToolFault as `load`)."""
        return self.load()._predictor

    def _build(self) -> Any:
        if self.checkpoint is None and self.hub_dir is None and not self.allow_random_weights:
            raise ToolFault("motion", "load", "cotracker3 needs a checkpoint path (RAA_COTRACKER_CHECKPOINT) "
                                              "or a local co-tracker repo dir (RAA_COTRACKER_HUB_DIR)")
        if self.checkpoint is not None and not self.checkpoint.is_file():
            raise ToolFault("motion", "load", f"cotracker3 checkpoint not found: {self.checkpoint}")
        try:
            import torch

            if self.hub_dir is not None:
                predictor = torch.hub.load(str(self.hub_dir), "cotracker3_offline", source="local",
                                           pretrained=self.checkpoint is None and not self.allow_random_weights)
                if (shadow := shadowing_source(predictor, self.hub_dir)) is not None:
                    raise ToolFault("motion", "load", f"cotracker3: the hub dir {self.hub_dir} gave a predictor from "
                                    f"{shadow}, a cotracker package imported earlier in this process (Python reuses "
                                    "an imported module whatever sys.path says); unset RAA_COTRACKER_HUB_DIR to use "
                                    "that package, or load the tracker before anything imports it")
                if self.checkpoint is not None:
                    state = torch.load(self.checkpoint, map_location="cpu")
                    predictor.model.load_state_dict(state.get("model", state) if isinstance(state, dict) else state)
            else:
                from cotracker.predictor import CoTrackerPredictor

                predictor = CoTrackerPredictor(
                    checkpoint=str(self.checkpoint) if self.checkpoint else None, window_len=OFFLINE_WINDOW_LEN)
            if self.interp_shape is not None:
                predictor.interp_shape = tuple(int(v) for v in self.interp_shape)
            return predictor.to(self.device).eval()
        except ToolFault:
            raise
        except Exception as exc:  # noqa: BLE001 - every load failure becomes a typed fault
            raise ToolFault("motion", "load", f"cannot load cotracker3{self._sources()}: {type(exc).__name__}: "
                                              f"{exc}") from exc

    def _sources(self) -> str:
        """Where the load read from, for its fault (torch.load's EOFError on an empty file says nothing)."""
        parts = [f"checkpoint {self.checkpoint}"] * (self.checkpoint is not None) + \
            [f"hub dir {self.hub_dir}"] * (self.hub_dir is not None)
        return f" ({', '.join(parts)})" if parts else ""

    # ---------------------------------------------------------------------------------- tracking
    def track(self, frames: np.ndarray, *, grid_size: int | None = None,
              queries: np.ndarray | None = None) -> MotionTracks:
        frames = validate_frames(frames)
        q = resolve_queries(frames.shape, grid_size, queries)
        t_total, h, w = frames.shape[:3]
        query_frames = q[:, 0].astype(np.int64)
        if t_total == 1:
            return MotionTracks(tracks=q[None, :, 1:3], visible=np.ones((1, len(q)), bool),
                                query_frames=query_frames, frame_indices=[0])
        predictor = self.predictor
        try:
            import torch

            with torch.inference_mode():
                shape = (int(predictor.interp_shape[0]), int(predictor.interp_shape[1]))
                video = _model_video(torch, frames, shape, self.device)
                qt = torch.tensor(q, device=self.device)[None]  # a copy: scaled in place as the predictor does
                qt[:, :, 1:] *= qt.new_tensor([(shape[1] - 1) / (w - 1), (shape[0] - 1) / (h - 1)])
                tracks, visible = predictor(video, queries=qt, backward_tracking=True)
                tracks = tracks * tracks.new_tensor([(w - 1) / (shape[1] - 1), (h - 1) / (shape[0] - 1)])
            tracks_np = tracks[0].float().cpu().numpy().astype(np.float32)
            visible_np = visible[0].cpu().numpy().astype(bool)
        except Exception as exc:  # noqa: BLE001 - every run failure becomes a typed fault
            raise ToolFault("motion", "run", f"cotracker3 failed: {type(exc).__name__}: {exc}") from exc
        if tracks_np.shape != (t_total, len(q), 2) or visible_np.shape != (t_total, len(q)):
            raise ToolFault("motion", "run", f"cotracker3 returned tracks {tracks_np.shape} / visibility "
                                             f"{visible_np.shape} for {t_total} frames and {len(q)} points")
        tracks_np, inside = inside_image(tracks_np, h, w)  # on an edge pixel: clamped onto its centre, visible
        visible_np &= inside
        return MotionTracks(tracks=fill_lost_positions(tracks_np, q), visible=visible_np, query_frames=query_frames,
                            frame_indices=list(range(t_total)))


def _model_video(torch: Any, frames: np.ndarray, shape: tuple[int, int], device: str) -> Any:
    """The predictor's video ``[1,T,3,h,w]`` float32 on ``device`` at its working ``shape`` ``(h, w)`` from uint8
    ``frames`` ``[T,H,W,3]``, resized as the predictor resizes (module docstring) `RESIZE_CHUNK_BYTES` of
    full-size float frames at a time, into a channels-last video (the layout its resize of the whole clip gave).
    On the CPU the frames are read straight into float (``torch.tensor``), on a GPU sent as uint8 (a quarter of
    the bytes) and converted there. Frames already at ``shape`` are converted straight into the video, unresized:
    the bilinear resize with ``align_corners=True`` to the same size is the identity (the same bits), and it cost
    a float chunk, its output and a copy pass (on the CPU they are read in place, `tools.torch_frames`)."""
    import torch.nn.functional as F

    t_total, h, w = frames.shape[:3]
    out = torch.empty((t_total, shape[0], shape[1], 3), dtype=torch.float32, device=device).permute(0, 3, 1, 2)
    step = max(1, RESIZE_CHUNK_BYTES // (h * w * 3 * 4))
    if (h, w) == tuple(shape):
        for i in range(0, t_total, step):
            part = frames[i:i + step]
            src = uint8_tensor(torch, part) if device == "cpu" else torch.tensor(part, device=device)
            out[i:i + step] = src.permute(0, 3, 1, 2)
        return out[None]
    dtype = torch.float32 if device == "cpu" else torch.uint8
    for i in range(0, t_total, step):
        chunk = torch.tensor(frames[i:i + step], dtype=dtype, device=device).permute(0, 3, 1, 2).float()
        out[i:i + step] = F.interpolate(chunk, size=shape, mode="bilinear", align_corners=True)
    return out[None]
