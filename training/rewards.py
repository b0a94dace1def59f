"""Reward callables for GRPO training (DESIGN.md §6).

A reward is any callable ``(videos, prompts, **meta) -> list[float | None]`` (:data:`RewardFn`), sync
or async: ``videos`` are decoded clips, uint8 [T, H, W, 3] each; ``prompts`` the task texts; ``meta``
carries ``fps``, ``iteration`` (the 1-based iteration of metrics.jsonl / rewards.jsonl), ``rank``,
``group_ids``, ``phase`` ("train" for rollouts, "eval" for held-out samples) and ``first_index`` (the
position of ``videos[0]`` among the rank's clips of the iteration: a reward called once per prompt group
(``reward_overlap: groups``) sees parts of the batch). ``None`` means ineligible (the agent's ⊥).

Adapters:

* :class:`BrightnessReward` / :class:`MotionReward` -- verifiable rewards on decoded frames in a target
  region (normalised box ``[x0, y0, x1, y1]``), in [0, 1] (``training/verifiable_rewards.py``).
* :class:`AgentReward` -- the reward agent in process: writes each clip to mp4 and awaits
  ``graph.ascore_videos(items, AgentConfig(preset), model=..., max_concurrency=...)`` with items
  ``{"video", "instruction"}``; the agent's ⊥ (reward None) stays ineligible, its reasons are kept. A result
  made ineligible by an outage of the agent's machinery (``RewardResult.outage``: its backbone endpoint or a tool
  unreachable, a setting it cannot serve, a bug) is of kind ``error``, as the reward service says it is.
* :class:`HttpAgentReward` -- a reward service over HTTP. JSON API (one POST per batch)::

      POST <url>   Authorization: Bearer <token> (optional)
      {"items": [{"video_b64": "<base64 mp4>", "instruction": "...", "fps": 16.0}, ...],
       "meta": {"iteration": 3, "phase": "train"}}
      -> 200 {"results": [{"reward": 0.75 | null, "status": "...", "reasons": ["..."]}, ...]}

  one result per item, same order; `raa serve-reward` serves it for the reward agent. Failures before
  the service can have started the batch (never delivered whole, a 408 for a body that came too slowly,
  429/503 busy) are tried ``retries`` times
  (after ``Retry-After``, else with backoff); a read timeout, a connection broken while waiting or a
  gateway's 502/504 is not (``tools.http_retry.send_with_retries``: the service would score the batch again);
  then, or at once for any other error status or a malformed body, the whole batch is
  ineligible of kind ``error`` (an outage, not the agent's ⊥; the reason kept in ``last_reasons``),
  never a made-up reward. A single result that is not an object or whose reward is not a number (text
  such as "0.5" included, as for a reward's list: ``reward_number``) makes only its item ineligible of
  kind ``error``; a null reward is the service's ⊥ (kind ``none``), unless its result says ``"kind": "error"``
  (`raa serve-reward` failed on the item, e.g. a clip it could not write, or the agent's backbone or tools
  were down: an outage). ``url`` may be a list.
* ``reward: sum`` -- a weighted sum of the above (:class:`training.sum_reward.SumReward`).

The agent adapters also report each clip's T, P, V and gate inputs (``RewardBatch.components``) and
what scoring cost (``RewardBatch.usage``), which the trainer logs.

:func:`call_reward` (training/reward_outcome.py, re-exported here with the rest of the reward contract)
wraps any RewardFn: awaits coroutines, checks the list length (a wrong length is a
:class:`RewardLengthError` naming the reward) and turns None / NaN / inf into ineligible results,
counted by kind in the returned :class:`RewardOutcome`.

Outages against the clip's own ⊥: ``ineligible_none`` counts the rewards that judged a clip ineligible (the
agent's verdict, or its faults of the clip itself: an undecodable video, an instruction it cannot use, a model
that refused or never validly answered about the clip), ``ineligible_error`` the items the reward machinery
failed on (a reward that raised or returned no number, a reward service that failed, and the agent's outages:
its LLM endpoint unreachable or timing out, a tool or tool service down, a setting the endpoint cannot serve,
a bug, a clip the machine failed to read; `graph.schemas.Fault.outage`). The two rates answer different
questions: a rising ``ineligible_none`` is about the policy's clips, a rising ``ineligible_error`` about the
infrastructure, whose reasons (``ineligible.jsonl``) name the fault. Neither becomes a reward: a group left with
fewer than 2 eligible rewards is skipped (training/grpo.py), and ``max_skipped_iterations`` stops a run whose
rewards stay ineligible. The fault kinds a result carries are the agent's; the trainer's kinds stay the four
of ``KINDS``, so existing metric names keep their meaning.

Decisions where the issue was silent: the conditioning (first) frame is left out of the brightness
reward by default; an exception raised by a reward callable makes the whole batch ineligible with
the exception text as reason (counted as ``errors``) instead of stopping the run; a malformed clip
is ineligible for the verifiable rewards without affecting the other clips.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from training.http_reward import (  # noqa: F401  (re-exported: the adapters)
    AGENT_COMPONENTS,
    HttpAgentReward,
    agent_components,
    service_batch,
    with_unwritten,
    write_clips,
)
from training.reward_outcome import (  # noqa: F401  (re-exported: the reward contract)
    RewardBatch,
    RewardFn,
    RewardLengthError,
    RewardOutcome,
    call_reward,
    check_reward_output,
    failed_outcome,
    reward_number,
)
from training.verifiable_rewards import BrightnessReward, MotionReward  # noqa: F401  (re-exported)


@dataclass
class AgentReward:
    """The reward agent in process (``graph.ascore_videos``); async.

    The agent is built on the first batch and reused: its tool models (V-JEPA 2, CoTracker3) load once
    per process, not once per iteration, and its traces go to one database."""

    preset: str = "full"
    """AgentConfig preset (paper Table 2)."""
    max_concurrency: int = 16
    """Concurrent agent runs, over all the batches in flight together (with ``reward_overlap: groups`` each
    group is a batch scored while the next one samples; they share this bound)."""
    video_dir: str | None = None
    """Where clips are written as mp4 for the agent (None: the system's temporary directory)."""
    videos: Literal["temporary", "keep"] = "temporary"
    """temporary: each batch's clips are deleted once scored (and dropped from the agent's frame
    cache); keep: they stay in
    ``video_dir/itNNNNNN/rR_NNNN.mp4`` (iteration as in rewards.jsonl, rank, index; held-out samples in
    ``evalNNNNNN/``), so ``raa trace`` / ``raa report`` of a training reward (run ids in rewards.jsonl)
    can still show the rollout's frames."""
    model: Any = None
    """A LangChain chat model for the backbone; None: ChatOpenAI built from ``settings``."""
    settings: Any = None
    """``graph.settings.BackboneSettings`` read by the entry point (endpoint, ``inspect_mode``, traces);
    None: the agent reads the environment when it is built and inspects in its default mode."""
    tools: Any = None
    """``graph.AgentTools`` (e.g. with your own ``extra`` evidence tools) or a ``tools.toolbox.Toolbox``;
    None: a Toolbox from the ``RAA_*`` tool settings."""
    last_reasons: list[list[str]] = field(default_factory=list)
    """Reasons reported by the agent for the last batch."""
    _config: Any = field(default=None, init=False, repr=False)
    _agent: Any = field(default=None, init=False, repr=False)
    _frames: Any = field(default=None, init=False, repr=False)
    _settings: Any = field(default=None, init=False, repr=False)  # the agent's settings, set by agent()
    _limit: tuple[Any, asyncio.Semaphore] | None = field(default=None, init=False, repr=False)

    def _limiter(self) -> asyncio.Semaphore:
        """The semaphore of `max_concurrency` every batch on this event loop shares (one per loop: a
        semaphore belongs to the loop it first waits on)."""
        loop = asyncio.get_running_loop()
        if self._limit is None or self._limit[0] is not loop:
            self._limit = (loop, asyncio.Semaphore(self.max_concurrency))
        return self._limit[1]

    def __post_init__(self) -> None:
        from graph.settings import BackboneSettings

        # no settings: the defaults; a bad preset is a ValueError now, before any model loads
        self._config = (self.settings or BackboneSettings()).agent_config(self.preset)
        bound = self.max_concurrency  # a float made a semaphore that never blocks (it waits only at exactly 0)
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise ValueError(f"AgentReward: max_concurrency must be an int >= 1, got {bound!r}")
        if self.videos not in ("temporary", "keep") or (self.videos == "keep" and not self.video_dir):
            raise ValueError(f"AgentReward: videos must be 'temporary' or 'keep' (keep needs video_dir), "
                             f"got {self.videos!r}")

    def agent(self) -> Any:
        """The compiled agent, built on first use (it loads no tool weights until a run needs them, but
        opens its trace database and stage cache: `graph.stores.StoreError` when one cannot be used)."""
        from graph import build_reward_agent  # lazy: the trainer must not need the agent stack
        from graph.builder import frame_store_for
        from graph.settings import BackboneSettings

        if self._agent is None:
            # the settings the agent would read itself; its frame cache is kept to forget temporary clips
            settings = self.settings if self.settings is not None else BackboneSettings.from_env()
            self._frames = frame_store_for(settings)
            # its RAA_TRACE_DURABILITY and RAA_FOREIGN_CLAIM_MAX_AGE_S for every run, as raa score-batch runs
            self._settings = settings
            self._agent = build_reward_agent(self._config, model=self.model, settings=settings, tools=self.tools,
                                             frame_store=self._frames)
        return self._agent

    def load_tools(self) -> None:
        """Load the evidence models the preset uses now (CoTracker3, V-JEPA 2): one that cannot load makes
        every reward ineligible, so a run should learn it at start. ValueError naming the tool. Without
        ``tools`` (the agent's own lazy Toolbox) or with a tool service, nothing loads here."""
        from graph.context import preload_tools
        from tools.errors import ToolFault

        if self.tools is None:
            return
        try:
            preload_tools(self._config, self.tools)
        except ToolFault as exc:
            raise ValueError(f"AgentReward (preset {self.preset}): the {exc.tool} tool cannot load: {exc.message}; "
                             "fix its RAA_* tool setting or choose a preset without it") from None

    async def __call__(self, videos: Sequence[np.ndarray], prompts: Sequence[str], **meta: Any) -> RewardBatch:
        from graph import ascore_videos
        agent = self.agent()
        fps = float(meta.get("fps", 16.0))
        iteration, rank, first = int(meta.get("iteration", 0)), int(meta.get("rank", 0)), int(meta.get("first_index", 0))
        with contextlib.ExitStack() as stack:
            if self.videos == "keep":
                folder = Path(str(self.video_dir)) / f"{_phase(meta)}{iteration:06d}"
                folder.mkdir(parents=True, exist_ok=True)
            else:
                if self.video_dir:  # a folder the run names but nobody made yet
                    Path(self.video_dir).mkdir(parents=True, exist_ok=True)
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=self.video_dir)))
            paths, problems = write_clips(videos, folder, [f"r{rank}_{first + i:04d}.mp4" for i in range(len(videos))],
                                          fps)
            items = [{"video": str(path.resolve()), "instruction": prompt}
                     for path, prompt in zip(paths, prompts, strict=True) if path is not None]
            try:
                results = await ascore_videos(items, self._config, agent=agent, limiter=self._limiter(),
                                              settings=self._settings) if items else []
            finally:
                if self.videos == "temporary":  # deleted below: no later batch can use their frames
                    await asyncio.to_thread(self._frames.forget, [item["video"] for item in items])
        batch = with_unwritten(RewardBatch([r.reward for r in results], [list(r.reasons) for r in results],
                                           [r.run_id or None for r in results],
                                           agent_components([r.model_dump() for r in results]),
                                           [dict(r.usage) for r in results],
                                           ["error" if r.outage else None for r in results]), problems)
        self.last_reasons = batch.reasons
        return batch


def _phase(meta: dict[str, Any]) -> str:
    """Folder prefix of a batch's kept clips: "eval" for held-out samples, "it" for training rollouts."""
    return "eval" if meta.get("phase") == "eval" else "it"


def build_reward(name: str, options: dict[str, Any], *, tokens: Mapping[str, str] | None = None,
                 agent_settings: Any = None, agent_tools: Any = None) -> RewardFn:
    """The adapter for a config's ``reward`` name with ``reward_options`` as keyword arguments; ``tokens``
    (http: the values of the variables ``token_env`` names, by name), ``agent_settings`` and ``agent_tools``
    (agent: ``BackboneSettings``, a ``Toolbox``) come from the entry point.

    Raises ValueError naming the reward on unknown names or options (before any model loads).
    """
    try:
        if name == "brightness":  # region: a YAML list, made a tuple by the check (tuple("0011") read characters)
            return BrightnessReward(**options)
        if name == "motion":
            return MotionReward(**options)
        if name == "agent":  # built now: a file or a tool it cannot use stops the run at start, not every reward
            reward = AgentReward(settings=agent_settings, tools=agent_tools, **options)
            reward.agent()
            reward.load_tools()
            return reward
        if name == "http":  # checked now: a url nobody answers stops the run at start, not after every batch
            http = HttpAgentReward(token=_token(options, tokens),
                                   **{k: v for k, v in options.items() if k != "token_env"})
            http.wait_until_reachable()
            return http
        if name == "sum":  # training/sum_reward.py: each part built (and checked) as if it were the reward
            from training.sum_reward import build_sum_reward

            return build_sum_reward(options, build_reward, tokens=tokens, agent_settings=agent_settings,
                                    agent_tools=agent_tools)
    except TypeError as exc:
        raise ValueError(f"reward {name!r}: bad reward_options {options}: {exc}") from None
    raise ValueError(f"unknown reward {name!r}; expected brightness, motion, agent, http or sum")


def _token(options: dict[str, Any], tokens: Mapping[str, str] | None) -> str | None:
    """The bearer token of an http reward: the value of the variable its ``token_env`` names (None without
    ``token_env``); ValueError when ``tokens`` lacks it."""
    name = options.get("token_env")
    if name is None:
        return None
    if not isinstance(name, str) or not (tokens or {}).get(name):
        raise ValueError(f"token_env {name!r}: no token given for it (training.train reads it from the "
                         "environment: set the variable, or drop token_env for a service without a token)")
    return (tokens or {})[name]
