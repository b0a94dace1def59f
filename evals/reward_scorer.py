"""The clips `raa eval reward` evaluates and the scorers that score them (`evals.reliability` runs them).

`load_eval_manifest` reads a clip-suite manifest into `EvalClip`s; a `PresetScorer` scores a chunk of them with one
preset (`AgentScorer`: the reward agent); `score_chunk` turns a scorer that raised into ineligible rows.

Clips are scored in chunks of `2 * concurrency` so progress is saved regularly. If the scorer itself
raises for a chunk, each clip of that chunk gets an ineligible row naming the error (never a reward), whose
``usage`` is null with ``usage_unknown`` saying why (the calls made before the crash were spent but not
reported): it was ``{}``, which the usage means (`evals.table`) counted as a free run. Its fault is an
"internal" one of stage "harness", which the table counts as an outage (`evals.table`), as every row keeps
its result's ``faults``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from evals.result_rows import ManifestError
from graph.run_results import fault_result
from graph.schemas import Fault, RewardResult

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from langchain_core.language_models import BaseChatModel


@dataclass(frozen=True)
class EvalClip:
    """One manifest row to evaluate."""

    path: str
    """Absolute path of the clip."""
    instruction: str
    """Task instruction."""
    label: str
    """Reference label: ordinary | failure | unobservable | progress."""
    pattern: str
    """Hacking / control pattern (e.g. success, occlusion, teleport)."""
    task: str
    """Task family name (may be empty)."""


def load_eval_manifest(path: str | Path) -> list[EvalClip]:
    """Clips of a clip-suite manifest (a manifest.jsonl or a folder holding one; rows read and validated by
    `evals.clipsuite.load_manifest`); raises ManifestError naming the problem."""
    from evals.clipsuite import ManifestError as SuiteManifestError
    from evals.clipsuite import manifest_lines

    try:
        rows = manifest_lines(path)
    except SuiteManifestError as exc:
        raise ManifestError(str(exc)) from exc
    if not rows:
        raise ManifestError(f"manifest {path} has no rows")
    clips = [EvalClip(row["path"], row["instruction"], row["label"], str(row.get("pattern") or "-"),
                      str(row.get("task") or "")) for _, row in rows]
    seen: dict[str, str] = {}  # clip path -> the line listing it
    for (where, _), clip in zip(rows, clips, strict=True):
        if (first := seen.get(clip.path)) is not None:
            raise ManifestError(f"{where}: clip {clip.path} appears twice (first at {first}; results are keyed by "
                                "clip path and preset)")
        seen[clip.path] = where
    return clips


class PresetScorer(Protocol):
    """Scores clips with one preset; returns one RewardResult per clip, in order."""

    async def score(self, preset: str, clips: Sequence[EvalClip]) -> list[RewardResult]: ...


class AgentScorer:
    """The reward agent as a PresetScorer (`graph.ascore_videos`), one compiled agent per preset.

    Pass one shared `backbone` (with one StageCache) so presets re-use identical stage outputs, one `tools`
    object so tool models load once, and one `checkpointer` so every run is traced in the same database.
    The presets' agents share one frame cache (`graph.frame_store.FrameStore`): a clip is decoded and its
    images encoded once for all presets, and its motion tracks and surprise scores are computed once per
    distinct request (every preset runs with the same tools).
    With `settings` (a `BackboneSettings`), each preset's config is `settings.agent_config(preset)`, so its
    `inspect_mode` applies to every preset (`"plan"` for servers or models without tool calling), and its
    `foreign_claim_max_age_s` (RAA_FOREIGN_CLAIM_MAX_AGE_S) to every run's claim of its run id, and its
    `trace_durability` (RAA_TRACE_DURABILITY) to every run's checkpoints.
    """

    def __init__(self, *, model: BaseChatModel | None = None, backbone: Any = None, tools: Any = None,
                 checkpointer: Any = None, settings: Any = None, max_concurrency: int = 16) -> None:
        self.model, self.backbone, self.tools = model, backbone, tools
        self.checkpointer, self.settings = checkpointer, settings
        self.max_concurrency = max_concurrency
        self._agents: dict[str, Any] = {}
        self._frames: Any = None

    def agent(self, preset: str) -> Any:
        """The compiled agent of `preset` (built on first use)."""
        from graph import build_reward_agent
        from graph.builder import frame_store_for, needed_settings

        if self._frames is None:  # the store build_reward_agent would make, once for every preset
            self._frames = frame_store_for(needed_settings(self.settings, model=self.model, backbone=self.backbone,
                                                           checkpointer=self.checkpointer))
        if preset not in self._agents:
            self._agents[preset] = build_reward_agent(
                self._config(preset), model=self.model, backbone=self.backbone, tools=self.tools,
                checkpointer=self.checkpointer, settings=self.settings, frame_store=self._frames)
        return self._agents[preset]

    def _config(self, preset: str) -> Any:
        from graph.settings import BackboneSettings

        return (self.settings or BackboneSettings()).agent_config(preset)  # no settings: the defaults

    async def score(self, preset: str, clips: Sequence[EvalClip]) -> list[RewardResult]:
        from graph import ascore_videos

        items = [(c.path, c.instruction) for c in clips]
        # the settings' RAA_TRACE_DURABILITY and RAA_FOREIGN_CLAIM_MAX_AGE_S (`graph.settings.trace_options`)
        return list(await ascore_videos(items, self._config(preset), agent=self.agent(preset),
                                        max_concurrency=self.max_concurrency, settings=self.settings))


async def score_chunk(scorer: PresetScorer, preset: str,
                      clips: Sequence[EvalClip]) -> tuple[list[RewardResult], str | None]:
    """Scorer results for a chunk and, when the scorer crashed (or returned a wrong count), why its usage is
    unknown; then every result is ineligible with the reason."""
    try:
        results = list(await scorer.score(preset, clips))
        if len(results) != len(clips):
            raise RuntimeError(f"scorer returned {len(results)} results for {len(clips)} clips")
        return results, None
    except Exception as exc:  # noqa: BLE001 - one bad chunk never takes down the run
        fault = Fault(stage="harness", kind="internal", message=f"scorer failed: {type(exc).__name__}: {exc}")
        return ([fault_result(preset, fault) for _ in clips],  # an outage; its reason the fault's, as every other's
                "the scorer crashed before reporting the calls and tokens this chunk spent")
