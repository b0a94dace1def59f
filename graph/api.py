"""Convenience API: score_video (sync) and ascore_videos (async, a GRPO group) (DESIGN.md §3).

Every item yields one RewardResult; a clip that cannot be evaluated yields its own ineligible
result with the reason, never an exception that takes down the batch and never a made-up reward
(the ineligible results of runs that produced none, and of a trace not saved: graph/run_results.py).

Decisions where the issue was silent:
- Bad instructions are handled inside the graph (quality node), the same for single calls and
  batches: an empty or whitespace-only instruction gives an ineligible result with the reason
  "instruction is empty or whitespace only"; an instruction longer than
  `AgentConfig.max_instruction_chars` (default 4000) is truncated and the truncation is listed in
  `reasons`. Prompt-injection text is passed to the model only as delimited data, and the reward is
  computed by fixed code from the structured judgments.
- Wrong argument *types* (video not a str/Path, instruction not a str, an item's run_id neither a str nor
  None, max_concurrency not an int or < 1) are caller bugs and raise TypeError/ValueError at once. A float
  max_concurrency made an asyncio semaphore that never blocks (its count never reaches exactly 0): no bound.
- A relative video path is made absolute (from the current folder) before the run, so the trace names the
  clip wherever `raa report` / `raa trace` later run (it recorded the path as typed, and a report made
  from another folder said "frames unavailable: video file not found"); `raa score-batch` and the
  trainer resolve theirs too. A path that cannot be resolved (a symlink loop, a NUL byte) is only made
  absolute: its run cannot read the clip and is that clip's ineligible result, not the group's error.
- The run id (checkpoint thread id) is `run-<12 hex>` unless given; items of `ascore_videos` may be
  (video, instruction) tuples or dicts with "video", "instruction" and optional "run_id".
- A run id that already has a trace in the agent's checkpointer is not re-run (the trace would mix
  two runs and the frozen contract would refuse the second write): that item is ineligible with the
  reason "agent: settings: run id ... already has a trace" (`run_id_taken`). Two runs of one id at the same time on one checkpointer (a
  batch naming a run id twice) cannot both see the other's trace yet: the second is refused with "run id ...
  is already running" (one trace would have overwritten the other, explaining a result with another clip).
  Two processes sharing a trace file claim the id in it for the run (`graph.run_claims`; the agent itself claims
  it around every run, `graph.thread_claims`, and its errors become these results): the second is
  refused with "run id ... is already running in process N on HOST" (with `durability="exit"` nothing
  was written until the end, so the other's run went unseen and the later trace replaced the earlier).
  Such a refusal (`refused_running`) says that this call was refused and which run holds the id (another run
  in this process, or the process, host and claim time of the other), and its result has no `run_id`: the id
  names the other run's trace, which `raa trace` on the refused result's id showed as if it were its own; nor has
  the result of a run id that already has a trace, for the same reason.
  Either way the call ran nothing because of the run id it was given, not the clip: its result carries a
  "settings" fault of stage "agent" (`run_id_taken`), so the reward service and the trainer count it as an outage
  (``ineligible_error``: the clip under a new id is scored; `raa score-batch --retry-ineligible` retries it), not
  as the agent's verdict that the clip could not be judged (it had no fault, and counted as ``ineligible_none``).
  A run that ends with neither a result nor a fault (a graph bug) is an "internal" fault (`machinery_failed`).
- An empty `items` gives [] without building an agent (no endpoint settings read, no trace database made).
  Cancelling `ascore_videos` cancels its runs, their run-id claims are released (a claim still being written
  when the cancellation came is dropped by its writing thread, `graph.run_claims`) and their queued background
  jobs that no other run wants are cancelled (`graph.job_owners`). So are those of a run that has ended any
  other way: a run that failed before it awaited the surprise scoring or extra tools its quality step queued (an observe call
  that failed), or whose model never asked for the speculative grid track, left them queued, and they ran for
  nobody ahead of the live runs' "later" work (a batch against a failing endpoint ran every clip's V-JEPA 2
  scoring).
- A graph-level exception that escapes the nodes (should not happen) still yields an ineligible
  result with the exception type and message as the reason.
- Checkpoints are written once per run, when it ends (`durability="exit"`, the default of
  `BackboneSettings.trace_durability`): the final state holds the whole step trace that `raa trace`
  shows, and skipping the per-step writes saves about a tenth of a run's CPU time. Pass
  `durability="async"` (or set RAA_TRACE_DURABILITY for the CLI) to keep every step's checkpoint for
  time travel. Calling the compiled graph directly (`agent.invoke`) keeps LangGraph's own default
  ("async").
- The settings an agent is built with (`settings=`, or those read from the environment when a default needs
  them, `graph.builder.needed_settings`) give all of its trace settings: the database (`traces_path`) and the
  defaults of `durability` and `claim_max_age_s` (`trace_durability`, `foreign_claim_max_age_s`); an explicit
  argument wins; without settings, "exit" and the agent's own claim age (`graph.settings.trace_options`: bound from
  the settings it was built with, else 6 h; a ready agent's too, which the 6 h default passed over). Only the path
  was taken: a settings object's "async", or shorter claim age, was silently not used.
- A trace that cannot be saved once the gate has produced the result (the trace database stays locked past
  `graph.stores.TRACE_WAIT_S`, a full disk, a read-only file: LangGraph writes the checkpoint, and hands the
  final state back, only after the last node) does not discard that result: a store fault is neither the
  clip's, the model's nor a tool's, and a trainer would lose a valid sample. The gate's own RewardResult
  (kept as its node returns it, `graph.gate_sink.GateResult`) is returned with `trace_saved=False` (a field, so
  callers need not parse text) and a last reason and note that begin with `UNSAVED_TRACE` and name the error and the
  database (kept for readers of the text, and older tools), so that `raa trace RUN_ID` not finding the run is
  explained; its run-id claim is released without holding the result back (`graph.thread_claims`)
  (with `durability="async"` a failed step checkpoint also surfaces only at the end, after the
  gate). A store failure before the gate ran (the trace look-up or run-id claim before the run) leaves no
  result: ineligible with the error, as before. Nothing is ever made up: only a result the gate produced is returned.
- A streamed run (`arun_agent(..., on_update=...)`, `raa score --stream`) is the same run with its node updates
  handed out as they happen: the same trace look-up, in-process check and run-id claim, released the same
  way. `raa score --stream` ran `agent.astream` itself, without any of them, so a second process could run
  its id at once and `raa prune` could not see it in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables.config import RunnableConfig, merge_configs

from graph import frame_fork
from graph.config import AgentConfig
from graph.gate_sink import GATE_SINK_KEY, GateResult
from graph.job_owners import abandon
from graph.run_results import (
    ineligible_result,
    machinery_failed,
    refused_running,
    run_id_taken,
    unsaved_trace,
)
from graph.schemas import RewardResult
from graph.settings import TraceDurability, trace_options
from graph.thread_claims import CLAIM_AGE_KEY, RunClaimFailed, RunIdClaimed, live_holder


def new_run_id() -> str:
    """A fresh run id (also the checkpoint thread id)."""
    return f"run-{uuid.uuid4().hex[:12]}"


def _item(item: Any) -> tuple[str, str, str | None]:
    if isinstance(item, Mapping):
        _check_keys(item)
        video, instruction, run_id = item.get("video"), item.get("instruction"), item.get("run_id")
    elif isinstance(item, tuple | list) and len(item) == 2:
        (video, instruction), run_id = item, None
    else:
        raise TypeError(f"batch items must be (video, instruction) or dicts, got {type(item).__name__}")
    return _checked(video, instruction, run_id)


def _checked(video: Any, instruction: Any, run_id: Any) -> tuple[str, str, str | None]:
    """(video path as the run gets it, instruction, run id or None) of one clip; TypeError for a wrong type
    (module docstring)."""
    return clip_path(video), _instruction(instruction), _run_id(run_id)


def _check_keys(item: Mapping) -> None:
    """TypeError naming the first of "video" and "instruction" a dict item lacks: "video must be a path, got
    NoneType" named neither the key nor, for an item written like a `raa score-batch` manifest row, the rename."""
    for key, article, other in (("video", "a", "path"), ("instruction", "an", None)):
        if key not in item:
            hint = (f"rename {other!r} to {key!r}" if other in item
                    else "got keys: " + ", ".join(sorted(map(str, item))))
            raise TypeError(f"a dict batch item needs {article} {key!r} key ({hint})")


def _run_id(run_id: Any) -> str | None:
    if run_id is not None and not isinstance(run_id, str):
        raise TypeError(f"run_id must be a str, got {type(run_id).__name__}")
    return run_id


def clip_path(video: Any) -> str:  # as the run gets it (module docstring)
    if not isinstance(video, str | Path):
        hint = ("; write the frames to a file first: tools.video.write_video(path, frames, fps=16)"
                if type(video).__name__ in ("ndarray", "Tensor") else "")
        raise TypeError(f"video must be a path (str or Path), got {type(video).__name__}{hint}")
    if not str(video):
        return ""
    try:
        return str(Path(video).resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte: the run says why it cannot read it
        return os.path.abspath(video)


def _instruction(instruction: Any) -> str:
    if not isinstance(instruction, str):
        raise TypeError(f"instruction must be a str, got {type(instruction).__name__}")
    return instruction


class _RunningIds:
    """(checkpointer id, run id) of the runs in progress in this process (`arun_agent`), and their lock."""

    def __init__(self) -> None:
        self.ids: set[tuple[int, str] | None] = set()
        self.lock = threading.Lock()

    def after_fork(self) -> None:
        """In a forked child: none of the parent's runs is in progress here, and the lock may have been held at
        the fork (`graph.frame_fork`)."""
        self.ids, self.lock = set(), threading.Lock()


_RUNNING = _RunningIds()
"""The runs in progress; `graph.frame_fork` resets it in a forked child from the first run on (its hook is
registered then, not at import)."""


UpdateSink = Callable[[str, Any], None]
"""Called with (node name, its state update) as each node of a streamed run ends (`arun_agent`'s `on_update`)."""


async def arun_agent(agent: Any, video: str, instruction: str, run_id: str, preset: str, *,
                     durability: TraceDurability = "exit", on_update: UpdateSink | None = None,
                     claim_max_age_s: float | None = None) -> RewardResult:
    """Run one clip through a compiled agent; always returns a RewardResult. `durability`: when the
    checkpointer (if any) writes the run's checkpoints (see module docstring). `on_update`: stream the run,
    handing it each node's update as it happens (`raa score --stream`); the run is otherwise the same one,
    with the same run-id checks and claim. `claim_max_age_s`: when another host's claim of `run_id` is stale
    (`BackboneSettings.foreign_claim_max_age_s`, `graph.run_claims`); None: the agent's own (`graph.thread_claims`)."""
    config: RunnableConfig = {"configurable": {"thread_id": run_id}}
    if claim_max_age_s is not None:  # else the age bound in the agent's config (its settings') stands
        config["configurable"][CLAIM_AGE_KEY] = claim_max_age_s
    claim = (id(agent.checkpointer), run_id) if agent.checkpointer else None
    frame_fork.watch(_RUNNING)  # registers the fork hook once, on the first run
    with _RUNNING.lock:
        if claim in _RUNNING.ids:
            return refused_running(preset, run_id, None)
        if claim is not None:
            _RUNNING.ids.add(claim)
    try:
        return await _run_agent(agent, video, instruction, run_id, preset, config, durability, on_update)
    finally:
        with _RUNNING.lock:
            _RUNNING.ids.discard(claim)


_READ_BACK = ["result", "faults"]
"""The channels `_run_agent` reads of the final state, all it asks `ainvoke` for: by default LangGraph reads every
channel after every superstep for its "values" stream (31 channels, ~15 supersteps a full run), which cost 1.3-2.1M
instructions per clip of `benchmarks/agent_instructions.py` (0.13-0.2%). The trace (the checkpoint) is unchanged. A run
that writes neither (a graph bug) gets no values back at all (None): read as an empty state, the fault it was."""


def _has_trace(preset: str, run_id: str) -> RewardResult:
    return run_id_taken(preset, f"run id {run_id!r} already has a trace (an earlier run's); this call ran nothing; "
                                "use a new run id")


async def _run_agent(agent: Any, video: str, instruction: str, run_id: str, preset: str, config: RunnableConfig,
                     durability: TraceDurability, on_update: UpdateSink | None = None) -> RewardResult:
    """The run; the agent claims `run_id` in its trace database for it (`graph.thread_claims`)."""
    from graph.thread_guard import ThreadInUseError

    gate = GateResult()
    try:
        if agent.checkpointer:
            previous = await agent.aget_state(config)
            if previous.values:  # an earlier run's trace, or one in flight with its steps saved
                holder = await live_holder(agent.checkpointer, run_id, merge_configs(agent.config, config))
                return _has_trace(preset, run_id) if holder is None else refused_running(preset, run_id, holder)
        inputs = {"video": video, "instruction": instruction, "run_id": run_id}
        run_config: RunnableConfig = {**config, "configurable": {**config.get("configurable", {}), GATE_SINK_KEY: gate}}
        mode = durability if agent.checkpointer else None
        if on_update is None:
            out = await agent.ainvoke(inputs, run_config, durability=mode, output_keys=_READ_BACK) or {}
        else:
            out = await _streamed(agent, inputs, run_config, mode, on_update)
    except RunIdClaimed as exc:  # another process runs it
        return refused_running(preset, run_id, exc.holder)
    except RunClaimFailed as exc:  # the trace database cannot be written: the run could not record its trace
        return machinery_failed(preset, str(exc), run_id)
    except ThreadInUseError:  # another process finished a run of the id since the look-up above
        return _has_trace(preset, run_id)
    except Exception as exc:  # the trace write at the end (nodes already turn their failures into faults)
        if gate.result is not None:  # the gate had produced it: it stands
            return unsaved_trace(gate.result, exc, await _database(agent), run_id)
        return machinery_failed(preset, f"{type(exc).__name__}: {exc}", run_id)
    finally:  # ended however it ended (cancelled between nodes too): its queued background work is nobody's now
        abandon(run_id)
    result = out.get("result")
    if not isinstance(result, RewardResult):
        if not (faults := out.get("faults") or []):
            return machinery_failed(preset, "run ended without a result", run_id)
        return ineligible_result(preset, "; ".join(f.reason() for f in faults), run_id, faults)
    return result


async def _database(agent: Any) -> str:
    """The trace database of `agent`, for a note: its file, or its checkpointer's type."""
    from graph import run_claims

    with contextlib.suppress(Exception):
        if (file := await run_claims.database_file(agent.checkpointer)) is not None:
            return file
    return type(agent.checkpointer).__name__


async def _streamed(agent: Any, inputs: dict, config: RunnableConfig, durability: TraceDurability | None,
                    on_update: UpdateSink) -> Any:
    """The final state of `agent` run on `inputs`, streamed: `on_update(node, update)` per node update. The
    final state comes from the stream's own "values" chunks, so no checkpointer is needed to read it back. The
    stream is closed however this ends (`on_update` raising included), so the run's claim is released at once."""
    out: Any = {}
    stream = agent.astream(inputs, config, stream_mode=["updates", "values"], durability=durability)
    async with contextlib.aclosing(stream) as chunks:
        async for mode, chunk in chunks:
            if mode == "values":
                out = chunk
            else:
                for node, update in chunk.items():
                    on_update(node, update)
    return out


def _agent_and_trace(config: AgentConfig, agent: Any, *, model: Any, tools: Any, checkpointer: Any, backbone: Any,
                     settings: Any, durability: TraceDurability | None,
                     claim_max_age_s: float | None) -> tuple[Any, TraceDurability, float | None]:
    """(the agent, its runs' durability and claim age) of a `score_video` / `ascore_videos` call: `agent`, or
    one built from `config` and the rest with the settings a default needs (`graph.builder.needed_settings`);
    the trace options from those settings where not given (`graph.settings.trace_options`; a ready agent's:
    from `settings` as passed)."""
    from graph.builder import build_reward_agent, needed_settings

    if agent is None:
        settings = needed_settings(settings, model=model, backbone=backbone, checkpointer=checkpointer)
        agent = build_reward_agent(config, model=model, tools=tools, checkpointer=checkpointer, backbone=backbone,
                                   settings=settings)
    return (agent, *trace_options(settings, durability, claim_max_age_s))


async def ascore_videos(items: Iterable[Any], config: AgentConfig | None = None, *, model: Any = None,
                        max_concurrency: int = 16, agent: Any = None, tools: Any = None,
                        checkpointer: Any = None, backbone: Any = None, settings: Any = None,
                        durability: TraceDurability | None = None, limiter: asyncio.Semaphore | None = None,
                        claim_max_age_s: float | None = None) -> list[RewardResult]:
    """Score many clips concurrently (at most `max_concurrency` at once); results in input order. With a
    ready `agent`, `config` is not used: results that the agent could not write (a reused run id, an escaped
    error) say the agent's own preset, not `config.preset` (default "full").
    `durability`: when checkpoints are written; it and `claim_max_age_s` (as for `arun_agent`) default to the
    settings' (see module docstring). `limiter`: a semaphore shared with other calls running at the same time
    (instead of this call's own of `max_concurrency`), so their runs together stay within its bound (the
    trainer scores several groups at once)."""
    from graph.builder import agent_preset

    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):  # a float bound is no bound
        raise TypeError(f"max_concurrency must be an int, got {type(max_concurrency).__name__}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    config = config or AgentConfig()
    parsed = [_item(i) for i in items]
    if not parsed:  # nothing to run: no agent to build (no endpoint settings needed, no trace database made)
        return []
    agent, durability, claim_max_age_s = _agent_and_trace(
        config, agent, model=model, tools=tools, checkpointer=checkpointer, backbone=backbone, settings=settings,
        durability=durability, claim_max_age_s=claim_max_age_s)
    preset = agent_preset(agent) or config.preset  # a given agent's own: results it writes say that one
    sem = limiter if limiter is not None else asyncio.Semaphore(max_concurrency)

    async def one(video: str, instruction: str, run_id: str | None) -> RewardResult:
        async with sem:
            return await arun_agent(agent, video, instruction, run_id or new_run_id(), preset, durability=durability,
                                    claim_max_age_s=claim_max_age_s)

    return list(await asyncio.gather(*(one(*p) for p in parsed)))


def score_video(video: str | Path, instruction: str, config: AgentConfig | None = None, *, model: Any = None,
                tools: Any = None, checkpointer: Any = None, backbone: Any = None, settings: Any = None,
                run_id: str | None = None, durability: TraceDurability | None = None,
                claim_max_age_s: float | None = None) -> RewardResult:
    """Score one clip (sync). The run goes on the process's bridge loop (`graph.bridge.run_sync`), so this
    also works where an event loop is already running (a Jupyter cell). `durability`, `claim_max_age_s`: as
    for `ascore_videos`."""
    from graph.bridge import run_sync

    config = config or AgentConfig()
    video, instruction, run_id = _checked(video, instruction, run_id)
    agent, durability, claim_max_age_s = _agent_and_trace(
        config, None, model=model, tools=tools, checkpointer=checkpointer, backbone=backbone, settings=settings,
        durability=durability, claim_max_age_s=claim_max_age_s)
    return run_sync(arun_agent(agent, video, instruction, run_id or new_run_id(),
                               config.preset, durability=durability, claim_max_age_s=claim_max_age_s))
