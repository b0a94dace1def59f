"""Backbone settings: which OpenAI-compatible endpoint the reward agent talks to, and how.

`BackboneSettings.from_env()` is the only place that reads `RAA_*` environment variables; library code
receives a settings object. Decisions where the issue was silent:
- `RAA_SCHEMA_RETRIES`, `RAA_TEMPERATURE` and `RAA_MAX_TOKENS` are read too (same naming scheme).
- `RAA_CACHE_PATH` set to an empty string, `none` or `off` disables the on-disk stage cache (in-memory
  cache only), so a user can force fresh backbone calls.
- `RAA_TRACES_PATH` cannot be turned off (every run is checkpointed there): `none`, `off`, `false` or `0`
  raise `SettingsError` (they used to create a database file named `off`); `:memory:` keeps the traces in
  the process only, and an empty value means the default.
- A setting that does not parse (e.g. `RAA_TIMEOUT_S=abc`) raises `SettingsError` naming the variable
  instead of silently falling back to a default.
- `RAA_INSPECT_MODE` (`tools` | `plan`) lives here because it describes the server: whether it accepts
  tool-calling requests (vLLM refuses them unless started with a tool-call parser, and Qwen2.5-VL's chat
  template has no tools). The CLI commands and `langgraph dev` build their `AgentConfig` with `agent_config(preset)`;
  `AgentConfig`'s own default stays `tools`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from graph.config import AgentConfig, InspectMode
from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S
from tools.coords import Coordinates
from tools.env_numbers import number_text_error

StructuredMethod = Literal["json_schema", "function_calling", "json_mode"]
TraceDurability = Literal["exit", "async", "sync"]
REQUIRED_ENV = ("RAA_BASE_URL", "RAA_MODEL", "RAA_API_KEY")
_OFF = {"", "none", "off", "false", "0"}

VLLM_HELP = (
    "Start an OpenAI-compatible server, e.g. vLLM:\n"
    "  vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt '{\"image\": 64}' --port 8000\n"
    "then point the agent at it:\n"
    "  export RAA_BASE_URL=http://127.0.0.1:8000/v1 RAA_MODEL=Qwen/Qwen2.5-VL-7B-Instruct RAA_API_KEY=EMPTY\n"
    "  export RAA_INSPECT_MODE=plan   # Qwen2.5-VL's chat template has no tools: inspect with one plan\n"
    "  export RAA_COORDINATES=pixels  # Qwen2.5-VL writes boxes in pixels (per_mille: Qwen3-VL, InternVL)\n"
    "(a model served with tool calling, e.g. vLLM --enable-auto-tool-choice --tool-call-parser NAME,\n"
    "can keep the default RAA_INSPECT_MODE=tools), and check the setup:\n"
    "  raa doctor --call"
)


class SettingsError(ValueError):
    """An `RAA_*` environment variable has a value that cannot be used."""


def env_choice(env: Mapping[str, str], var: str, choices: tuple[str, ...]) -> str | None:
    """`env[var]` stripped (None when unset or empty); SettingsError unless it is one of `choices`."""
    value = env.get(var, "").strip()
    if value and value not in choices:
        raise SettingsError(f"{var} must be one of {choices}, got {value!r}")
    return value or None


def env_number(env: Mapping[str, str], var: str, kind: type[int] | type[float]) -> int | float | None:
    """`env[var]` parsed with `kind` (None when unset or empty); SettingsError when it does not parse."""
    raw = env.get(var, "").strip()
    if not raw:
        return None
    why = number_text_error(raw, kind)  # "1_0" and "١٠" parse as 10: a typo taken silently
    if why is not None:
        raise SettingsError(f"{var}={raw!r} {why}")
    try:
        return kind(raw)
    except ValueError as exc:
        raise SettingsError(f"{var}={raw!r} is not a valid {kind.__name__}") from exc


def traces_path_from_env(env: Mapping[str, str]) -> str:
    """RAA_TRACES_PATH (~ expanded), or the default; SettingsError for "off". The commands that only read the
    trace database (`raa runs`, `raa trace`, `raa prune`) read this, not every `RAA_*` setting."""
    raw = env.get("RAA_TRACES_PATH", "").strip()
    if raw and raw.lower() in _OFF:
        raise SettingsError(f"invalid RAA_* setting: RAA_TRACES_PATH={raw!r}: the trace database cannot be "
                            "turned off (every run is checkpointed there); set a file path, or :memory: "
                            "to keep traces only while the process runs (raa trace / raa report cannot "
                            "read them afterwards)")
    return os.path.expanduser(raw) if raw else BackboneSettings.traces_path  # ~ as the tool paths


def cache_path_from_env(env: Mapping[str, str]) -> str | None:
    """RAA_CACHE_PATH (~ expanded; None for "off"), or the default when unset."""
    if "RAA_CACHE_PATH" not in env:
        return BackboneSettings.cache_path
    raw = env["RAA_CACHE_PATH"].strip()
    return None if raw.lower() in _OFF else os.path.expanduser(raw)


def claim_age_from_env(env: Mapping[str, str]) -> float:
    """RAA_FOREIGN_CLAIM_MAX_AGE_S, or the default; SettingsError naming it unless a finite number > 0."""
    value = env_number(env, "RAA_FOREIGN_CLAIM_MAX_AGE_S", float)
    if value is None:
        return FOREIGN_CLAIM_MAX_AGE_S
    if not 0 < value < math.inf:
        raise SettingsError(f"invalid RAA_* setting: RAA_FOREIGN_CLAIM_MAX_AGE_S must be a finite number > 0, "
                            f"got {value}")
    return value


def trace_options(settings: BackboneSettings | None, durability: TraceDurability | None,
                  claim_max_age_s: float | None) -> tuple[TraceDurability, float | None]:
    """(durability, foreign-claim age) of a run: `durability` and `claim_max_age_s` where given, else those of
    `settings` (`trace_durability`, `foreign_claim_max_age_s`); without settings "exit" and None, the agent's own
    claim age (`graph.thread_claims`: bound from the settings it was built with, else 6 h). The Python API's
    `score_video` / `ascore_videos` take them so from the settings they build the agent with."""
    if settings is None:
        return (BackboneSettings().trace_durability if durability is None else durability), claim_max_age_s
    return (settings.trace_durability if durability is None else durability,
            settings.foreign_claim_max_age_s if claim_max_age_s is None else claim_max_age_s)


@dataclass(frozen=True)
class BackboneSettings:
    """Connection and request policy for the agent's chat-model backbone."""

    base_url: str | None = None
    """OpenAI-compatible base URL, e.g. `http://127.0.0.1:8000/v1` (RAA_BASE_URL)."""
    model: str | None = None
    """Served model name, e.g. `Qwen/Qwen2.5-VL-7B-Instruct` (RAA_MODEL)."""
    api_key: str | None = None
    """API key; `EMPTY` for a local vLLM server (RAA_API_KEY)."""
    method: StructuredMethod = "json_schema"
    """Structured-output method: json_schema | function_calling | json_mode (RAA_STRUCTURED_METHOD)."""
    timeout_s: float = 120.0
    """Per-request timeout in seconds (RAA_TIMEOUT_S)."""
    max_retries: int = 4
    """Transport retries after the first attempt (timeouts, 429, 5xx, connection errors) (RAA_MAX_RETRIES)."""
    schema_retries: int = 2
    """Re-asks after a reply that fails schema validation (RAA_SCHEMA_RETRIES)."""
    image_long_side: int = 512
    """Frames are resized so their long side is at most this many pixels (RAA_IMAGE_LONG_SIDE)."""
    jpeg_quality: int = 85
    """JPEG quality of the frames sent as data URLs, 1..100 (RAA_JPEG_QUALITY)."""
    temperature: float = 0.0
    """Sampling temperature (RAA_TEMPERATURE)."""
    max_tokens: int | None = None
    """Completion token cap; None leaves it to the server (RAA_MAX_TOKENS)."""
    cache_path: str | None = "runs/stage_cache.sqlite"
    """SQLite stage-output cache; None keeps the cache in memory only (RAA_CACHE_PATH)."""
    traces_path: str = "runs/traces.sqlite"
    """SQLite checkpoint database holding every run's trace (RAA_TRACES_PATH)."""
    trace_durability: TraceDurability = "exit"
    """When a run's checkpoints are written (RAA_TRACE_DURABILITY): "exit" once, when the run ends (its
    state holds the whole step trace); "async" / "sync" after every step as well (per-step history for
    time travel, written in the background / before the next step). With either, a node that has finished
    keeps its step when the process dies mid-way through a step of nodes side by side (observe beside
    contract): LangGraph saves each node's writes as it ends, in the background in both modes, so a kill in
    the same instant can still lose them."""
    inspect_mode: InspectMode = "tools"
    """How the CLI's agents re-inspect frames (RAA_INSPECT_MODE): "tools", a tool-calling loop (the server
    must accept `tools`; vLLM needs `--enable-auto-tool-choice --tool-call-parser ...`), or "plan", one
    structured inspection plan (any server that does structured output). Python callers set
    `AgentConfig.inspect_mode` themselves."""

    endpoint_wait_s: float = 60.0
    """How long `raa score` and long jobs (training with `reward: agent`, `raa score-batch`, `serve-reward`, `eval`)
    wait at start for the endpoint to answer `GET /models` before stopping with the problem (RAA_ENDPOINT_WAIT_S;
    0 skips the check; see graph/endpoint.py)."""
    coordinates: Coordinates = "unit"
    """How the served model writes crop boxes and track points (RAA_COORDINATES): "unit" (0..1),
    "per_mille" (0..1000: Qwen2-VL, Qwen3-VL, InternVL) or "pixels" of the frames as sent (Qwen2.5-VL).
    Python callers set `AgentConfig.coordinates` themselves."""
    foreign_claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S
    """Age (s) after which a run-id claim written on another host is stale (RAA_FOREIGN_CLAIM_MAX_AGE_S):
    its run is no longer spared by `raa prune`, and its run id can be run again (`graph.run_claims`). Keep
    it well above the longest run, since a live run of another host would lose its claim."""

    def __post_init__(self) -> None:
        if self.coordinates not in get_args(Coordinates):
            raise SettingsError(f"coordinates must be one of {get_args(Coordinates)}, got {self.coordinates!r}")
        if self.method not in get_args(StructuredMethod):
            raise SettingsError(f"method must be one of {get_args(StructuredMethod)}, got {self.method!r}")
        if self.inspect_mode not in get_args(InspectMode):
            raise SettingsError(f"inspect_mode must be one of {get_args(InspectMode)}, got {self.inspect_mode!r}")
        if self.trace_durability not in get_args(TraceDurability):
            raise SettingsError(f"trace_durability must be one of {get_args(TraceDurability)}, "
                                f"got {self.trace_durability!r}")
        if not 0 < self.timeout_s < math.inf:  # NaN too: every request then timed out ("no reply within nans")
            raise SettingsError(f"timeout_s must be a finite number > 0, got {self.timeout_s}")
        for name in ("max_retries", "schema_retries"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.image_long_side < 16:
            raise SettingsError(f"image_long_side must be >= 16, got {self.image_long_side}")
        if not 1 <= self.jpeg_quality <= 100:
            raise SettingsError(f"jpeg_quality must be in 1..100, got {self.jpeg_quality}")
        if not 0 <= self.temperature < math.inf:  # NaN too
            raise SettingsError(f"temperature must be >= 0 and finite, got {self.temperature}")
        if not 0 <= self.endpoint_wait_s < math.inf:
            raise SettingsError(f"endpoint_wait_s must be >= 0 and finite, got {self.endpoint_wait_s}")
        if not 0 < self.foreign_claim_max_age_s < math.inf:  # 0 or NaN: every foreign claim stale at once
            raise SettingsError(f"foreign_claim_max_age_s must be a finite number > 0, "
                                f"got {self.foreign_claim_max_age_s}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise SettingsError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def configured(self) -> bool:
        """True when base URL, model and API key are all set."""
        return not self.missing()

    def missing(self) -> list[str]:
        """Names of the required environment variables whose setting is unset."""
        values = (self.base_url, self.model, self.api_key)
        return [name for name, value in zip(REQUIRED_ENV, values, strict=True) if not value]

    def agent_config(self, preset: str) -> AgentConfig:
        """The `AgentConfig` the edge (CLI, demo, evals, `langgraph dev`) builds for `preset` against this
        server: the preset's switches with `inspect_mode` and `coordinates`. Raises ValueError for an unknown
        preset."""
        return AgentConfig(preset=preset, inspect_mode=self.inspect_mode,  # type: ignore[arg-type]
                           coordinates=self.coordinates)

    def scoring(self) -> dict[str, object]:
        """The settings that decide what the model answers (never the API key, timeouts or paths): what a
        training run records about the backbone that scored its rewards (training/provenance.py)."""
        return {"model": self.model, "base_url": self.base_url, "method": self.method,
                "temperature": self.temperature, "max_tokens": self.max_tokens,
                "image_long_side": self.image_long_side, "jpeg_quality": self.jpeg_quality,
                "inspect_mode": self.inspect_mode, "coordinates": self.coordinates}

    def with_overrides(self, **changes: Any) -> BackboneSettings:
        """A copy with some fields replaced (validated again)."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> BackboneSettings:
        """Read `RAA_*` variables (from `environ`, default `os.environ`); unset ones keep defaults."""
        env = os.environ if environ is None else environ
        kw: dict[str, object] = {}
        for name, var in (("base_url", "RAA_BASE_URL"), ("model", "RAA_MODEL"), ("api_key", "RAA_API_KEY")):
            value = env.get(var, "").strip()
            kw[name] = value or None
        choices = (("method", "RAA_STRUCTURED_METHOD", get_args(StructuredMethod)),
                   ("trace_durability", "RAA_TRACE_DURABILITY", get_args(TraceDurability)),
                   ("inspect_mode", "RAA_INSPECT_MODE", get_args(InspectMode)),
                   ("coordinates", "RAA_COORDINATES", get_args(Coordinates)))
        numeric = (("timeout_s", "RAA_TIMEOUT_S", float), ("max_retries", "RAA_MAX_RETRIES", int),
                   ("schema_retries", "RAA_SCHEMA_RETRIES", int), ("image_long_side", "RAA_IMAGE_LONG_SIDE", int),
                   ("jpeg_quality", "RAA_JPEG_QUALITY", int), ("temperature", "RAA_TEMPERATURE", float),
                   ("max_tokens", "RAA_MAX_TOKENS", int), ("endpoint_wait_s", "RAA_ENDPOINT_WAIT_S", float),
                   ("foreign_claim_max_age_s", "RAA_FOREIGN_CLAIM_MAX_AGE_S", float))
        parsed: list[tuple[str, object]] = [(name, env_choice(env, var, allowed)) for name, var, allowed in choices]
        parsed += [(name, env_number(env, var, kind)) for name, var, kind in numeric]
        kw.update((name, value) for name, value in parsed if value is not None)
        kw["cache_path"] = cache_path_from_env(env)
        kw["traces_path"] = traces_path_from_env(env)
        try:
            return cls(**kw)  # type: ignore[arg-type]
        except SettingsError as exc:  # its message starts with the field: name the variable instead
            field, _, rest = str(exc).partition(" ")
            named = {name: var for name, var, _ in (*choices, *numeric)}.get(field)
            raise SettingsError(f"invalid RAA_* setting: {f'{named} {rest}' if named else exc}") from exc

    def describe_missing(self) -> str:
        """A user-facing message naming the unset variables and how to start a server."""
        names = ", ".join(self.missing()) or "none"
        return f"The agent's backbone endpoint is not configured (unset: {names}).\n{VLLM_HELP}"

    def ensure_parent_dirs(self) -> None:
        """Create the folders of the cache and trace databases (called by the CLI before use);
        `graph.stores.StoreError` naming the setting when one cannot be created."""
        from graph.stores import ensure_parent, store_errors

        for path, what, setting in ((self.cache_path, "stage cache", "RAA_CACHE_PATH, or off"),
                                    (self.traces_path, "trace database", "RAA_TRACES_PATH")):
            if path:
                with store_errors(path, what, setting):
                    ensure_parent(path)
