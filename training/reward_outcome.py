"""What a reward callable may return, and its validation into the trainer's outcome (DESIGN.md §6).

:data:`RewardFn` is the reward contract; a callable returns a list of rewards or a :class:`RewardBatch`
(rewards with reasons and trace ids). :func:`call_reward` calls one (sync or async) and
:func:`check_reward_output` validates its answer into a :class:`RewardOutcome`: None / NaN / inf become
ineligible, counted by kind; a wrong length is a :class:`RewardLengthError` naming the reward; an
exception inside the callable makes its whole batch ineligible (:func:`failed_outcome`). The adapters
themselves are in training/rewards.py, which re-exports these names.

Decisions where the issue was silent: a value that is no number is ineligible of kind ``error`` (the
reward is broken, not the clip), never a stopped run: text such as ``"0.5"`` (``float`` would parse it,
but a reward that returns text has computed something else), bytes, and an integer too large for a float
(``10**400`` raises OverflowError in ``float``). A bool counts as 1.0 / 0.0: a success predicate is a
legitimate verifiable reward, and components already read bools that way (:func:`reward_number`).
A RewardBatch's reasons for one item may also be a lone text (one reason) or None (none): ``list()``
spelled a text out as one reason per character, and None stopped the run with a TypeError naming no
reward, where a reason is only what the log says about an item.
An ``asyncio.CancelledError`` raised inside a reward callable (a client library's timeout, a task of its own
that was cancelled) is an exception of that reward like any other: its batch is ineligible (kind ``error``).
Only a cancellation of the call itself (RewardRunner.close; a sum cancelling its other parts) propagates:
the task awaiting the reward is then marked as cancelling (``Task.cancelling()``), which a CancelledError
coming out of the reward does not do. In :func:`call_reward` (sync code, which nothing can cancel) every
CancelledError is the callable's own.
A SystemExit or KeyboardInterrupt raised by the reward in :func:`acall_reward` off the main thread (``sys.exit``
in a library, an explicit raise, in a sync reward's worker thread or on the trainer's bridge loop) is the reward's
own too: a signal's KeyboardInterrupt reaches only the main thread. Its batch is ineligible (kind ``error``).
asyncio lets those two out of the event loop, which ended the loop's thread with the call's future unsettled:
the trainer waited on it, and on every later call, forever. On the main thread (and in :func:`call_reward`)
they pass through, as ``sys.exit`` and Ctrl-C mean there.
A RewardBatch's usage given as one dict (not a list of dicts) is one record for the whole batch: it was
iterated as its keys and silently dropped. Any other type than a list, a tuple, a dict or None is a
:class:`RewardLengthError` naming the reward, as for components and kinds (what the batch cost would be
lost); inside a list, a record that is no dict is still left out (usage is bookkeeping, :func:`sum_usage`).
A component may be a 1-D numpy array, as the rewards may (it stopped the run as "ndarray of ?"); a RewardBatch
whose rewards are no list or array (None) is a :class:`RewardLengthError` naming the reward (it was a TypeError
naming none), and its reasons given as None are none for every item, as for one item.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training.reward_threads import in_thread

RewardFn = Callable[..., "list[float | None] | RewardBatch | Any"]
"""``(videos: list[np.ndarray], prompts: list[str], **meta) -> list[float | None]`` (a 1-D numpy array of
rewards too, NaN counted as such; or a :class:`RewardBatch` with reasons), or an awaitable of either."""


@dataclass
class RewardBatch:
    """What a reward callable may return instead of a plain list: the rewards and, per item, why it is
    ineligible (the agent adapters return this, so the trainer can log the agent's reasons)."""

    rewards: list[float | None]
    """One reward per video, None = ineligible."""
    reasons: list[list[str]]
    """One list of reasons per video (may be empty; used for the ineligible ones)."""
    run_ids: list[str | None] | None = None
    """Per video, the id of the run that scored it when the reward keeps one (the agent's trace:
    ``raa trace RUN_ID``); the trainer logs it in rewards.jsonl."""
    components: dict[str, list[float | bool | None]] | None = None
    """Named quantities behind the reward, one value per video (None where a video has none): the
    agent adapters give ``T``, ``P``, ``V``, ``failure`` and ``unverifiable``. Logged per rollout
    (rewards.jsonl) and as the mean over eligible rewards (``reward_<name>_mean``), never trained on."""
    usage: list[dict[str, int]] | dict[str, int] | None = None
    """What scoring the batch cost, as records the trainer adds up (one dict: one record; the agent: one per video with
    ``calls``, ``attempts``, ``images``, ``input_tokens``, ``output_tokens``); summed over an iteration's clips,
    ineligible ones included, as ``reward_usage_<key>``."""
    kinds: list[str | None] | None = None
    """Per video, why a None reward is ineligible when it is not the reward's own verdict: ``error``,
    ``nan`` or ``inf`` (a sum passes on its parts' kinds, training/sum_reward.py); None (or no list) is
    ``none``. Counted in :attr:`RewardOutcome.counts` instead of ``none``."""


KINDS = ("none", "nan", "inf", "error")
"""The kinds of ineligible items, counted in :attr:`RewardOutcome.counts` (``ineligible_<kind>``): the reward's
verdict (None), a NaN, an infinity (returned by the reward, or held by a diverged rollout's latents, which the
reward never sees: training/reward_runner.py), and a broken reward or an outage of what it needs (it raised or
returned no number; or it said so in ``RewardBatch.kinds``: the agent's LLM endpoint or tools down, training/rewards.py)."""


class RewardLengthError(ValueError):
    """A reward callable returned a list whose length differs from the number of videos."""


@dataclass
class RewardOutcome:
    """Validated rewards of one batch."""

    rewards: list[float | None]
    """Finite floats or None (ineligible)."""
    reasons: list[str | None]
    """Why each ineligible item is ineligible (None for eligible ones)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Ineligible items by kind: none, nan, inf, error."""
    run_ids: list[str | None] = field(default_factory=list)
    """Per item, the run that scored it (a RewardBatch's run_ids), else None."""
    components: dict[str, list[float | None]] = field(default_factory=dict)
    """A RewardBatch's components as finite floats (booleans 0 / 1), None where a value is missing or
    not a finite number and for every ineligible item (its judgment did not count)."""
    usage: dict[str, int] = field(default_factory=dict)
    """A RewardBatch's usage summed over the batch (non-negative integer values only)."""
    kinds: list[str | None] = field(default_factory=list)
    """Per item, its ineligible kind (a key of ``counts``), None for an eligible one; empty when unknown
    (an outcome made by hand)."""

    def __post_init__(self) -> None:
        """Every per-item list is checked once, here, so no reader has to guess (a short ``kinds`` was read as
        unknown past its end, while a short ``run_ids`` was refused only when read): ``reasons`` and each
        component hold one entry per reward; ``run_ids`` and ``kinds`` too, or none at all (empty = unknown,
        an outcome made by hand). ``counts`` and ``usage`` are per batch, not per item. A ValueError names the
        list and both lengths: a list of another length cannot say which item an entry belongs to."""
        n = len(self.rewards)
        if len(self.reasons) != n:
            raise ValueError(f"RewardOutcome: {len(self.reasons)} reasons for {n} rewards")
        for label, values in (("run ids", self.run_ids), ("kinds", self.kinds)):
            if values and len(values) != n:
                raise ValueError(f"RewardOutcome: {len(values)} {label} for {n} rewards (give one per reward, "
                                 "or none when unknown)")
        for key, column in self.components.items():
            if len(column) != n:
                raise ValueError(f"RewardOutcome: component {key!r} has {len(column)} values for {n} rewards")

    @property
    def ineligible_count(self) -> int:
        return sum(r is None for r in self.rewards)

    def run_id(self, i: int) -> str | None:
        """Item ``i``'s run id, None when it has none. An empty ``run_ids`` (the default: an outcome made by
        hand, as ``kinds`` may be) means none is known, so every item's is None (lengths: ``__post_init__``)."""
        return self.run_ids[i] if self.run_ids else None

    def kind(self, i: int) -> str | None:
        """Item ``i``'s ineligible kind, None for an eligible item or when the outcome records no kinds."""
        return self.kinds[i] if self.kinds else None


def _run(value: Any) -> Any:
    """``value``, awaited when it is awaitable (on the process's bridge loop, ``graph.bridge.run_sync``:
    the loop training's RewardRunner uses too)."""
    if inspect.isawaitable(value):
        from graph.bridge import run_sync

        async def _await() -> Any:
            return await value

        return run_sync(_await())
    return value


def call_reward(fn: RewardFn, name: str, videos: Sequence[np.ndarray], prompts: Sequence[str],
                **meta: Any) -> RewardOutcome:
    """Call ``fn`` (sync or async) and validate its list (or :class:`RewardBatch`, whose reasons are appended to
    the ineligible items' reasons): None/NaN/inf -> ineligible, counted by kind.

    Raises :class:`RewardLengthError` naming ``name`` when the list length is not ``len(videos)``.
    An exception inside ``fn`` makes every item ineligible (kind ``error``) with the exception text.
    """
    _check_pairs(name, videos, prompts)
    try:
        raw = _run(fn(list(videos), list(prompts), **meta))
    except RewardLengthError:  # a part of a sum answered with the wrong length: an error, as here
        raise
    except (Exception, asyncio.CancelledError) as exc:  # sync code: a CancelledError is the callable's own
        return failed_outcome(exc, name, len(videos))
    return check_reward_output(raw, name, len(videos))


async def acall_reward(fn: RewardFn, name: str, videos: list[np.ndarray], prompts: list[str],
                       meta: dict[str, Any]) -> RewardOutcome:
    """`call_reward` on a running event loop: ``fn`` is called in a worker thread (a sync reward runs off the
    loop; an async one only creates its coroutine there, awaited here), with the same semantics. The
    trainer's RewardRunner and a sum's parts (training/sum_reward.py) score through it."""
    _check_pairs(name, videos, prompts)
    try:
        raw = await in_thread(fn, videos, prompts, **meta)  # the runner's threads and deadline (reward_threads)
        if inspect.isawaitable(raw):
            raw = await raw
    except RewardLengthError:  # a part of a sum answered with the wrong length: an error, as below
        raise
    except asyncio.CancelledError as exc:
        if _cancelled_here():  # the runner's close (or a sum cancelling its parts): stop, as asked
            raise
        return failed_outcome(exc, name, len(videos))  # raised inside the callable: its batch only
    except Exception as exc:
        return failed_outcome(exc, name, len(videos))
    except (SystemExit, KeyboardInterrupt) as exc:
        if threading.current_thread() is threading.main_thread():  # sys.exit / Ctrl-C keep their meaning there
            raise
        return failed_outcome(exc, name, len(videos))  # the reward's own (module docstring)
    return check_reward_output(raw, name, len(videos))


def _cancelled_here() -> bool:
    """Whether the running task has been asked to stop (``Task.cancel``: RewardRunner.close, a cancelled
    gather), as opposed to a CancelledError the awaited reward raised on its own (module docstring)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _check_pairs(name: str, videos: Sequence[np.ndarray], prompts: Sequence[str]) -> None:
    """ValueError naming the reward when the videos and prompts do not pair up one to one."""
    if len(videos) != len(prompts):
        raise ValueError(f"reward {name!r}: {len(videos)} videos but {len(prompts)} prompts")


def failed_outcome(exc: BaseException, name: str, n: int) -> RewardOutcome:
    """Every item ineligible (kind ``error``) because the reward callable raised ``exc``."""
    return error_outcome(f"reward {name!r} raised {type(exc).__name__}: {exc}", n)


def error_outcome(reason: str, n: int) -> RewardOutcome:
    """Every one of ``n`` items ineligible of kind ``error`` (the reward broke, not the clip) with ``reason``."""
    counts = {kind: 0 for kind in KINDS} | {"error": n}
    return RewardOutcome([None] * n, [reason] * n, counts, [None] * n, {}, {}, ["error"] * n)


def check_reward_output(raw: Any, name: str, n: int) -> RewardOutcome:
    """A reward callable's answer for ``n`` videos (a list, or a :class:`RewardBatch`) -> a validated
    :class:`RewardOutcome` (see :func:`call_reward`); :class:`RewardLengthError` for a wrong length."""
    counts = dict.fromkeys(KINDS, 0)
    given: list[list[str]] = [[] for _ in range(n)]
    given_kinds: list[str | None] = [None] * n
    run_ids: list[str | None] = [None] * n
    components: dict[str, list[float | None]] = {}
    usage: dict[str, int] = {}
    if isinstance(raw, RewardBatch):
        if not _is_sequence(raw.rewards) or not (raw.reasons is None or isinstance(raw.reasons, list | tuple)):
            raise RewardLengthError(f"reward {name!r} returned a RewardBatch whose rewards are "
                                    f"{type(raw.rewards).__name__} and reasons {type(raw.reasons).__name__}, expected "
                                    "a list of rewards (or a 1-D array) and a list of reasons per reward (or None)")
        m = len(raw.rewards)
        reasons_given = [None] * m if raw.reasons is None else raw.reasons  # None: no reasons for any item
        if len(reasons_given) != m or (raw.run_ids is not None and len(raw.run_ids) != m):
            raise RewardLengthError(f"reward {name!r} returned {m} rewards but {len(reasons_given)} "
                                    f"reason lists and {'no' if raw.run_ids is None else len(raw.run_ids)} run ids")
        if raw.run_ids is not None and len(raw.run_ids) == n:
            run_ids = [str(r) if r else None for r in raw.run_ids]
        components = _check_components(raw.components or {}, name, m)
        usage = sum_usage(_usage_records(raw.usage, name))
        given_kinds = _check_kinds(raw.kinds, name, m)
        given, raw = [_reason_list(r) for r in reasons_given], raw.rewards
    if isinstance(raw, np.ndarray):  # flow_grpo-style rewards return their scores as an array
        if raw.ndim != 1:
            raise RewardLengthError(f"reward {name!r} returned a {raw.ndim}-D ndarray of shape {raw.shape}, "
                                    f"expected {n} rewards (a list, or a 1-D array)")
        raw = raw.tolist()
    if not isinstance(raw, list | tuple):
        raise RewardLengthError(f"reward {name!r} returned {type(raw).__name__}, expected a list of "
                                f"{n} floats or None")
    if len(raw) != n:
        raise RewardLengthError(f"reward {name!r} returned {len(raw)} values for {n} videos")
    rewards: list[float | None] = []
    reasons: list[str | None] = []
    kinds: list[str | None] = []
    for value, why, given_kind in zip(raw, given, given_kinds, strict=True):
        if value is None:
            counts[given_kind or "none"] += 1
            kinds.append(given_kind or "none")
            rewards.append(None)
            reasons.append(f"reward {name!r} returned None (ineligible)" + (f": {'; '.join(why)}" if why else ""))
            continue
        f = reward_number(value)
        if f is None:
            counts["error"] += 1
            kinds.append("error")
            rewards.append(None)
            reasons.append(f"reward {name!r} returned a non-number {_short(value)}")
            continue
        kind = "nan" if math.isnan(f) else "inf" if math.isinf(f) else None
        kinds.append(kind)
        if kind is not None:
            counts[kind] += 1
            rewards.append(None)
            reasons.append(f"reward {name!r} returned {f} (ineligible)")
        else:
            rewards.append(f)
            reasons.append(None)
    for values in components.values():  # an ineligible item's judgment did not count
        values[:] = [None if r is None else v for v, r in zip(values, rewards, strict=True)]
    return RewardOutcome(rewards, reasons, counts, run_ids, components, usage, kinds)


def _is_sequence(values: Any) -> bool:
    """Whether a RewardBatch's ``rewards`` can be read item by item: a list, a tuple or a 1-D array (an array of
    another shape is refused with its shape further on)."""
    return isinstance(values, list | tuple | np.ndarray) and not (isinstance(values, np.ndarray) and values.ndim == 0)


def _reason_list(why: Any) -> list[str]:
    """One item's reasons in a RewardBatch as a list of text (module docstring): a list or tuple item by item,
    a lone text as one reason (``list`` split it into characters), None as none."""
    if why is None:
        return []
    if isinstance(why, str):
        return [why]
    if isinstance(why, list | tuple):
        return [str(r) for r in why]
    return [str(why)]


def _check_kinds(given: list[str | None] | None, name: str, n: int) -> list[str | None]:
    """A RewardBatch's kinds (None: all ``none``); RewardLengthError for another length or an unknown kind."""
    if given is None:
        return [None] * n
    if not isinstance(given, list | tuple) or len(given) != n or any(k is not None and k not in KINDS for k in given):
        raise RewardLengthError(f"reward {name!r}: kinds must hold one of None, {', '.join(map(repr, KINDS))} per "
                                f"reward ({n}), got {given!r}")
    return list(given)


def _usage_records(given: Any, name: str) -> list[Any]:
    """A RewardBatch's usage as a list of records (module docstring): None as none, one dict as one record (it
    was iterated as its keys and dropped whole); RewardLengthError naming the reward for any other type."""
    if given is None:
        return []
    if isinstance(given, dict):
        return [given]
    if isinstance(given, list | tuple):
        return list(given)
    raise RewardLengthError(f"reward {name!r}: usage must be a list of dicts (or one dict), got {type(given).__name__}")


def reward_number(value: Any) -> float | None:
    """A reward value as a float (NaN and inf included: the caller counts them), or None when it is no number:
    text (``"0.5"`` is a reward computed wrongly, not a number: str and bytes are refused, though ``float``
    would parse them), a value ``float`` rejects, and an integer too large for a float (``10**400``:
    OverflowError). A bool is a number: True / False is 1.0 / 0.0, as in a success reward and as for the
    components (``_finite``)."""
    if isinstance(value, str | bytes | bytearray):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (a 10**400 has 401 digits)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _check_components(given: dict[str, Any], name: str, n: int) -> dict[str, list[float | None]]:
    """A RewardBatch's components as finite floats or None; RewardLengthError for a list of another length
    or a name that is not a plain identifier (it becomes a metric name)."""
    out: dict[str, list[float | None]] = {}
    for key, values in given.items():
        if isinstance(values, np.ndarray) and values.ndim != 1:
            raise RewardLengthError(f"reward {name!r}: component {key!r} is a {values.ndim}-D array of shape "
                                    f"{values.shape}, expected one value per video ({n}): a list or a 1-D array")
        if isinstance(values, np.ndarray):  # as the rewards may be (module docstring)
            values = values.tolist()
        if not isinstance(key, str) or not key.isidentifier() or not isinstance(values, list | tuple) or len(values) != n:
            raise RewardLengthError(f"reward {name!r}: component {key!r} must be a name with one value per video "
                                    f"({n}), got {type(values).__name__} of {len(values) if isinstance(values, list | tuple) else '?'}")
        out[key] = [_finite(v) for v in values]
    return out


def sum_usage(items: Sequence[Any]) -> dict[str, int]:
    """Per-key sums of usage dicts; keys that are not identifiers and values that are not non-negative
    integers are left out (usage is bookkeeping: a malformed entry never costs a reward)."""
    total: dict[str, int] = {}
    for item in items:
        for key, value in (item.items() if isinstance(item, dict) else ()):
            if isinstance(key, str) and key.isidentifier() and isinstance(value, int) and not isinstance(value, bool) \
                    and value >= 0:
                total[key] = total.get(key, 0) + value
    return total


def _finite(value: Any) -> float | None:
    """A component value as a finite float (bool -> 0 / 1), else None."""
    f = None if value is None else reward_number(value)
    return f if f is not None and math.isfinite(f) else None
