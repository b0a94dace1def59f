"""Settings of the evidence tools. The environment is read only in ``ToolSettings.from_env`` (the edge).

| variable | field | default |
|---|---|---|
| RAA_MOTION_BACKEND | motion_backend (lk / cotracker3) | lk |
| RAA_COTRACKER_CHECKPOINT | cotracker_checkpoint | unset |
| RAA_COTRACKER_HUB_DIR | cotracker_hub_dir | unset |
| RAA_VJEPA_MODEL | vjepa_model (hub id or local path) | facebook/vjepa2-vitl-fpc64-256 |
| RAA_TOOLS_DEVICE | device (cpu / cuda) | cpu |
| RAA_VJEPA_DTYPE | vjepa_dtype (float32 / bfloat16 / float16) | float32 |
| RAA_SURPRISE_BATCH | surprise_batch_size | 8 |
| RAA_SURPRISE_TOP_K | surprise_top_k | 3 |
| RAA_SURPRISE_SHORT_SIDE | surprise_short_side (pixels; `full` = no downscaling) | 448 |
| RAA_EXTRA_SHORT_SIDE | extra_short_side: frames for your own evidence tools (pixels; `full` = no downscaling) | 448 |
| RAA_TRACK_SHORT_SIDE | track_short_side: the agent's frames for the tracker (pixels; `full` = no downscaling) | 576 |
| RAA_QUALITY_MIN_FRAMES / _MAX_STD / _MAX_EDGE / _UNIFORM_FRACTION | quality thresholds | 2 / 5 / 4 / 0.8 |
| RAA_QUALITY_DIM_BRIGHTNESS / _DIM_MIN_SCALE | quality: mean grey level below which the std and edge thresholds scale with a frame's brightness (0 = off), and their smallest share | 64 / 0.4 |
| RAA_QUALITY_MIN_NEIGHBOUR_CORRELATION / _MIN_NOISE_FLATNESS | quality: a frame is noise (flat) when its neighbouring pixels' correlation is below the first and its spectral flatness above the second | 0.2 / 0.3 |
| RAA_QUALITY_ANALYSIS_LONG_SIDE | quality: long side (pixels, 8-1024) of the frames the pre-check analyses | 64 |
| RAA_TOOLS_URL | tools_url (remote tool service; unset = in-process) | unset |
| RAA_TOOLS_TOKEN | tools_token (bearer token, client and server) | unset |
| RAA_TOOLS_TIMEOUT_S | request_timeout_s | 300 |
| RAA_TOOLS_CONNECT_TIMEOUT_S | connect_timeout_s | 10 |
| RAA_TOOLS_RETRIES | retries: attempts per request, the first included (a request never delivered, 429 / 503; tools/http_retry.py); not RAA_MAX_RETRIES, the model calls' retries after the first | 3 |
| RAA_TOOLS_MAX_FRAMES | max_frames decoded per request | 1024 |
| RAA_TOOLS_MAX_DECODE_MB | max_decode_mb: decoded RGB frames per request (MiB) | 4096 |

Decisions where the issues were silent: the default motion backend is ``lk`` because CoTracker3 needs
weights; the paper's configuration sets ``RAA_MOTION_BACKEND=cotracker3`` and a checkpoint. The bearer
token must be printable ASCII (``check_token_text``), checked here and by ``raa serve-tools --token``: an
HTTP header carries ASCII, so a token like "pässwort" failed in the client with a bare
UnicodeEncodeError, and a server started with it accepted only the token's latin-1 bytes. Nor may it end in a
space (an env file's ``RAA_TOOLS_TOKEN=s3cret ``): httpx refuses such a header value, which the client reported
as a transport fault of a request it said was sent, and a server strips the space, so it answered 401 to all.
A value that cannot be used raises ``ToolSettingsError`` (a ValueError) naming the variable and its value
(never the token's), as graph/settings.py does. Values are stripped (the token is taken as written), and a
leading ``~`` of RAA_VJEPA_MODEL and the CoTracker paths is expanded: quoted in a shell or an env file it
is not; a hub id (``org/name``) never starts with ``~`` and is kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from tools.env_numbers import number_text_error
from tools.extra import EXTRA_SHORT_SIDE
from tools.motion.base import TRACK_SHORT_SIDE
from tools.quality import QualityThresholds
from tools.surprise import SURPRISE_SHORT_SIDE

_SECRET_VARS = frozenset({"RAA_TOOLS_TOKEN"})
_PATH_VARS = frozenset({"RAA_VJEPA_MODEL", "RAA_COTRACKER_CHECKPOINT", "RAA_COTRACKER_HUB_DIR"})
_SIDES = ("surprise_short_side", "track_short_side", "extra_short_side")
"""The frame sizes that also take "full" (None: decode at full size)."""


class ToolSettingsError(ValueError):
    """An ``RAA_*`` tool setting has a value that cannot be used; the message names the variable."""


def named_errors(exc: ValidationError, variables: Mapping[tuple[str | int, ...], str],
                 env: Mapping[str, str]) -> str:
    """``exc``'s errors, each as ``VAR='value': reason`` for the variable whose field (``loc``) failed; a
    secret's value is never shown, and an error of no variable keeps its field path."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        reason = str(error["msg"]).removeprefix("Value error, ")
        var = variables.get(tuple(error["loc"]))
        if var is None:
            parts.append(f"{'.'.join(map(str, error['loc']))}: {reason}")
        elif reason.startswith(var):  # a validator's own message already names it
            parts.append(reason)
        elif var in _SECRET_VARS:
            parts.append(f"{var}: {reason}")
        else:
            parts.append(f"{var}={env[var].strip()[:100]!r}: {reason}")
    return "invalid RAA_* setting: " + "; ".join(parts)


def _number_kind(model: type[BaseModel], field: str) -> type[int] | type[float] | None:
    """int or float when ``model``'s field holds one (optional or not), else None."""
    annotation = model.model_fields[field].annotation
    kinds = {annotation} | set(get_args(annotation))
    return int if int in kinds else float if float in kinds else None


def _number_errors(env: Mapping[str, str], fields: Mapping[str, tuple[type[BaseModel], str]]) -> dict[str, str]:
    """``VAR='value': why`` by variable, for each set variable of a number field (``fields``: variable ->
    (model, field)) whose text is not a plainly written number (`tools.env_numbers`); "full" of a frame size
    is its own word, not a number."""
    bad = {}
    for var, (model, field) in fields.items():
        raw = env.get(var, "").strip()
        kind = _number_kind(model, field)
        if not raw or kind is None or (field in _SIDES and raw.lower() == "full"):
            continue
        why = number_text_error(raw, kind)
        if why is not None:
            bad[var] = f"{var}={raw[:100]!r}: {why}" + ("; or full (no downscaling)" if field in _SIDES else "")
    return bad


def check_token_text(token: str, name: str = "RAA_TOOLS_TOKEN") -> str:
    """``token`` when it can travel in an ``Authorization: Bearer`` header (printable ASCII, not ending in a
    space), else a ValueError naming ``name`` and the problem (never the token itself)."""
    bad = next((i for i, ch in enumerate(token) if not (ch.isascii() and ch.isprintable())), None)
    if bad is not None:
        raise ValueError(f"{name} must be printable ASCII (it travels in an HTTP header); character {bad + 1} "
                         "of the token is not")
    if token.endswith(" "):  # an HTTP header value cannot end in a space (module docstring)
        raise ValueError(f"{name} ends in a space, which an HTTP header cannot carry; remove it")
    return token


class ToolSettings(BaseModel):
    """How the evidence tools are built and reached."""

    model_config = ConfigDict(hide_input_in_errors=True)  # an error never echoes the token

    motion_backend: Literal["lk", "cotracker3"] = Field(default="lk", description="point tracker backend")
    cotracker_checkpoint: Path | None = Field(default=None, description="CoTracker3 offline checkpoint (.pth)")
    cotracker_hub_dir: Path | None = Field(default=None, description="local clone of facebookresearch/co-tracker")
    vjepa_model: str = Field(default="facebook/vjepa2-vitl-fpc64-256", max_length=500,
                             description="V-JEPA 2 hub id or local directory")
    vjepa_dtype: Literal["float32", "bfloat16", "float16"] = Field(default="float32")
    device: Literal["cpu", "cuda"] = Field(default="cpu", description="device for the tool models")
    surprise_batch_size: int = Field(default=8, ge=1, le=256, description="surprise windows per forward pass")
    surprise_top_k: int = Field(default=3, ge=0, le=32, description="most surprising windows reported")
    surprise_short_side: int | None = Field(
        default=SURPRISE_SHORT_SIDE, ge=64, le=4096,
        description="short side (pixels) the surprise scorer's frames are decoded at; None = full size")
    extra_short_side: int | None = Field(
        default=EXTRA_SHORT_SIDE, ge=64, le=4096,
        description="short side (pixels) of the frames your own evidence tools get; None = full size")
    track_short_side: int | None = Field(
        default=TRACK_SHORT_SIDE, ge=64, le=4096,
        description="short side (pixels) of the frames the agent tracks on; None = full size")
    quality: QualityThresholds = Field(default_factory=QualityThresholds)
    tools_url: str | None = Field(default=None, max_length=500, description="tool service URL; None = in-process")
    tools_token: SecretStr | None = Field(default=None, description="bearer token of the tool service")
    request_timeout_s: float = Field(default=300.0, gt=0, le=3600)
    connect_timeout_s: float = Field(default=10.0, gt=0, le=600)
    retries: int = Field(default=3, ge=1, le=10, description="attempts per request on transport errors")
    max_frames: int = Field(default=1024, ge=1, le=100_000, description="most frames decoded per service request")
    max_decode_mb: float = Field(default=4096.0, gt=0, le=1_048_576,
                                 description="largest decoded size (MiB of RGB frames) of one service request")

    @field_validator("tools_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        """A tool service URL is ``http://`` or ``https://`` with a host: anything else is named at load,
        not at the first request of a batch."""
        if value is None:
            return None
        value = value.strip()
        scheme, sep, rest = value.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.split("/", 1)[0]:
            raise ValueError(f"RAA_TOOLS_URL {value[:100]!r} is not a tool service URL: it needs http:// or https:// and a host "
                             "(e.g. http://gpu-host:8765)")
        return value

    @field_validator("tools_token")
    @classmethod
    def _ascii_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_token_text(value.get_secret_value())
        return value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ToolSettings:
        """Build settings from ``RAA_*`` variables (see the module table); unset variables keep defaults."""
        env = os.environ if environ is None else environ
        simple = {
            "RAA_MOTION_BACKEND": "motion_backend", "RAA_COTRACKER_CHECKPOINT": "cotracker_checkpoint",
            "RAA_COTRACKER_HUB_DIR": "cotracker_hub_dir", "RAA_VJEPA_MODEL": "vjepa_model",
            "RAA_VJEPA_DTYPE": "vjepa_dtype", "RAA_TOOLS_DEVICE": "device",
            "RAA_SURPRISE_BATCH": "surprise_batch_size", "RAA_SURPRISE_TOP_K": "surprise_top_k",
            "RAA_SURPRISE_SHORT_SIDE": "surprise_short_side", "RAA_TRACK_SHORT_SIDE": "track_short_side",
            "RAA_EXTRA_SHORT_SIDE": "extra_short_side",
            "RAA_TOOLS_URL": "tools_url", "RAA_TOOLS_TOKEN": "tools_token",
            "RAA_TOOLS_TIMEOUT_S": "request_timeout_s", "RAA_TOOLS_CONNECT_TIMEOUT_S": "connect_timeout_s",
            "RAA_TOOLS_RETRIES": "retries", "RAA_TOOLS_MAX_FRAMES": "max_frames",
            "RAA_TOOLS_MAX_DECODE_MB": "max_decode_mb",
        }
        quality_vars = {"RAA_QUALITY_MIN_FRAMES": "min_frames", "RAA_QUALITY_MAX_STD": "max_spatial_std",
                        "RAA_QUALITY_MAX_EDGE": "max_edge_energy",
                        "RAA_QUALITY_UNIFORM_FRACTION": "uniform_frame_fraction",
                        "RAA_QUALITY_DIM_BRIGHTNESS": "dim_brightness", "RAA_QUALITY_DIM_MIN_SCALE": "dim_min_scale",
                        "RAA_QUALITY_MIN_NEIGHBOUR_CORRELATION": "min_neighbour_correlation",
                        "RAA_QUALITY_MIN_NOISE_FLATNESS": "min_noise_flatness",
                        "RAA_QUALITY_ANALYSIS_LONG_SIDE": "analysis_long_side"}
        def value(var: str) -> str:
            raw = env[var] if var in _SECRET_VARS else env[var].strip()
            return os.path.expanduser(raw) if var in _PATH_VARS else raw

        values: dict = {field: value(var) for var, field in simple.items() if env.get(var, "").strip()}
        quality = {field: value(var) for var, field in quality_vars.items() if env.get(var, "").strip()}
        if quality:
            values["quality"] = quality
        for name in _SIDES:
            if values.get(name, "").lower() == "full":
                values[name] = None
        bad = _number_errors(env, {var: (cls, field) for var, field in simple.items()}
                             | {var: (QualityThresholds, field) for var, field in quality_vars.items()})
        for var in bad:  # named once, by the plain-number rule, not again by pydantic
            values.pop(simple.get(var, ""), None)
            values.get("quality", {}).pop(quality_vars.get(var, ""), None)
        variables: dict[tuple[str | int, ...], str] = {(field,): var for var, field in simple.items()}
        variables.update({("quality", field): var for var, field in quality_vars.items()})
        try:
            settings = cls(**values)
        except ValidationError as exc:
            rest = named_errors(exc, variables, env).removeprefix("invalid RAA_* setting: ")
            raise ToolSettingsError("invalid RAA_* setting: " + "; ".join([*bad.values(), rest])) from exc
        if bad:
            raise ToolSettingsError("invalid RAA_* setting: " + "; ".join(bad.values()))
        return settings

    def token(self) -> str | None:
        """The bearer token as plain text (None when unset)."""
        return self.tools_token.get_secret_value() if self.tools_token else None
