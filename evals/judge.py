"""Reasonableness judge for reward outputs (paper Sec. 5.2, the R column of Table 2).

The judge is a separate chat-model endpoint (`RAA_JUDGE_*`, read only by `JudgeSettings.from_env`). For one
agent output it sees up to 64 uniformly sampled frames, the instruction, the reward and the agent's
explanation (its `reasons`); it never sees the preset name, the run id or the reference label. Calls go
through `graph.backbone.Backbone` (structured output, transport and schema retries) at temperature 0.

Decisions where the issue was silent:
- The judge's system prompt is static (`prompts/judge.md`, no template variables); everything that varies
  goes in the user message, so no preset-identifying text can leak through the prompt.
- A judge call that still fails after the backbone's own retries is retried `attempts` times in total;
  then the verdict is `unjudged` with the error (never counted as reasonable). An ineligible agent output
  (reward None) has no reward to judge: its verdict is `skipped` (not counted as reasonable either).
- Without a configured judge endpoint every verdict is `unjudged` ("no judge endpoint configured"), so a
  later run with a judge fills them in (unjudged rows are re-judged on resume).
- The explanation is the agent's `reasons` with agent-stage prefixes ("direct: ...", written only by the
  direct-scoring preset) and preset identifiers removed (`redact_reason`), so the judge cannot tell the
  configuration by its name, and without the run's process notes (`explanation`: frame budgets, repair
  decisions, which frames a tool saw), which say which modules ran. Rows written before results kept their
  notes apart are judged with them.
- The reward is shown with 3 decimals, except a positive one that would read "0.000" (a direct score of
  0.0004), shown in scientific notation: F+ counts it as positive, so the judge must not see a zero.
- The judge has no stage cache by default: reruns re-judge only rows that have no verdict yet.
- A verdict's rationale longer than `RATIONALE_MAX` characters (a fault message quoting a long reply, an
  exception text) is cut to its start with the number of characters cut (`JudgeVerdict` does it on
  construction): it failed the field's max_length, so `RewardJudge.judge`, which never raises for model
  failures, raised a ValidationError.
- `FrameSampler` decodes each frame straight to the size it is sent at (`image_long_side`, 512 by default;
  smaller clips at their own size), as `evals.report_frames` does: decoded at the clip's size, 64 frames of
  a 1080p clip took 400 MB, and with 16 clips judged at once several GB. The images keep the size they had;
  their pixels come from FFmpeg's area filter instead of OpenCV's (`resize_long_side`), a difference of a
  few levels, below the JPEG encoding's own.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field, field_validator

from graph.cache import KeyLocks
from graph.frame_store import FrameStore, VideoKey
from graph.settings import BackboneSettings, StructuredMethod, env_choice, env_number
from graph.transport import EndpointNames

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.language_models import BaseChatModel

    from graph.backbone import Backbone

JUDGE_STAGE = "judge"
JUDGE_ENV = ("RAA_JUDGE_BASE_URL", "RAA_JUDGE_MODEL", "RAA_JUDGE_API_KEY")
JUDGE_NAMES = EndpointNames(base_url="RAA_JUDGE_BASE_URL", model="RAA_JUDGE_MODEL", api_key="RAA_JUDGE_API_KEY",
                            images="RAA_JUDGE_MAX_FRAMES",
                            request_size="fewer frames (RAA_JUDGE_MAX_FRAMES) or smaller (JudgeSettings.image_long_side)",
                            body_size="fewer frames (RAA_JUDGE_MAX_FRAMES) or smaller (JudgeSettings.image_long_side, "
                                      "jpeg_quality)", method="RAA_JUDGE_STRUCTURED_METHOD")
"""The judge's settings, named in its calls' fix hints (`raa eval reward` checks its endpoint before a run)."""
VerdictStatus = Literal["judged", "unjudged", "skipped"]
RATIONALE_MAX = 4000


class JudgeReply(BaseModel):
    """What the judge model writes."""

    reasonable: bool = Field(description="True when the reward and its explanation are reasonable for the clip.")
    rationale: str = Field(default="", max_length=2000, description="Short reason, citing frame numbers.")


class JudgeVerdict(BaseModel):
    """The harness's record of one judgment (stored in results.jsonl)."""

    status: VerdictStatus = Field(description="judged | unjudged (judge failed) | skipped (no reward to judge).")
    reasonable: bool | None = Field(default=None, description="The judge's decision; None unless judged.")
    rationale: str = Field(default="", max_length=RATIONALE_MAX, description="The judge's rationale or the failure.")
    attempts: int = Field(default=0, ge=0, le=100, description="Judge attempts made.")
    usage: dict[str, int] = Field(default_factory=dict, description="calls, images, input/output tokens.")
    judge: str = Field(default="", max_length=500, description="Which judge gave it (its model name); empty in "
                                                               "rows written before it was recorded.")

    @field_validator("rationale", mode="before")
    @classmethod
    def _cut(cls, text: Any) -> Any:
        """A rationale over RATIONALE_MAX characters, cut to fit, saying how much was cut (module docstring)."""
        if not isinstance(text, str) or len(text) <= RATIONALE_MAX:
            return text
        keep = RATIONALE_MAX - 40
        return f"{text[:keep]} ... ({len(text) - keep} characters cut)"

    @property
    def accepted(self) -> bool:
        """Counted in R: judged and reasonable."""
        return self.status == "judged" and self.reasonable is True


@dataclass(frozen=True)
class JudgeSettings:
    """Endpoint and policy of the judge model (separate from the agent's backbone)."""

    base_url: str | None = None
    """OpenAI-compatible base URL of the judge (RAA_JUDGE_BASE_URL)."""
    model: str | None = None
    """Judge model name (RAA_JUDGE_MODEL)."""
    api_key: str | None = None
    """Judge API key (RAA_JUDGE_API_KEY)."""
    method: StructuredMethod = "json_schema"
    """Structured-output method of the judge endpoint (RAA_JUDGE_STRUCTURED_METHOD)."""
    max_frames: int = 64
    """Frames sampled uniformly from the clip for the judge, at most 64 (RAA_JUDGE_MAX_FRAMES)."""
    attempts: int = 3
    """Whole judge attempts before a row is reported as unjudged (RAA_JUDGE_ATTEMPTS)."""
    timeout_s: float = 180.0
    """Per-request timeout in seconds (RAA_JUDGE_TIMEOUT_S)."""
    max_retries: int = 4
    """Transport retries per attempt (inside the backbone)."""
    image_long_side: int = 512
    """Long side of the frames sent to the judge, pixels."""
    jpeg_quality: int = 85
    """JPEG quality of the frames sent to the judge."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_frames <= 64:
            raise ValueError(f"judge max_frames (RAA_JUDGE_MAX_FRAMES) must be in 1..64, got {self.max_frames}")
        if not 1 <= self.attempts <= 100:  # JudgeVerdict.attempts' bound: a 101st attempt's verdict failed it
            raise ValueError(f"judge attempts (RAA_JUDGE_ATTEMPTS) must be in 1..100, got {self.attempts}")
        if not 0 < self.timeout_s < math.inf:  # NaN too; else Backbone refused it later, past the CLI's checks
            raise ValueError(f"judge timeout_s (RAA_JUDGE_TIMEOUT_S) must be a finite number > 0, got {self.timeout_s}")

    @property
    def configured(self) -> bool:
        """True when base URL, model and API key are set."""
        return bool(self.base_url and self.model and self.api_key)

    def backbone_settings(self) -> BackboneSettings:
        """The judge endpoint as `BackboneSettings` (temperature 0, no stage cache)."""
        return BackboneSettings(base_url=self.base_url, model=self.model, api_key=self.api_key, method=self.method,
                                timeout_s=self.timeout_s, max_retries=self.max_retries, temperature=0.0,
                                image_long_side=self.image_long_side, jpeg_quality=self.jpeg_quality,
                                cache_path=None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JudgeSettings:
        """Read `RAA_JUDGE_*` (from `environ`, default `os.environ`)."""
        env = os.environ if environ is None else environ
        kw: dict[str, Any] = {
            "base_url": env.get("RAA_JUDGE_BASE_URL", "").strip() or None,
            "model": env.get("RAA_JUDGE_MODEL", "").strip() or None,
            "api_key": env.get("RAA_JUDGE_API_KEY", "").strip() or None,
        }
        method = env_choice(env, "RAA_JUDGE_STRUCTURED_METHOD", get_args(StructuredMethod))
        if method is not None:
            kw["method"] = method
        for name, var, kind in (("max_frames", "RAA_JUDGE_MAX_FRAMES", int), ("attempts", "RAA_JUDGE_ATTEMPTS", int),
                                ("timeout_s", "RAA_JUDGE_TIMEOUT_S", float)):
            value = env_number(env, var, kind)
            if value is not None:
                kw[name] = value
        return cls(**kw)


def judge_system_prompt() -> str:
    """The judge's system prompt (prompts/judge.md; first line `# stage: judge`; no placeholders)."""
    from prompts import render

    return render(JUDGE_STAGE)


def format_reward(reward: float | None, status: str) -> str:
    """How the reward is shown to the judge."""
    from graph.reward_format import reward_text

    if reward is None:
        return "no reward was produced (the evaluation was ineligible)"
    return f"{reward_text(reward)} (status: {status})"  # a positive one never reads as 0.000 (module docstring)


_STAGE_PREFIX = re.compile(r"^\s*(?:direct|quality|gate|observe|contract|assess|inspect|tool_call|reflect|audit|"
                           r"repair|final_check|surprise|harness)\s*:\s*", re.IGNORECASE)
_PRESET_TOKEN = re.compile(r"\b(?:task_blind|visual_verify|audit_no_gate|no_task_blind|no_visual_verify|no_wmreward|"
                           r"no_audit|no_motion|wmreward)\b", re.IGNORECASE)


def explanation(reasons: Sequence[str], notes: Sequence[str]) -> list[str]:
    """The reasons a judge sees: `reasons` without the run's process notes (`RewardResult.notes`, the last
    entries of its reasons), which name the modules that ran ("repair: ...", "frames added from the
    extra-frame allowance", "surprise scored on the first 64 frames")."""
    k = len(notes)
    if k and list(reasons[-k:]) == list(notes):
        return list(reasons[:-k])
    process = set(notes)
    return [r for r in reasons if r not in process]


def redact_reason(reason: str) -> str:
    """An explanation line without what identifies the configuration: a leading agent-stage prefix
    (e.g. "direct: ...", which only the direct-scoring preset writes) and preset identifiers."""
    return _PRESET_TOKEN.sub("[module]", _STAGE_PREFIX.sub("", reason, count=1))


def judge_messages(system_prompt: str, instruction: str, reward: float | None, status: str,
                   reasons: Sequence[str], image_blocks: Sequence[dict]) -> list[BaseMessage]:
    """The judge's messages: static system prompt; instruction, reward, explanation and frames."""
    explanation = "\n".join(f"- {redact_reason(r)}" for r in reasons) if reasons else "(no explanation given)"
    n_images = sum(1 for b in image_blocks if b.get("type") == "image_url")
    text = (f"Instruction:\n{instruction}\n\nReward: {format_reward(reward, status)}\n\n"
            f"Explanation given with the reward:\n{explanation}\n\n"
            f"{n_images} frames sampled uniformly from the clip follow.")
    content: list[str | dict] = [{"type": "text", "text": text}, *image_blocks]
    return [SystemMessage(content=system_prompt), HumanMessage(content=content)]


def sampled_blocks(path: str | Path, count: int, long_side: int, quality: int) -> tuple[list[dict], int]:
    """The labelled image blocks of ``count`` uniformly sampled frames of a clip (all of a shorter clip:
    `uniform_indices` never repeats a frame), decoded straight to the size they are sent at, and how many
    frames they hold; tools.video.VideoError on a bad video. The judge's and the VQA frames."""
    from tools.coords import shown_size
    from tools.video import VideoReader, image_content_blocks, uniform_indices

    with VideoReader(path) as reader:
        meta = reader.meta
        indices = uniform_indices(meta.frames, min(count, meta.frames))
        frames = reader.read(indices, size=shown_size(meta.width, meta.height, long_side))
    labels = [meta.label(i) for i in indices]  # variable rate too
    return image_content_blocks(frames, indices, meta.frames, meta.fps, long_side=long_side, quality=quality,
                                labels=labels), len(indices)

class FrameSampler:
    """Decodes up to `max_frames` uniform frames of a clip as labelled image blocks (small LRU cache)."""

    def __init__(self, max_frames: int = 64, long_side: int = 512, quality: int = 85, cache_size: int = 16) -> None:
        self.max_frames, self.long_side, self.quality = max_frames, long_side, quality
        self._cache: OrderedDict[VideoKey, list[dict]] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()  # blocks() runs in worker threads, one per clip at a time

    def decode(self, path: str | Path) -> list[dict]:
        """Labelled image content blocks for `path` (raises tools.video.VideoError on a bad video); frames are
        decoded straight to the size they are sent at (module docstring)."""
        return sampled_blocks(path, self.max_frames, self.long_side, self.quality)[0]

    def blocks(self, path: str | Path) -> list[dict]:
        """Blocks of `path` from the LRU cache while the file is unchanged (a clip rewritten at the same path
        is another clip: `graph.frame_store.FrameStore.version`), else decoded and cached (evicting the least
        recently used clip). It stats the file: call it off the event loop."""
        key = FrameStore.version(str(path))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        hit = self.decode(path)
        with self._lock:
            self._cache[key] = hit
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return hit


class RewardJudge:
    """Judges agent outputs through a Backbone; failures become `unjudged` verdicts."""

    def __init__(self, backbone: Backbone | None, *, attempts: int = 3, max_frames: int = 64,
                 image_long_side: int = 512, jpeg_quality: int = 85, unconfigured_reason: str = "") -> None:
        self.backbone = backbone
        self.attempts = attempts
        self.sampler = FrameSampler(max_frames, image_long_side, jpeg_quality)
        self.unconfigured_reason = unconfigured_reason
        self._prompt: str | None = None
        self._locks = KeyLocks()  # one per clip and event loop while requests are in flight

    @classmethod
    def from_settings(cls, settings: JudgeSettings, *, model: BaseChatModel | None = None) -> RewardJudge:
        """A judge on the configured endpoint, or on an injected chat model (tests)."""
        from graph.backbone import Backbone, default_chat_model

        if model is None and not settings.configured:
            missing = [v for v, val in zip(JUDGE_ENV, (settings.base_url, settings.model, settings.api_key),
                                           strict=True) if not val]
            return cls(None, unconfigured_reason=f"no judge endpoint configured (unset: {', '.join(missing)})")
        chat = model if model is not None else default_chat_model(settings.backbone_settings())
        backbone = Backbone(chat, method=settings.method, max_retries=settings.max_retries,
                            timeout_s=settings.timeout_s, cache=None, model_name=settings.model or "judge",
                            setting_names=JUDGE_NAMES)
        return cls(backbone, attempts=settings.attempts, max_frames=settings.max_frames,
                   image_long_side=settings.image_long_side, jpeg_quality=settings.jpeg_quality)

    async def _blocks(self, path: str) -> list[dict]:
        """Frames of `path`; concurrent requests for one clip decode it once (decoding runs in a thread)."""
        async with self._locks.claim(path):
            return await asyncio.to_thread(self.sampler.blocks, path)

    async def judge(self, path: str, instruction: str, reward: float | None, status: str,
                    reasons: Sequence[str]) -> JudgeVerdict:
        """One verdict; never raises for model or video failures."""
        from graph.backbone import BackboneFault, Usage

        if reward is None:
            return JudgeVerdict(status="skipped", rationale="ineligible output: no reward to judge")
        if self.backbone is None:
            return JudgeVerdict(status="unjudged", rationale=self.unconfigured_reason or "no judge")
        try:
            blocks = await self._blocks(path)
        except Exception as exc:  # noqa: BLE001 - a bad clip gives an unjudged row, not a crash
            return JudgeVerdict(status="unjudged", rationale=f"frames unavailable: {type(exc).__name__}: {exc}")
        if self._prompt is None:
            self._prompt = judge_system_prompt()
        messages = judge_messages(self._prompt, instruction, reward, status, reasons, blocks)
        usage = Usage(calls=0, images=0, input_tokens=0, output_tokens=0, cache_hits=0)
        error = ""
        for attempt in range(1, self.attempts + 1):
            try:
                reply = await self.backbone.astructured(JUDGE_STAGE, JudgeReply, messages, usage)
            except BackboneFault as exc:
                error = f"{exc.kind}: {exc.message}"
                continue
            except Exception as exc:  # noqa: BLE001 - any other failure also leaves the row unjudged
                error = f"{type(exc).__name__}: {exc}"
                continue
            parsed = JudgeReply.model_validate(reply.model_dump())
            return JudgeVerdict(status="judged", reasonable=parsed.reasonable, rationale=parsed.rationale,
                                attempts=attempt, usage=usage.as_dict())
        return JudgeVerdict(status="unjudged", rationale=f"judge failed after {self.attempts} attempts: {error}",
                            attempts=self.attempts, usage=usage.as_dict())
