"""Run context of the reward agent (LangGraph `context_schema`): the heavy objects that never enter state.

`RunContext` carries the backbone, the frame cache (decoded frames and encoded JPEG data URLs), the
evidence tools and the resolved config. The builder makes one at build time and the nodes use it
when an invocation passes no `context=`; callers may pass their own per invocation (another backbone,
frame cache or tools), but its `config` must equal the one the agent was built with
(`build_reward_agent(config)`, i.e. `RunContext(config=config.resolved(), ...)`).

One config per run: the nodes and routes an agent has are wired from its build config, while the nodes
read their switches, caps and preset from the context. A context with another config ran the build's
stages but was gated and labelled by the other (built `full`, invoked with an `audit_no_gate` context: the
final check established a failure, the run scored ungated and said `audit_no_gate`), and the inspect prompt
stated a cap the route did not enforce. Such a context is refused: the run is ineligible, with a reason
naming both presets and the fields that differ (`config_mismatch`), and calls no model. Refusing rather than
quietly using the build config, since a caller who passes a config means it; to run another config, build
an agent for it. `score_video` and `ascore_videos` pass no context, so their runs use the build context.

The same holds for the wiring the build's tools decide: whether the agent has extra evidence tools wires the
extra node. A context with extra tools given to an agent built without them had them run in the background
(started by quality) while no node showed their reports, so the run scored as if there were none; the
opposite wired a node with nothing to run. Such a context is refused too (`tools_mismatch`); other tools
(another tracker, other extra tools where the build has some) are the caller's to choose.

A context's backbone takes its config's draw (`AgentConfig.draw`, `with_config_draw`), as the builder does
for its own: a backbone made at draw 0 (the default) read and wrote draw 0's stage-cache entries for a run
whose config said draw 2, so that run took another draw's answers with no model call.

Decisions where the issue was silent:
- The frame cache (`FrameStore`) lives in `graph.frame_store`.
- Tools: `AgentTools(tracker=..., surprise=..., extra=[...])` injects protocol objects; a
  `tools.toolbox.Toolbox` (which may carry `extra` tools too) is adapted into the same lazy getters. A missing
  tool that a switch needs raises ToolFault.
- Where each tool runs: a `ToolProvider` holds one worker lane per tool (`tracker_lane`, `surprise_lane`;
  `graph.workers`) and nothing else says it. `tool_provider` sets each from the tool itself: "io" for a call to
  the tool service (`tools.client`'s remote tracker / scorer, or what a `Toolbox` with `tools_url` builds), else
  "cpu". One flag for both put an in-process tracker beside a remote scorer on the io threads (more of them than
  cores, and not waited for at exit, where OpenCV then aborted the process), and, once per-tool flags came beside
  it, contradicted them. A hand-built provider names the lane of each remote tool (`surprise_lane="io"`); a lane
  the workers do not have is refused (ValueError) when the provider is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from graph.config import ResolvedConfig, run_settings
from graph.frame_store import FrameStore
from graph.workers import Lane, check_lane
from tools.errors import ToolFault
from tools.extra import EXTRA_SHORT_SIDE, check_extra_tools
from tools.identity import object_identity
from tools.motion.base import TRACK_SHORT_SIDE
from tools.surprise import SURPRISE_SHORT_SIDE

if TYPE_CHECKING:  # pragma: no cover
    from graph.backbone import Backbone
    from tools.extra import EvidenceTool
    from tools.motion import MotionTracker
    from tools.quality import QualityThresholds
    from tools.surprise import SurpriseScorer


@dataclass
class AgentTools:
    """Injected evidence tools (protocol objects); None = not available."""

    tracker: MotionTracker | None = None
    """Motion tracker (tools.motion.MotionTracker protocol)."""
    surprise: SurpriseScorer | None = None
    """Surprise scorer (tools.surprise.SurpriseScorer protocol)."""
    quality: QualityThresholds | None = None
    """Quality pre-check thresholds; None = the defaults of tools.quality."""
    extra: Sequence[EvidenceTool] = ()
    """Your own evaluators (`tools.extra.EvidenceTool`), consulted once per clip and shown in reflect."""
    extra_short_side: int | None = EXTRA_SHORT_SIDE
    """Short side (pixels) of the frames handed to the `extra` tools (scaled down, never up); None = full size."""
    surprise_short_side: int | None = SURPRISE_SHORT_SIDE
    """Short side (pixels) of the frames handed to `surprise` (scaled down, never up); None = full size."""
    track_short_side: int | None = TRACK_SHORT_SIDE
    """Short side (pixels) of the frames handed to `tracker` (scaled down, never up; the tracks are mapped
    back to the clip's pixels); None = full size."""

    def __post_init__(self) -> None:
        check_short_sides(self.extra_short_side, self.surprise_short_side, self.track_short_side)


@dataclass
class ToolProvider:
    """Lazy getters for the evidence tools (built on first use, so building the agent loads nothing)."""

    tracker_factory: Callable[[], Any] | None = None
    """Returns a MotionTracker (may load a model on first call)."""
    surprise_factory: Callable[[], Any] | None = None
    """Returns a SurpriseScorer (may load a model on first call)."""
    quality_thresholds: QualityThresholds | None = None
    """Thresholds of the quality pre-check (a Toolbox's `settings.quality`); None = tools.quality defaults."""
    extra: tuple[EvidenceTool, ...] = ()
    """Extra evidence tools (`tools.extra`), ready objects (they load what they need themselves)."""
    extra_short_side: int | None = EXTRA_SHORT_SIDE
    """Short side (pixels) the extra tools' frames are decoded at; None = full size."""
    surprise_short_side: int | None = SURPRISE_SHORT_SIDE
    """Short side (pixels) the surprise scorer's frames are decoded at; None = full size."""
    track_short_side: int | None = TRACK_SHORT_SIDE
    """Short side (pixels) the tracker's frames are decoded at; None = full size."""
    tracker_id: str | None = None
    """What decides the tracker's tracks (`tools.toolbox.tracker_identity`), part of the frame cache's track keys
    with `track_short_side`; None: the factory itself (`tools.identity.object_identity`), so two factories never
    share tracks."""
    surprise_id: str | None = None
    """Which scorer gives the surprise (`tools.toolbox.scorer_identity`), part of the frame cache's surprise key with
    `surprise_short_side`; None: the factory itself (`tools.identity.object_identity`), so two factories never
    share scores."""
    tracker_lane: Lane = "cpu"
    """Worker lane of the tracker's jobs (`graph.workers`): "io" for a call to the tool service (waiting on the
    network never holds a core's thread), "cpu" for a tracker in this process (module docstring)."""
    surprise_lane: Lane = "cpu"
    """Worker lane of the surprise scorer's jobs, as `tracker_lane`."""

    def __post_init__(self) -> None:
        check_short_sides(self.extra_short_side, self.surprise_short_side, self.track_short_side)
        if self.tracker_id is None and self.tracker_factory is not None:
            self.tracker_id = f"factory {object_identity(self.tracker_factory)}"
        if self.surprise_id is None and self.surprise_factory is not None:
            self.surprise_id = f"factory {object_identity(self.surprise_factory)}"
        check_lane(self.tracker_lane, "tracker_lane")
        check_lane(self.surprise_lane, "surprise_lane")

    def tracker(self) -> MotionTracker:
        """The motion tracker; ToolFault when none is configured or it fails to load."""
        if self.tracker_factory is None:
            raise ToolFault("motion", "load", "motion evidence is on but no motion tracker is configured")
        return _load("motion", self.tracker_factory)

    def surprise(self) -> SurpriseScorer:
        """The surprise scorer; ToolFault when none is configured or it fails to load."""
        if self.surprise_factory is None:
            raise ToolFault("surprise", "load", "WMReward is on but no surprise scorer is configured")
        return _load("surprise", self.surprise_factory)


def check_short_sides(extra: int | None, surprise: int | None, track: int | None) -> None:
    """ValueError naming the setting when a tool frame short side is not None or a positive int (a 0 was
    accepted and every run of a usable clip then ended in a tool fault)."""
    for name, value in (("extra_short_side", extra), ("surprise_short_side", surprise),
                        ("track_short_side", track)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive number of pixels or None (full size), got {value!r}")


def _load(tool: str, factory: Callable[[], Any]) -> Any:
    try:
        return factory()
    except ToolFault:
        raise
    except Exception as exc:  # a configured backend that fails to load is a fault, never a silent switch
        raise ToolFault(tool, "load", f"{type(exc).__name__}: {exc}") from exc


def _lane(remote: bool) -> Lane:
    """The worker lane of a tool's jobs: "io" for a call to the tool service, else "cpu"."""
    return "io" if remote else "cpu"


def tool_provider(tools: object) -> ToolProvider:
    """Adapt `AgentTools`, a `tools.toolbox.Toolbox` or a ready `ToolProvider` (None -> no tools)."""
    if tools is None:
        return ToolProvider()
    if isinstance(tools, ToolProvider):
        return tools
    from tools.toolbox import Toolbox, scorer_identity, tracker_identity

    if isinstance(tools, AgentTools):
        from tools.client import RemoteMotionTracker, RemoteSurpriseScorer

        tracker, surprise = tools.tracker, tools.surprise
        return ToolProvider(None if tracker is None else (lambda: tracker),
                            None if surprise is None else (lambda: surprise), tools.quality,
                            extra=check_extra_tools(tools.extra), surprise_short_side=tools.surprise_short_side,
                            track_short_side=tools.track_short_side, extra_short_side=tools.extra_short_side,
                            tracker_id=None if tracker is None else tracker_identity(tracker),
                            surprise_id=None if surprise is None else scorer_identity(surprise),
                            tracker_lane=_lane(isinstance(tracker, RemoteMotionTracker)),
                            surprise_lane=_lane(isinstance(surprise, RemoteSurpriseScorer)))
    if isinstance(tools, Toolbox):
        return ToolProvider(tools.tracker, tools.surprise, tools.settings.quality, extra=tools.extra,
                            surprise_short_side=tools.settings.surprise_short_side,
                            track_short_side=tools.settings.track_short_side,
                            extra_short_side=tools.settings.extra_short_side, tracker_id=tools.tracker_identity,
                            surprise_id=tools.scorer_identity, tracker_lane=_lane(tools.tracker_remote),
                            surprise_lane=_lane(tools.surprise_remote))
    raise TypeError(f"tools must be AgentTools, Toolbox or ToolProvider, got {type(tools).__name__}")


def preload_tools(config: Any, tools: object) -> None:
    """Load now the evidence models `config` (an `AgentConfig`) uses: the motion tracker when motion
    evidence is on (CoTracker3 loads its weights), the surprise scorer when WMReward is on (V-JEPA 2 loads).
    ToolFault naming the tool. Long-lived users (training's agent reward, the reward service) call it at
    start, since a tool that cannot load makes every run ineligible. A tool service loads its models on its
    side: then the check is that it answers and serves the tool (`ToolServiceClient.check_serves`)."""
    from tools.client import RemoteMotionTracker, RemoteSurpriseScorer
    from tools.motion import CoTracker3Tracker
    from tools.surprise import VJEPA2SurpriseScorer

    switches, provider = config.switches(), tool_provider(tools)
    if switches["motion"]:
        tracker = provider.tracker()
        if isinstance(tracker, CoTracker3Tracker):  # one injected (AgentTools, a Toolbox's own) is not loaded yet
            tracker.load()
        elif isinstance(tracker, RemoteMotionTracker):
            tracker.client.check_serves("motion")
    if switches["wmreward"]:
        scorer = provider.surprise()
        if isinstance(scorer, VJEPA2SurpriseScorer):
            scorer.load()
        elif isinstance(scorer, RemoteSurpriseScorer):
            scorer.client.check_serves("surprise")


def loaded_toolbox(tool_settings: Any, config: Any) -> Any:
    """A `tools.toolbox.Toolbox` from `tool_settings` (`tools.settings.ToolSettings`, read at the edge) with
    the models `config` (an `AgentConfig`) uses loaded now (`preload_tools`): what a command that runs many
    clips hands its agent, so a tool that cannot load stops it at start (ToolFault or ValueError naming the
    tool) instead of making every clip ineligible."""
    from tools.toolbox import Toolbox

    tools = Toolbox(tool_settings)
    preload_tools(config, tools)
    return tools


def config_mismatch(given: ResolvedConfig, built: ResolvedConfig) -> str | None:
    """None when an invocation's context config `given` equals the agent's build config `built`, else the
    reason the run is refused (module docstring): both presets and each field that differs."""
    if given == built:
        return None
    diffs = [f"{f.name} {getattr(given, f.name)!r} (agent {getattr(built, f.name)!r})" for f in fields(built)
             if f.name != "preset" and getattr(given, f.name) != getattr(built, f.name)]
    return (f"the context's config (preset {given.preset!r}) is not the one this agent was built with (preset "
            f"{built.preset!r}): " + ("; ".join(diffs) or "same switches and caps, another preset label")
            + "; pass RunContext(config=<the build AgentConfig>.resolved()) or build an agent for that config")


@dataclass
class RunContext:
    """Heavy per-agent objects the nodes use (LangGraph context_schema); never checkpointed."""

    backbone: Backbone
    """Backbone (chat model + retries + stage cache)."""
    config: ResolvedConfig
    """Resolved module switches and caps."""
    frames: FrameStore = field(default_factory=FrameStore)
    """Decoded-frame / data-URL cache."""
    tools: ToolProvider = field(default_factory=ToolProvider)
    """Evidence tools (lazy)."""

    def __post_init__(self) -> None:
        if self.backbone.cache is not None:  # its stage keys name the images by their digest (FrameStore.keys_images)
            self.frames.keys_images()

    def run_settings(self) -> dict[str, Any]:
        """What a run under this context records of its settings (`graph.config.run_settings`): its config, its extra
        tools' names and its `backbone_settings`; the quality step writes them, and a resume is checked against the
        build context's (`graph.thread_guard`)."""
        return run_settings(self.config, [t.name for t in self.tools.extra], backbone_settings(self.backbone, self.frames))


def backbone_settings(backbone: Backbone, frames: FrameStore) -> dict[str, Any]:
    """The settings of who answers a run's calls, and of what it is shown, that shape its answers: the model's name
    (the backbone's `model_name`, an injected model's class name) and the model an OpenAI-family model asks for
    (`graph.model_request.requested`: two OpenAI models injected were one "ChatOpenAI"), the structured-output method,
    the sampling temperature (`Backbone.temperature`), the completion-token limit (a run started at 512 and resumed at
    4096 mixed answers cut at two limits), and the images' long side and JPEG quality.
    Not the transport's (timeouts, retries, re-asks) nor the endpoint's address (the same model may be served from
    another host after a restart): with those changed the same judge answers, so a run may be resumed under them.
    The temperature is recorded as a Python float, the token limit as a Python int, as `sampling` and `requested` give
    them (`graph.model_request.number`): a NumPy scalar (a sweep over `np.linspace`; a limit assigned to a ChatOpenAI
    after it was built, which pydantic does not check) is no value the trace checkpointer writes, and the run's quality
    step raised."""
    request, temperature = backbone.sampling()  # one read of the model's request
    return {"model": backbone.model_name, "served_model": None if request is None else request.served_model,
            "method": backbone.method, "temperature": temperature,
            "max_tokens": None if request is None else request.max_tokens, "image_long_side": frames.long_side,
            "jpeg_quality": frames.quality}


def tools_mismatch(given: ToolProvider, built: ToolProvider) -> str | None:
    """None when an invocation's tools `given` wire the nodes the agent's build tools `built` wired (both
    with extra evidence tools, or both without), else the reason the run is refused (module docstring)."""
    if bool(given.extra) == bool(built.extra):
        return None

    def named(tools: ToolProvider) -> str:
        return ", ".join(repr(t.name) for t in tools.extra) or "none"

    return (f"the context's extra evidence tools ({named(given)}) do not match the agent's ({named(built)}): "
            "the agent's extra node is wired from the tools it was built with; pass them in the context or "
            "build an agent with these tools")


def with_config_draw(ctx: RunContext) -> RunContext:
    """`ctx` with its backbone at its config's draw (a copy when it differs; the caller's context and backbone
    are left as they are). See the module docstring."""
    if ctx.backbone.draw == ctx.config.draw:
        return ctx
    return replace(ctx, backbone=ctx.backbone.for_draw(ctx.config.draw))
