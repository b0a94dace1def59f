"""The agent's handle on the evidence tools: builds the tracker and surprise scorer lazily from ToolSettings,
in-process or through the tool service (``settings.tools_url``), with identical results either way.

Decisions where the issue was silent: tools are built on first use (thread-safe) and cached for the
life of the Toolbox, also when their model failed to load: the tool itself remembers the failure
for a minute and fails at once meanwhile, then tries again (``tools.errors.LoadFailureMemo``);
``close()`` releases the HTTP connection pool of the remote tools and forgets the remote tools built on
it, so a later call builds them again on a fresh pool (they kept the closed one: a RuntimeError). Remote tools are
keyed in the agent's frame cache by the toolbox itself, not by the service's URL, which says nothing of the models
behind it; its clients pin what the service first answered with (`tools.client.ServedPin`). ``extra`` carries your own evidence
tools (``tools.extra``) next to the configured ones; they always run in process (the tool service
serves only tracks and surprise). Where each tool runs is said per tool (``tracker_remote``,
``surprise_remote``; the agent's worker lane of its jobs, `graph.context.ToolProvider`): an injected tool by what it
is, a tool the toolbox builds by ``uses_service`` (the settings name a tool service), so a toolbox with a URL given
its own in-process tracker tracks in process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tools.client import RemoteMotionTracker, RemoteSurpriseScorer, ServedPin, ToolServiceClient
from tools.extra import EvidenceTool, check_extra_tools
from tools.identity import object_identity
from tools.motion import CoTracker3Tracker, LKTracker, MotionTracker, build_tracker
from tools.quality import QualityCheck, check_quality
from tools.settings import ToolSettings
from tools.surprise import SurpriseScorer, VJEPA2SurpriseScorer

if TYPE_CHECKING:
    import torch


def tracker_identity(tracker: object) -> str:
    """What decides a tracker's tracks, as the frame cache's track keys hold it (`graph.nodes.tracking`): the
    backend and its settings for the built-in ones (an LK tracker injected or built from settings is one), else
    the object itself (`tools.identity.object_identity`: no two injected objects share, nor a later one at a
    collected one's address). A CoTracker3 allowed random weights without a checkpoint is the object itself too:
    its weights are its own draw (from a hub dir, "pretrained" was off); so is one given its predictor (its
    settings do not say which weights that holds)."""
    if isinstance(tracker, LKTracker):
        return f"lk {tracker.config!r}"
    if isinstance(tracker, CoTracker3Tracker) and not tracker.given_predictor and not (
            tracker.allow_random_weights and tracker.checkpoint is None):
        return (f"cotracker3 checkpoint={tracker.checkpoint} hub_dir={tracker.hub_dir} device={tracker.device}"
                f" interp_shape={tracker.interp_shape}")
    return object_identity(tracker)


def scorer_identity(scorer: object) -> str:
    """What decides a surprise scorer's evidence, as the frame cache's surprise key holds it
    (`graph.nodes.surprise`): for V-JEPA 2 its model (hub id or path), dtype, device, top_k and windows (an
    injected scorer or one built from settings is one; the batch size only groups windows per forward pass), else
    the object itself (`tools.identity.object_identity`: no two injected objects share, nor a later one at a
    collected one's address), as for a V-JEPA 2 scorer given its model."""
    if isinstance(scorer, VJEPA2SurpriseScorer) and not scorer.given_model:  # a given model: model_id says nothing
        return (f"vjepa2 model={scorer.model_id} dtype={scorer.dtype} device={scorer.device} top_k={scorer.top_k}"
                f" window={scorer.window} stride={scorer.stride} context={scorer.context}")
    return object_identity(scorer)


def served_identity(tracker: object, scorer: object | None) -> str:
    """What a tool service serves, as its answers name it (`tools.client.SERVED_HEADER`): a short digest of its
    loaded tracker's and scorer's content (`served_tracker`, `served_scorer`; None: surprise is off)."""
    import hashlib

    text = f"{served_tracker(tracker)}\n{'none' if scorer is None else served_scorer(scorer)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def served_tracker(tracker: object) -> str:
    """A served tracker as the content that decides its tracks: a CoTracker3's predictor weights
    (`module_digest`), working size and kind of device, not the folders it was loaded from (replicas behind one
    URL keep their weights where they like, on devices of other numbers); else `tracker_identity`."""
    if isinstance(tracker, CoTracker3Tracker):
        import torch

        predictor = tracker.predictor
        if isinstance(predictor, torch.nn.Module):
            return (f"cotracker3 {type(predictor).__qualname__} weights={module_digest(predictor)}"
                    f" interp_shape={tracker.interp_shape} device={torch.device(tracker.device).type}")
    return tracker_identity(tracker)


def served_scorer(scorer: object) -> str:
    """A served surprise scorer as the content that decides its evidence (as `served_tracker`): a V-JEPA 2's weights,
    configuration (its ``_name_or_path``, a folder, left out), top_k, windows and kind of device; else
    `scorer_identity`."""
    if isinstance(scorer, VJEPA2SurpriseScorer):
        import torch

        model = scorer.model
        config = {k: v for k, v in model.config.to_dict().items()
                  if not k.startswith("_") and k != "transformers_version"}
        return (f"vjepa2 weights={module_digest(model)} config={sorted(config.items())!r} top_k={scorer.top_k}"
                f" window={scorer.window} stride={scorer.stride} context={scorer.context}"
                f" device={torch.device(scorer.device).type}")
    return scorer_identity(scorer)


def module_digest(module: torch.nn.Module) -> str:
    """SHA-256 (16 hex digits) of a torch module's state: each entry's name, dtype, shape and bytes, by name."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name, value in sorted(module.state_dict().items()):
        tensor = value.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name} {tensor.dtype} {tuple(value.shape)}\n".encode())
        digest.update(tensor.view(torch.uint8).numpy())
    return digest.hexdigest()[:16]


def _absolute_paths(settings: ToolSettings) -> ToolSettings:
    """`settings` with its model paths absolute against the working directory now (`tools.hub.absolute_model`): the
    toolbox builds its tools on first use, maybe in another folder, and names them in cache keys before that."""
    from tools.hub import absolute_model, absolute_path

    return settings.model_copy(update={"cotracker_checkpoint": absolute_path(settings.cotracker_checkpoint),
                                       "cotracker_hub_dir": absolute_path(settings.cotracker_hub_dir),
                                       "vjepa_model": absolute_model(settings.vjepa_model)})


class Toolbox:
    """Lazily built evidence tools for one process (share it across agent runs)."""

    def __init__(self, settings: ToolSettings | None = None, *, tracker: MotionTracker | None = None,
                 scorer: SurpriseScorer | None = None, extra: Sequence[EvidenceTool] = ()) -> None:
        self.settings = _absolute_paths(settings or ToolSettings())
        self.extra = check_extra_tools(extra)
        self._tracker = tracker
        self._injected_tracker = tracker
        self._cotracker: CoTracker3Tracker | None = None  # the tracker when this toolbox built CoTracker3
        self._scorer = scorer
        self._injected_scorer = scorer
        self._client: ToolServiceClient | None = None
        self._served = ServedPin()  # what the service serves, pinned across the clients close() replaces
        self._lock = threading.Lock()

    @property
    def uses_service(self) -> bool:
        """Whether the settings name a tool service (``tools_url``): the tools this toolbox builds itself are its
        calls. Not where an injected tool runs: `tracker_remote` / `surprise_remote` say that, per tool."""
        return self.settings.tools_url is not None

    @property
    def tracker_remote(self) -> bool:
        """Whether the tracker this toolbox gives is a call to the tool service (an injected tracker: whether it is one;
        else `uses_service`): its jobs' lane (`graph.context.ToolProvider.tracker_lane`)."""
        injected = self._injected_tracker
        return self.uses_service if injected is None else isinstance(injected, RemoteMotionTracker)

    @property
    def surprise_remote(self) -> bool:
        """Whether the surprise scorer this toolbox gives is a call to the tool service (as `tracker_remote`)."""
        injected = self._injected_scorer
        return self.uses_service if injected is None else isinstance(injected, RemoteSurpriseScorer)

    def _service(self) -> ToolServiceClient:
        if self._client is None:
            s = self.settings
            self._client = ToolServiceClient(s.tools_url or "", token=s.token(), timeout_s=s.request_timeout_s,
                                             connect_timeout_s=s.connect_timeout_s, retries=s.retries,
                                             served=self._served)
        return self._client

    @property
    def tracker_identity(self) -> str:
        """`tracker_identity` of the tracker this toolbox gives, known without building or loading it."""
        s = self.settings
        if self._injected_tracker is not None:
            return tracker_identity(self._injected_tracker)
        if self.uses_service:  # this toolbox's: its client refuses other models than it was answered with first
            return f"remote {s.tools_url} {object_identity(self)}"
        if s.motion_backend == "cotracker3":
            return tracker_identity(CoTracker3Tracker(checkpoint=s.cotracker_checkpoint, hub_dir=s.cotracker_hub_dir,
                                                      device=s.device))
        return tracker_identity(LKTracker())

    @property
    def scorer_identity(self) -> str:
        """`scorer_identity` of the surprise scorer this toolbox gives, known without building or loading it."""
        s = self.settings
        if self._injected_scorer is not None:
            return scorer_identity(self._injected_scorer)
        if self.uses_service:  # this toolbox's: its client refuses other models than it was answered with first
            return f"remote {s.tools_url} {object_identity(self)}"
        return scorer_identity(self._vjepa2())

    def _vjepa2(self) -> VJEPA2SurpriseScorer:
        """The V-JEPA 2 scorer the settings configure (not loaded: it loads on its first score)."""
        s = self.settings
        return VJEPA2SurpriseScorer.from_pretrained(s.vjepa_model, device=s.device, dtype=s.vjepa_dtype,
                                                    batch_size=s.surprise_batch_size, top_k=s.surprise_top_k)

    def tracker(self) -> MotionTracker:
        """The configured motion tracker (CoTracker3 loads here; failures raise ToolFault)."""
        with self._lock:
            if self._tracker is None:
                s = self.settings
                if self.uses_service:
                    self._tracker = RemoteMotionTracker(self._service())
                elif s.motion_backend == "cotracker3":  # kept even if its load fails: it remembers the failure
                    self._cotracker = CoTracker3Tracker(checkpoint=s.cotracker_checkpoint,
                                                        hub_dir=s.cotracker_hub_dir, device=s.device)
                    self._tracker = self._cotracker
                else:
                    self._tracker = build_tracker("lk")
            if self._cotracker is not None:
                self._cotracker.load()  # idempotent; raises ToolFault while the model cannot load
            return self._tracker

    def surprise(self) -> SurpriseScorer:
        """The configured surprise scorer (V-JEPA 2 loads on its first score)."""
        with self._lock:
            if self._scorer is None:
                self._scorer = RemoteSurpriseScorer(self._service()) if self.uses_service else self._vjepa2()
            return self._scorer

    def quality(self, frames: np.ndarray) -> QualityCheck:
        """Quality pre-check with the configured thresholds (always in-process: it is cheap)."""
        return check_quality(frames, thresholds=self.settings.quality)

    def close(self) -> None:
        """Release the remote tools' connection pool; the toolbox stays usable (module docstring)."""
        with self._lock:
            if self._client is not None:
                client, self._client = self._client, None
                if isinstance(self._tracker, RemoteMotionTracker) and self._tracker.client is client:
                    self._tracker = None
                if isinstance(self._scorer, RemoteSurpriseScorer) and self._scorer.client is client:
                    self._scorer = None
                client.close()
