"""``reward: sum``: a weighted sum of other rewards, e.g. the agent plus a cheap verifiable term.

Config (``reward_options``)::

    reward: sum
    reward_options:
      token_env: MY_TOKEN          # optional: the bearer token of http parts that name none
      parts:
        - {reward: agent, weight: 1.0, options: {preset: full}}
        - {reward: motion, weight: 0.25, label: moving, options: {region: [0.0, 0.0, 1.0, 1.0]}}
        - {reward: http, weight: 0.5, label: videoalign, options: {url: http://host:8800/score, token_env: VA_TOKEN}}

Each part is built as if it were the run's reward (``training.rewards.build_reward``: its options are
checked and an agent or http part is built and checked at start). Every part scores every clip, all
parts at once (a sync part runs in a worker thread, an async one on the reward loop), and

    R = sum_i w_i * R_i

Decisions where the issue was silent:

* A clip is ineligible when any part is ineligible for it: a sum without one of its terms would be a
  different reward, so it is never made up from the others (the reasons name the part). A part that
  raises makes its items ineligible, not the run. The clip is counted under its parts' ineligible kind
  (``ineligible_error`` for a part that raised, ``_nan`` / ``_inf`` for a part's non-finite value, not the
  agent's verdict ``_none``); with several ineligible parts the most severe kind counts (`SEVERITY`).
* Each part's reward is logged as a component named by its ``label`` (default: the reward's name;
  labels must be distinct identifiers), and a part's own components as ``<label>_<name>`` (the
  agent's ``agent_T`` ...), so ``reward_<label>_mean`` shows which term moved. The names of the parts'
  components are only known once they score, so two labels where one is the other followed by ``_``
  (``b`` and ``b_T``) are refused when the sum is built: they could log two values under one name (and
  every such clash needs that prefix, `check_labels`). Usage adds up; the run
  ids are the first part's that has them (the agent's trace). A part that returns the wrong number of
  rewards is a ``RewardLengthError`` naming it, as it would be as the run's reward; the other parts
  still scoring are then cancelled and awaited (``gather`` left them running, unawaited, on the loop).
* Parts cannot be sums themselves (one level is enough to write any weighted sum).
* Two agent parts that keep their clips (``videos: keep``) in one ``video_dir`` are refused when the sum is
  built (`check_kept_clips`), not given distinct names: both would write the same
  ``video_dir/itNNNNNN/rR_NNNN.mp4`` at once, one part's file rewritten while the other's agent reads it and
  its traces naming a file the other wrote. The documented layout stays what ``raa trace`` / ``raa report``
  users look for, and a ``video_dir`` per part (e.g. ``reward_videos/full``, ``reward_videos/fast``) is a
  one-line change made at launch.
* An http part's bearer token is the variable its own ``token_env`` names, else the sum's ``token_env``
  (two services on two hosts each keep their own token); the entry point reads every variable a part
  uses (`token_envs`) and stops with exit 2 when one is not set (a sum's ``token_env`` that every http
  part overrides is unused and need not be set).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.finite import finite_number
from training.reward_outcome import RewardBatch, acall_reward

PART_KEYS = {"reward", "weight", "label", "options"}


@dataclass
class SumPart:
    """One weighted term of a SumReward."""

    label: str
    """Its name in logs and reasons."""
    weight: float
    """Its weight w_i."""
    fn: Callable[..., Any]
    """The built reward callable."""
    name: str
    """The reward's name (as in ``reward:``)."""


def parse_parts(options: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``parts`` of a sum's options, checked (ValueError naming the problem); pure."""
    unknown = set(options) - {"parts", "token_env"}
    if unknown:
        raise ValueError(f"reward 'sum': unknown reward_options {sorted(unknown)}; expected parts (and token_env)")
    parts = options.get("parts")
    if not isinstance(parts, list) or not parts:
        raise ValueError("reward 'sum' needs reward_options.parts: a non-empty list of "
                         "{reward: NAME, weight: W, options: {...}}")
    labels: list[str] = []
    out: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or "reward" not in part or set(part) - PART_KEYS:
            raise ValueError(f"reward 'sum': part {i} must be {{reward, weight, label?, options?}}, got {part!r}")
        if part["reward"] == "sum":
            raise ValueError(f"reward 'sum': part {i} is a sum itself; write its terms into this one")
        weight = part.get("weight", 1.0)
        if not finite_number(weight):
            raise ValueError(f"reward 'sum': part {i} weight must be a finite number, got {weight!r}")
        label = part.get("label", part["reward"])
        if not isinstance(label, str) or not label.isidentifier() or label in labels:
            raise ValueError(f"reward 'sum': part {i} label {label!r} must be a distinct identifier "
                             "(set label: when two parts use the same reward)")
        options_i = part.get("options", {})
        if not isinstance(options_i, dict):
            raise ValueError(f"reward 'sum': part {i} options must be a mapping, got {options_i!r}")
        if part["reward"] == "http" and "token_env" in options and "token_env" not in options_i:
            options_i = {**options_i, "token_env": options["token_env"]}  # the sum's token for http parts
        labels.append(label)
        out.append({"reward": str(part["reward"]), "weight": float(weight), "label": label, "options": options_i})
    check_labels(labels)
    check_kept_clips([(p["label"], _kept_folder(p["reward"], p["options"].get("videos"), p["options"].get("video_dir")))
                      for p in out])
    return out


def _kept_folder(reward: str, videos: Any, video_dir: Any) -> str | None:
    """The folder an agent part keeps its clips in (``videos: keep``), else None (temporary clips each get
    their own temporary folder)."""
    return str(video_dir) if reward == "agent" and videos == "keep" and video_dir else None


def check_kept_clips(parts: Sequence[tuple[str, str | None]]) -> None:
    """ValueError naming both parts when two of ``(label, kept clip folder or None)`` keep their clips in one
    folder (resolved: ``runs/x`` and ``./runs/x`` are one): they would write the same file names at the same
    time (module docstring)."""
    seen: dict[Path, str] = {}
    for label, folder in parts:
        if folder is None:
            continue
        where = Path(folder).resolve()
        if where in seen:
            raise ValueError(f"reward 'sum': parts {seen[where]!r} and {label!r} both keep their clips in video_dir "
                             f"{folder!r}, where they would write the same files at once; give each agent part its "
                             "own video_dir")
        seen[where] = label


def check_labels(labels: Sequence[str]) -> None:
    """ValueError naming both parts when two labels can log under one name: a part's components are logged as
    ``<label>_<name>``, so part ``b``'s component ``T`` and a part labelled ``b_T`` would share a name, and
    every such clash (``<a>_<x>`` = ``<a_b>_<y>`` too) needs one label to be the other followed by ``_``."""
    for j, label in enumerate(labels):
        for i, other in enumerate(labels[:j]):
            if label.startswith(other + "_") or other.startswith(label + "_"):
                short, long = (other, label) if len(other) < len(label) else (label, other)
                raise ValueError(f"reward 'sum': part {i} label {other!r} and part {j} label {label!r} can log under "
                                 f"one name (the components of part {short!r} are logged as {short}_<name>, e.g. {long}); "
                                 "choose labels where neither is the other followed by '_'")


def _listed_parts(options: dict[str, Any]) -> list[dict[str, Any]]:
    """The mappings among a sum's ``parts`` as written (unchecked: `parse_parts` checks)."""
    parts = options.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def used_rewards(reward: str | None, options: dict[str, Any]) -> set[str]:
    """The reward names a config uses: its own, or for a sum its parts' (what the entry point prepares
    settings for); no checks."""
    if reward != "sum":
        return {reward} if reward else set()
    return {str(p["reward"]) for p in _listed_parts(options) if "reward" in p}


def token_envs(reward: str | None, options: dict[str, Any]) -> list[str]:
    """The environment variables a config's http rewards take their bearer tokens from (``token_env`` of an
    http reward, of a sum's http parts, and the sum's own when some http part names none and so inherits
    it; what the entry point reads), in config order; no checks. A sum's ``token_env`` that no part
    inherits is unused and is not listed (its variable need not be set)."""
    def named(opts: Any) -> list[str]:
        value = opts.get("token_env") if isinstance(opts, dict) else None
        return [value] if isinstance(value, str) and value else []

    if reward == "http":
        return named(options)
    if reward != "sum":
        return []
    http_parts = [p.get("options") for p in _listed_parts(options) if p.get("reward") == "http"]
    inherits = any(not named(opts) for opts in http_parts)
    names = (named(options) if inherits else []) + [n for opts in http_parts for n in named(opts)]
    return list(dict.fromkeys(names))


SEVERITY = ("error", "nan", "inf", "none")
"""Which ineligible kind a clip of a sum is counted as when several parts are ineligible for it: the first of
these among its parts' kinds (a broken part is what needs fixing, whatever the others say)."""


def item_kind(part_kinds: Sequence[str | None]) -> str | None:
    """The ineligible kind of one clip of a sum from the kinds of its ineligible parts (`SEVERITY`); None when
    no part is ineligible (an unknown kind counts as ``none``)."""
    if not part_kinds:
        return None
    return next((kind for kind in SEVERITY if kind in part_kinds), "none")


@dataclass
class SumReward:
    """R = sum_i w_i R_i over its parts (module docstring); async."""

    parts: list[SumPart]
    """The terms, in config order."""

    def __post_init__(self) -> None:
        labels = [p.label for p in self.parts]
        if len(set(labels)) != len(labels):
            raise ValueError(f"reward 'sum': part labels must be distinct, got {labels}")
        check_labels(labels)
        from training.rewards import AgentReward  # lazy: training.rewards builds sums

        check_kept_clips([(p.label, _kept_folder("agent", p.fn.videos, p.fn.video_dir)) for p in self.parts
                          if isinstance(p.fn, AgentReward)])

    async def __call__(self, videos: Sequence[np.ndarray], prompts: Sequence[str], **meta: Any) -> RewardBatch:
        clips, texts = list(videos), list(prompts)
        # each part as the run's reward would be scored: a sync part off the loop, a failure its items only
        tasks = [asyncio.ensure_future(acall_reward(p.fn, p.label, clips, texts, meta)) for p in self.parts]
        try:
            outcomes = await asyncio.gather(*tasks)
        except BaseException:  # a part's RewardLengthError, or this call cancelled: the other parts stop too
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        rewards: list[float | None] = []
        reasons: list[list[str]] = []
        kinds: list[str | None] = []
        for i in range(len(clips)):
            values = [o.rewards[i] for o in outcomes]
            missing = [f"{p.label}: {o.reasons[i] or 'ineligible'}" for p, o in zip(self.parts, outcomes, strict=True)
                       if o.rewards[i] is None]
            rewards.append(None if missing else sum(p.weight * v for p, v in zip(self.parts, values, strict=True)
                                                    if v is not None))  # every v: none is missing
            reasons.append(missing)
            kinds.append(item_kind([o.kinds[i] if o.kinds else "none" for o in outcomes if o.rewards[i] is None]))
        components: dict[str, list[Any]] = {}
        for part, outcome in zip(self.parts, outcomes, strict=True):
            components[part.label] = list(outcome.rewards)
            for key, values in outcome.components.items():
                components[f"{part.label}_{key}"] = list(values)
        run_ids = next((o.run_ids for o in outcomes if any(o.run_ids)), None)
        return RewardBatch(rewards, reasons, run_ids, components, [o.usage for o in outcomes], kinds)


def build_sum_reward(options: dict[str, Any], build: Callable[..., Any], **context: Any) -> SumReward:
    """A SumReward whose parts ``build(name, options, **context)`` makes (``training.rewards.build_reward``
    with the entry point's token and agent settings); ValueError naming the problem."""
    parts = []
    for i, p in enumerate(parse_parts(options)):
        try:
            fn = build(p["reward"], p["options"], **context)
        except ValueError as exc:
            raise ValueError(f"reward 'sum' part {i} ({p['label']}): {exc}") from None
        parts.append(SumPart(p["label"], p["weight"], fn, p["reward"]))
    return SumReward(parts)
