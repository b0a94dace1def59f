"""Agent configuration: module switches, the paper's 14 presets (Table 2) and the loop caps.

A preset only sets module switches; `graph.builder` wires the graph from the switches.
Cumulative presets add modules in the paper's order (structured report + score mapping, task
decomposition, task-blind observation, adaptive visual verification, motion evidence, WMReward
feedback + reflection, scope audit + repair, failure gate); the `no_*` presets remove one module
from `full`. Only `full` and the `no_*` presets apply the failure gate.

Decisions where the issue was silent:
- `direct` switches every module off: one call with frames, instruction and scoring criteria.
- `structured` keeps the instruction as a single essential requirement (no decomposition call).
- `motion` without `visual_verify` (preset `no_visual_verify`) runs one automatic grid track over the
  uniform frame sample in reflect and shows its summary and overlays there.
- Explicit switch overrides may be given next to a preset:
  `AgentConfig(preset="full", audit=False)` keeps `preset="full"` as a label but wires without audit;
  `AgentConfig.from_preset(name, **overrides)` is the same thing spelled out. The settings that differ from
  the preset's (`config_overrides`) are recorded beside the label: in the result (`overrides`), the trace
  state, and `raa runs` (preset "full+") / `raa trace`; the label stays the paper's name, by which tables
  group and `--preset` filters.
- `inspect_mode` and `coordinates` (`SERVER_FIELDS`, RAA_INSPECT_MODE / RAA_COORDINATES) are not overrides: they
  fit the agent to its server (one with no tool calling; a model that grounds in pixels), the method stays the
  preset's. They counted as overrides, so every run against a Qwen2.5-VL server (plan, pixels) was "full+" and
  read as a changed method. They are recorded apart (`server_settings`: the result's and the state's `server`,
  `raa trace`'s header); older runs, which listed them among their overrides, are read so too (`recorded_settings`).
- Without the structured report (`direct`, or `structured=False`) every other module is off, and so are the
  switches a run records; a switch turned on explicitly next to it is refused (nothing would run it).
- `nearby_extra` may lower the design's 16-frame allowance for long clips but not raise it (as
  `max_repair_rounds` may not exceed 3): a larger value widened the access policy of a run still labelled
  with a paper preset.
- Caps must be whole numbers (an `int`, not a bool) and switches True, False or None: a float cap failed
  every run (observe_frames=10.5) or never ended a loop (max_tool_rounds=nan), and "no" read as True. A numpy
  integer is kept as its int: a run records every cap and its draw, which a checkpoint cannot hold as numpy.int64.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

from tools.coords import Coordinates
from tools.sampling import NEARBY_EXTRA_LIMIT

INSTRUCTION_CHARS_LIMIT = 4000
"""The longest requirement text (`graph.schemas.Requirement.text`), and so the longest instruction a run
keeps: presets without decomposition make the whole instruction one requirement."""

Preset = Literal[
    "direct", "structured", "decomposed", "task_blind", "visual_verify", "motion", "wmreward",
    "audit_no_gate", "full", "no_task_blind", "no_visual_verify", "no_wmreward", "no_audit", "no_motion",
]
InspectMode = Literal["tools", "plan"]
MotionPrefetch = Literal["grid", "off"]
PRESETS: tuple[str, ...] = get_args(Preset)
SWITCHES: tuple[str, ...] = (
    "structured", "decompose", "task_blind", "visual_verify", "motion", "wmreward", "audit", "failure_gate",
)
MAX_REPAIR_ROUNDS = 3

_CUMULATIVE = ("direct", "structured", "decomposed", "task_blind", "visual_verify", "motion", "wmreward",
               "audit_no_gate", "full")
_REMOVALS = {"no_task_blind": "task_blind", "no_visual_verify": "visual_verify", "no_wmreward": "wmreward",
             "no_audit": "audit", "no_motion": "motion"}


def preset_switches(preset: str) -> dict[str, bool]:
    """Module switches of one of the 14 presets (paper Table 2)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    if preset in _REMOVALS:
        switches = preset_switches("full")
        switches[_REMOVALS[preset]] = False
        return switches
    level = _CUMULATIVE.index(preset)  # 0 = direct ... 8 = full; switch i is on from level i+1
    return {name: level >= i + 1 for i, name in enumerate(SWITCHES)}


def presets_using(switch: str) -> tuple[str, ...]:
    """The presets (in PRESETS order) whose switch `switch` is on, e.g. those that need V-JEPA 2 for
    "wmreward": for messages that name them instead of describing them."""
    if switch not in SWITCHES:
        raise ValueError(f"unknown switch {switch!r}; expected one of {', '.join(SWITCHES)}")
    return tuple(p for p in PRESETS if preset_switches(p)[switch])


@dataclass(frozen=True)
class AgentConfig:
    """Which modules the reward agent runs and the caps of its loops."""

    preset: Preset = "full"
    """Named configuration from the paper's Table 2; sets every module switch left as None."""
    structured: bool | None = None
    """Structured report + fixed score mapping (off: the model writes the reward directly, preset direct)."""
    decompose: bool | None = None
    """Task decomposition: an LLM extracts the frozen task contract from the instruction."""
    task_blind: bool | None = None
    """Task-blind observation of 32 uniform frames before the instruction is seen."""
    visual_verify: bool | None = None
    """Adaptive visual verification: the inspect <-> tool_call loop (frames and crops)."""
    motion: bool | None = None
    """Motion evidence: the track_motion tool (point tracks + overlays)."""
    wmreward: bool | None = None
    """WMReward surprise windows shown in reflect."""
    audit: bool | None = None
    """Scope audit with image-backed repair rounds."""
    failure_gate: bool | None = None
    """Final check + failure gate (R = 0 when failure is established or an essential is unverifiable)."""
    inspect_mode: InspectMode = "tools"
    """"tools": LLM tool-calling loop; "plan": one structured InspectionPlan (servers without tool calls)."""
    coordinates: Coordinates = "unit"
    """How the model writes crop boxes and track points: "unit" fractions of the frame (0..1), "per_mille"
    thousandths (0..1000: Qwen2-VL, Qwen3-VL, InternVL grounding) or "pixels" of the frames as sent
    (long side `FrameStore.long_side`; Qwen2.5-VL). The inspect and plan prompts state it, and the
    agent converts before cropping or tracking."""
    motion_prefetch: MotionPrefetch = "grid"
    """Motion evidence on: "grid" starts the most likely grid track (track_motion's default stretch,
    the whole clip; or the sampled frames reflect tracks when there is no inspect loop) in a
    low-priority worker when assess starts, so a matching track_motion call reuses it instead of
    waiting for it (one wasted track per clip when the model never asks); "off" tracks only on request."""
    observe_frames: int = 32
    """Frames sampled uniformly for observation and assessment."""
    max_tool_rounds: int = 4
    """Cap on inspect <-> tool_call rounds."""
    frame_budget: int = 48
    """Cap on frames (views, crops, overlays) returned by inspection tools in one run."""
    max_repair_rounds: int = MAX_REPAIR_ROUNDS
    """Audit repair rounds (at most 3)."""
    nearby_extra: int = NEARBY_EXTRA_LIMIT
    """Clips longer than 81 frames: extra frames beyond the initial sample that inspection may add (each a
    frame the model asked for); at most `NEARBY_EXTRA_LIMIT` (16), the design's allowance."""
    max_images_per_call: int = 48
    """Cap on images in one backbone request (keep below the server's --limit-mm-per-prompt); must be at
    least observe_frames and frame_budget (observe/assess and the inspect conversation send that many)."""
    surprise_windows: int = 2
    """How many of the most surprising WMReward windows reflect shows."""
    max_instruction_chars: int = INSTRUCTION_CHARS_LIMIT
    """Longer instructions are truncated to this length and the truncation is recorded as a note (at most
    `INSTRUCTION_CHARS_LIMIT`)."""
    draw: int = 0
    """Which independent draw of the backbone's answers this run takes. Runs with different draws (or
    temperatures) never share stage-cache entries, so with a sampling temperature above 0
    (RAA_TEMPERATURE) each draw samples its own answers (scoring one clip with draws 0..N-1 measures how
    much its reward varies); 0 is the default, whose cache entries are those of any run that names no draw."""

    def __post_init__(self) -> None:
        for f in fields(self):  # types first: a float cap (nan: the tool loop never ended) or a str switch ("no")
            value = getattr(self, f.name)
            if f.name in SWITCHES and value is not None and not isinstance(value, bool):
                raise ValueError(f"{f.name} must be True, False or None, got {value!r}")
            if f.type == "int" and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise ValueError(f"{f.name} must be a whole number (int), got {value!r}")
            if f.type == "int":  # a numpy integer (np.arange) as an int: the run records it (msgpack knows no int64)
                object.__setattr__(self, f.name, int(value))
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; expected one of {', '.join(PRESETS)}")
        if self.inspect_mode not in get_args(InspectMode):
            raise ValueError(f"inspect_mode must be 'tools' or 'plan', got {self.inspect_mode!r}")
        if self.coordinates not in get_args(Coordinates):
            raise ValueError(f"coordinates must be one of {get_args(Coordinates)}, got {self.coordinates!r}")
        if self.motion_prefetch not in get_args(MotionPrefetch):
            raise ValueError(f"motion_prefetch must be 'grid' or 'off', got {self.motion_prefetch!r}")
        if not 0 <= self.max_repair_rounds <= MAX_REPAIR_ROUNDS:
            raise ValueError(f"max_repair_rounds must be in 0..{MAX_REPAIR_ROUNDS}, got {self.max_repair_rounds}")
        for name in ("observe_frames", "max_tool_rounds", "frame_budget", "max_images_per_call",
                     "surprise_windows", "max_instruction_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_instruction_chars > INSTRUCTION_CHARS_LIMIT:
            raise ValueError(f"max_instruction_chars must be <= {INSTRUCTION_CHARS_LIMIT} (the longest requirement "
                             f"text), got {self.max_instruction_chars}")
        if not 2 <= self.observe_frames <= 64:
            raise ValueError(f"observe_frames must be in 2..64, got {self.observe_frames}")
        on = [name for name in SWITCHES[1:] if getattr(self, name) is True]
        if on and not self.switches()["structured"]:
            raise ValueError(f"{', '.join(on)} need the structured report; direct scoring (structured off) is "
                             "one call without them")
        if self.draw < 0:
            raise ValueError(f"draw must be >= 0, got {self.draw}")
        if not 0 <= self.nearby_extra <= NEARBY_EXTRA_LIMIT:  # DESIGN §3: at most 16, like max_repair_rounds
            raise ValueError(f"nearby_extra must be in 0..{NEARBY_EXTRA_LIMIT}, got {self.nearby_extra}")
        # observe/assess send every sampled frame, and the inspect conversation carries every tool image
        # of the run: both must fit in one request, or the server refuses it (--limit-mm-per-prompt)
        for name in ("observe_frames", "frame_budget"):
            if getattr(self, name) > self.max_images_per_call:
                raise ValueError(f"{name} ({getattr(self, name)}) exceeds max_images_per_call "
                                 f"({self.max_images_per_call}): raise max_images_per_call too (and the "
                                 "server's per-request image limit)")

    @classmethod
    def from_preset(cls, preset: Preset, **overrides: object) -> AgentConfig:
        """A config for `preset` with some fields (switches or caps) overridden."""
        return cls(preset=preset, **overrides)  # type: ignore[arg-type]

    def switches(self) -> dict[str, bool]:
        """Effective module switches: the preset's, with explicit (non-None) overrides applied; without the
        structured report every other module is off (direct scoring is one call: `full` with
        structured=False recorded audit and the failure gate as on while neither ran)."""
        resolved = preset_switches(self.preset)
        for name in SWITCHES:
            value = getattr(self, name)
            if value is not None:
                resolved[name] = bool(value)
        if not resolved["structured"]:
            resolved = dict.fromkeys(resolved, False)
        return resolved

    def resolved(self) -> ResolvedConfig:
        """Switches and caps as plain booleans/ints (what the builder and nodes read)."""
        values: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in SWITCHES}
        values.update(self.switches())
        return ResolvedConfig(**values)

    def with_overrides(self, **changes: Any) -> AgentConfig:
        """A copy with some fields replaced (validated again)."""
        return replace(self, **changes)


def config_overrides(cfg: ResolvedConfig) -> dict[str, bool | int | str]:
    """The settings of `cfg` that differ from its preset's (the preset's switches, `AgentConfig`'s defaults
    for the rest), by name: what the result and the trace record beside the preset label, so a run of
    `AgentConfig(preset="full", audit=False)` is not read as one of `full`. Empty for the plain preset. The
    draw is no setting (which sample of the same configuration's answers a run takes; rows record it as
    `draw`), so a run of draw 3 is not "full+"; nor are the server settings (`SERVER_FIELDS`)."""
    expected: dict[str, object] = {f.name: f.default for f in fields(AgentConfig) if f.name not in SWITCHES}
    expected.update(preset_switches(cfg.preset))
    return {f.name: getattr(cfg, f.name) for f in fields(cfg)
            if f.name not in ("preset", "draw", *SERVER_FIELDS) and getattr(cfg, f.name) != expected[f.name]}


SERVER_FIELDS = ("inspect_mode", "coordinates")
"""The settings that fit the agent to its server, not its method (module docstring): whether the server takes
tool calls, and how its model writes boxes and points."""


SPEED_FIELDS = ("motion_prefetch",)
"""The settings that decide when work is done, never what a run gathers or scores (`graph.nodes.tracking`: the
speculative grid track is the computation a matching request would start): recorded among the overrides, but a run
may be resumed under another value (`graph.thread_guard.resume_refusal`, `result_overrides`)."""


def result_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`overrides` (`config_overrides`, or a run's recorded ones) less the `SPEED_FIELDS`: those that change what a
    run gathers or scores."""
    return {k: v for k, v in overrides.items() if k not in SPEED_FIELDS}


def server_settings(cfg: ResolvedConfig) -> dict[str, str]:
    """`cfg`'s server settings by name, all of them: what the result and the trace record as `server`."""
    return {name: getattr(cfg, name) for name in SERVER_FIELDS}


def run_caps(cfg: ResolvedConfig) -> dict[str, int]:
    """`cfg`'s caps by name, all of them, at their values (not as differences from `AgentConfig`'s defaults): every
    setting but the preset, the switches, the server and speed settings and the draw."""
    other = ("preset", "draw", *SWITCHES, *SERVER_FIELDS, *SPEED_FIELDS)
    return {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name not in other}


def run_settings(cfg: ResolvedConfig, extra_tools: Sequence[str] = (),
                 backbone: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a run records of the config it runs under (the quality step writes it to the state): `preset`, the
    `switches`, the `overrides` (`config_overrides`), the `caps` (`run_caps`), the `server` settings
    (`server_settings`), the `draw` (whose stage-cache entries it takes), the names of the agent's `extra_tools`
    (`tools.extra`, which wire the extra node and whose reports reflect shows) and the `backbone` settings that shape
    its answers (`graph.context.backbone_settings`: empty when not given). A run resumed from its checkpoint must
    continue under the same (`graph.thread_guard.resume_refusal`), judged by the caps in full: the overrides are
    differences from the defaults of the version that ran, which a later version may change."""
    return {"preset": cfg.preset, "switches": cfg.switches(), "overrides": config_overrides(cfg),
            "caps": run_caps(cfg), "server": server_settings(cfg), "draw": cfg.draw, "extra_tools": list(extra_tools),
            "backbone": dict(backbone or {})}


def recorded_settings(overrides: Mapping[str, Any], server: Mapping[str, Any]) -> tuple[dict, dict]:
    """(overrides, server settings) of a recorded run from its `overrides` and `server`: a run recorded before the
    two were kept apart listed its server settings that differ from the defaults among its overrides."""
    return ({k: v for k, v in overrides.items() if k not in SERVER_FIELDS},
            {**{k: v for k, v in overrides.items() if k in SERVER_FIELDS}, **server})


@dataclass(frozen=True)
class ResolvedConfig:
    """An `AgentConfig` with every switch resolved to a boolean."""

    preset: str
    """Preset label (for results and traces)."""
    inspect_mode: str
    """"tools" or "plan"."""
    coordinates: Coordinates
    """"unit", "per_mille" or "pixels": how the model writes boxes and points."""
    motion_prefetch: str
    """"grid" or "off": speculative grid track when motion evidence is on."""
    observe_frames: int
    """Uniform frames for observation and assessment."""
    max_tool_rounds: int
    """Cap on inspect rounds."""
    frame_budget: int
    """Cap on frames returned by inspection tools."""
    max_repair_rounds: int
    """Cap on repair rounds."""
    nearby_extra: int
    """Extra frames for clips longer than 81 frames."""
    max_images_per_call: int
    """Cap on images per backbone request."""
    surprise_windows: int
    """Surprise windows shown in reflect."""
    max_instruction_chars: int
    """Instruction truncation length."""
    draw: int
    """Stage-cache draw (AgentConfig.draw)."""
    structured: bool
    """Structured report + score mapping."""
    decompose: bool
    """Task decomposition."""
    task_blind: bool
    """Task-blind observation."""
    visual_verify: bool
    """Inspect loop."""
    motion: bool
    """Motion tool."""
    wmreward: bool
    """Surprise evidence."""
    audit: bool
    """Audit + repair."""
    failure_gate: bool
    """Final check + gate."""

    def switches(self) -> dict[str, bool]:
        """The module switches by name (as `AgentConfig.switches` gave them)."""
        return {"structured": self.structured, "decompose": self.decompose, "task_blind": self.task_blind,
                "visual_verify": self.visual_verify, "motion": self.motion, "wmreward": self.wmreward,
                "audit": self.audit, "failure_gate": self.failure_gate}

    @property
    def reflect(self) -> bool:
        """Reflect runs when there is new evidence to fold in (inspection, motion or surprise)."""
        return self.structured and (self.visual_verify or self.wmreward or self.motion)
