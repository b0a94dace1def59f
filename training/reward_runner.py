"""Rewards scored in the background while the trainer goes on (``reward_overlap``, DESIGN.md §6).

A reward agent answers in seconds to minutes (VLM calls), a rollout of one prompt group takes as long on
a GPU, and the two do not depend on each other: group k's clips can be scored while group k+1 is
sampled (flow_grpo submits its rewards to an executor the same way). :class:`RewardRunner` schedules each
reward call on the process's bridge loop (``graph.bridge.sync_loop``, one asyncio loop in a daemon
thread); :meth:`RewardRunner.submit` returns a ``concurrent.futures.Future`` of its validated
:class:`~training.reward_outcome.RewardOutcome`. :func:`merge_outcomes` joins the groups' outcomes in order.

Decisions where the issue was silent:

* One loop for every call: the async rewards (the agent, the HTTP service) see one event loop, so calls
  that overlap share the agent's worker pools and trace database the way concurrent runs of one
  ``ascore_videos`` do. It is also the loop of held-out evaluation's reward calls: the agent's model
  client keeps its pooled connections on one loop (with a loop of its own here, model calls failed
  whenever evaluation and training rewards took turns against a keep-alive server: "Event loop is
  closed", "bound to a different event loop"; tests/test_bridge.py).
* The callable itself is called in a worker thread (``training.reward_outcome.acall_reward``): a sync
  reward (the verifiable ones, your own) runs off the loop and in parallel with the next rollout; an
  async one only creates its coroutine there, which is then awaited on the loop.
* Same semantics as :func:`~training.reward_outcome.call_reward`: an exception inside the reward makes its
  call's items ineligible with the reason; a wrong length (:class:`~training.reward_outcome.RewardLengthError`)
  is raised by ``Future.result()`` and stops the run (exit 2 naming the reward: training/train.py exit_status).
* Clips given as ``unscored`` (diverged rollouts: training/decode.py) are never shown to the reward: each
  is ineligible of its kind (``nan`` / ``inf``) with a reason saying so, and the reward is called once per
  contiguous run of the other clips, with that run's ``first_index`` and ``group_ids`` (a reward names its
  files by position), so the outcome stays in the batch's order.
* Clips given as ``refused`` (the stand-in rollouts of a prompt whose image could not be read:
  training/prompt_failures.py) are not shown to the reward either: each is ineligible of kind ``error`` with
  the reason given, which names the prompt's place and image.
* :meth:`RewardRunner.close` cancels the calls still running, so a failing run never waits for them;
  the loop's thread is a daemon.
* A loop whose thread dies (graph/bridge.py: a SystemExit or KeyboardInterrupt a task lets out no longer
  does; the loop itself breaking still can) ends every call still waiting on it as an ineligible batch
  (kind ``error``) whose reason says so, instead of a ``Future.result()`` that never returns; the clips
  not shown to the reward keep their own reasons. It is the rank's data as any ineligible batch, so the
  ranks go on together into the update's collectives; each submit takes the current bridge loop, so
  later calls run on a fresh one.
* ``timeout_s`` (the config's ``reward_timeout_s``) bounds each :meth:`~RewardRunner.submit` (a prompt group,
  or the rank's batch with ``reward_overlap: off``), from the submit on, so waiting for the agent's shared
  concurrency behind earlier groups counts too: past it, the clips the reward was shown are ineligible (kind
  ``error``) with the reason "reward 'NAME' timed out after N s" and the future ends, so the run goes on.
  An async reward is cancelled then and not waited for (one that ignores the cancel runs on unheeded); a sync
  one cannot be stopped (training/reward_threads.py: its thread is abandoned, and while ``stuck_limit`` such
  threads still run, further calls are refused at once with a reason saying so, their clips ineligible).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any

import numpy as np

from graph.bridge import sync_loop, when_loop_ends
from training.reward_outcome import KINDS, RewardFn, RewardOutcome, acall_reward, error_outcome, sum_usage
from training.reward_threads import RewardThreads


class RewardRunner:
    """Calls one reward callable on a background event loop; see the module docstring."""

    def __init__(self, fn: RewardFn, name: str, *, timeout_s: float | None = None, stuck_limit: int = 8) -> None:
        self.fn = fn
        """The reward callable (sync or async)."""
        self.name = name
        """Its config name, for reasons and errors."""
        self.timeout_s = timeout_s
        """Seconds one submit may take (module docstring); None: no limit."""
        self._threads = RewardThreads(stuck_limit)  # sync calls' threads, those stuck in timed-out calls bounded
        self._pending: dict[Future[RewardOutcome], Future[RewardOutcome]] = {}  # submit's future -> its call's
        self._closed = False

    def submit(self, videos: Sequence[np.ndarray] | np.ndarray, prompts: Sequence[str], *,
               unscored: Sequence[str | None] | None = None, refused: Sequence[str | None] | None = None,
               **meta: Any) -> Future[RewardOutcome]:
        """Schedule ``fn(videos, prompts, **meta)``; the future holds its validated outcome. ``unscored``: per
        video, None or the kind ("nan" / "inf") of a diverged rollout the reward must not see; ``refused``: per
        video, None or why it is not shown (its prompt failed), ineligible of kind ``error`` (module docstring)."""
        for name, flags in (("unscored", unscored), ("refused", refused)):
            if len(videos) != len(prompts) or (flags is not None and len(flags) != len(videos)):
                raise ValueError(f"reward {self.name!r}: {len(videos)} videos but {len(prompts)} prompts"
                                 + ("" if flags is None else f" and {len(flags)} {name} flags"))
        if self._closed:
            raise RuntimeError("RewardRunner is closed")
        fixed = [unscored_outcome(kind) if kind else error_outcome(why, 1) if why else None
                 for kind, why in zip(unscored or [None] * len(videos), refused or [None] * len(videos), strict=True)]
        call = self._score(list(videos), list(prompts), fixed, meta)
        # the loop held-out evaluation's reward calls (call_reward) run on too; a fresh one if the last one died
        loop = sync_loop()
        inner = asyncio.run_coroutine_threadsafe(call, loop)
        future: Future[RewardOutcome] = Future()
        self._pending[future] = inner
        inner.add_done_callback(lambda done: _relay(done, future))
        dead = self._dead_loop_outcome(fixed)
        unwatch = when_loop_ends(loop, lambda why: _settle(future, result=dead(why)))
        future.add_done_callback(lambda done: self._finished(done, inner, unwatch))
        return future

    def _finished(self, future: Future[RewardOutcome], inner: Future[RewardOutcome],
                  unwatch: Callable[[], None]) -> None:
        """``future`` (what submit returned) ended: forget it; cancelled by its holder, cancel its call too."""
        unwatch()
        self._pending.pop(future, None)
        if future.cancelled():
            inner.cancel()  # cancels its task on the loop as well

    def _dead_loop_outcome(self, fixed: list[RewardOutcome | None]) -> Callable[[str], RewardOutcome]:
        """The outcome of a call whose event loop died (``why``), each clip the reward was to see ineligible."""
        def outcome(why: str) -> RewardOutcome:
            reason = f"reward {self.name!r} not answered: {why}; later calls run on a new event loop"
            return merge_outcomes([f or error_outcome(reason, 1) for f in fixed])
        return outcome

    def stuck_threads(self) -> int:
        """Threads still running a sync reward call that timed out (training/reward_threads.py)."""
        return self._threads.stuck()

    async def _score(self, videos: list[np.ndarray], prompts: list[str], fixed: list[RewardOutcome | None],
                     meta: dict[str, Any]) -> RewardOutcome:
        """``fixed``: per video, None (scored) or its outcome without the reward (unscored or refused)."""
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        if all(f is None for f in fixed):  # the whole batch, as it came
            return await self._call(videos, prompts, meta, deadline)
        parts, start = [], 0
        while start < len(videos):
            end = start + 1
            while end < len(videos) and (fixed[end] is None) == (fixed[start] is None):
                end += 1
            if fixed[start] is None:
                run = dict(meta, first_index=int(meta.get("first_index", 0)) + start)
                if "group_ids" in meta:
                    run["group_ids"] = list(meta["group_ids"])[start:end]
                parts.append(await self._call(videos[start:end], prompts[start:end], run, deadline))
            else:
                parts += [f for f in fixed[start:end] if f is not None]
            start = end
        return merge_outcomes(parts)

    async def _call(self, videos: list[np.ndarray], prompts: list[str], meta: dict[str, Any],
                    deadline: float | None) -> RewardOutcome:
        """One reward call, ineligible with its reason when it is refused or misses ``deadline`` (module docstring)."""
        if self._threads.full():
            return error_outcome(f"reward {self.name!r} not called: {self._threads.limit} reward threads are still "
                                 "stuck in calls that timed out (Python cannot stop a thread; calls resume once "
                                 "one of them returns)", len(videos))
        if deadline is not None and deadline <= time.monotonic():  # an earlier part of this submit used it up
            return self._timed_out(len(videos))
        call = self._threads.within(deadline, acall_reward(self.fn, self.name, videos, prompts, meta))
        if deadline is None:
            return await call
        task = asyncio.ensure_future(call)
        try:
            done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
        finally:
            if not task.done():  # timed out, or this call cancelled (close): abandoned, never awaited
                task.cancel()
                task.add_done_callback(_ignore_end)
        if task in done:
            return task.result()
        return self._timed_out(len(videos))

    def _timed_out(self, n: int) -> RewardOutcome:
        return error_outcome(f"reward {self.name!r} timed out after {self.timeout_s:g} s", n)

    def close(self) -> None:
        """Cancel the calls still running (their futures end cancelled) and refuse new ones (idempotent).
        The loop itself is the process's bridge loop and stays."""
        self._closed = True
        for future, inner in list(self._pending.items()):
            inner.cancel()  # cancels its task on the loop as well
            future.cancel()

    def __enter__(self) -> RewardRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _relay(inner: Future[RewardOutcome], future: Future[RewardOutcome]) -> None:
    """What the loop's call ended with, as the end of the future submit returned."""
    if inner.cancelled():
        future.cancel()
    elif (exc := inner.exception()) is not None:
        _settle(future, error=exc)
    else:
        _settle(future, result=inner.result())


def _settle(future: Future[RewardOutcome], *, result: RewardOutcome | None = None,
            error: BaseException | None = None) -> None:
    """End ``future`` unless it has ended already (the call and its loop's death race; close cancelled it)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]
    except InvalidStateError:
        pass


def _ignore_end(task: asyncio.Task[Any]) -> None:
    """Collect an abandoned call's end, so asyncio does not log it as an exception never retrieved."""
    if not task.cancelled():
        task.exception()


def unscored_outcome(kind: str) -> RewardOutcome:
    """The outcome of one clip not shown to the reward: its rollout's latents held NaN or inf (``kind``)."""
    reason = f"rollout diverged: its latents hold {'NaN' if kind == 'nan' else 'inf'}; not decoded or scored"
    return RewardOutcome([None], [reason], {k: int(k == kind) for k in KINDS}, [None], {}, {}, [kind])


def merge_outcomes(outcomes: Sequence[RewardOutcome]) -> RewardOutcome:
    """The outcomes of consecutive parts of a batch as one outcome of the whole batch, in order."""
    counts: dict[str, int] = {}
    for o in outcomes:
        for kind, n in o.counts.items():
            counts[kind] = counts.get(kind, 0) + n
    names = sorted({k for o in outcomes for k in o.components})  # a part without a component: None there
    return RewardOutcome(rewards=[r for o in outcomes for r in o.rewards],
                         reasons=[r for o in outcomes for r in o.reasons], counts=counts,
                         run_ids=[r for o in outcomes for r in (o.run_ids or [None] * len(o.rewards))],
                         components={k: [v for o in outcomes for v in o.components.get(k, [None] * len(o.rewards))]
                                     for k in names},
                         usage=sum_usage([o.usage for o in outcomes]),
                         kinds=[k for o in outcomes for k in o.kinds]
                         if all(len(o.kinds) == len(o.rewards) for o in outcomes) else [])
