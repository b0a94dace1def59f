"""RewardAgent: the compiled reward agent, which refuses a new input on a thread that already holds a run.

`build_reward_agent` returns this subclass of LangGraph's CompiledStateGraph. A second input sent to a used
thread (`agent.invoke(..., {"configurable": {"thread_id": same}})`, a notebook cell run twice, `stream`,
`ainvoke`, `astream`; a reused Studio thread) raises `ThreadInUseError` before LangGraph writes anything: LangGraph checkpoints an
input before the first node runs, so the quality node's refusal came too late. The new `video` and
`instruction`, and then the refusal's ineligible result, replaced the finished run's values in the thread's
latest checkpoint: `raa runs` / `raa trace` showed the new clip beside the old run's steps, and
`raa prune --status ineligible` deleted the good run.

Decisions where the issue was silent:
- A reused thread is a caller's mistake, not a clip that cannot be evaluated, so it raises (a ValueError, as
  LangGraph's own refusals of a run's config do) instead of handing back an ineligible result that no
  checkpoint holds. `score_video` / `ascore_videos` check the run id before running and give their
  ineligible result as before.
- "Holds a run": the checkpoint the call would continue from (the thread's latest, or the `checkpoint_id`
  given) has steps or a result, the quality node's own test (which stays, for the calls not checked here).
- Not checked for a run it holds: a resume (input None) or a `Command`, which LangGraph continues from the checkpoint
  (still claimed, below; but checked for its config, next); a call without a checkpointer or a thread id; a run as
  another graph's subgraph (a non-empty `checkpoint_ns`: its checkpoints are the parent's).
- The check reads the checkpoint with `get_state` / `aget_state`: one read per run (nothing to decode for a
  new thread), besides the API's own look-up.
- A resume (input None, or a `Command`) is refused with `ResumeMismatchError` before anything is written when the
  checkpoint it continues was started by an agent of another config (`resume_refusal`: the preset, switches,
  caps, draw, server or backbone settings its quality step recorded, `graph.config.run_settings`, differ from this
  agent's), or with other extra evidence tools (they wire the extra node: a run started with one and resumed without
  it scored without its report; one started with tool "a" and resumed with "b" showed reflect "b"'s report under a
  record naming "a": their names are compared, in order, as the extra node records their reports in the tools' order
  and reflect lists them so: a run started with tools [a, b] and resumed with [b, a] before its extra step showed
  reflect "b"'s report first under a record naming [a, b]).
  The backbone settings (`graph.context.backbone_settings`: model name, the model an OpenAI-family model asks for,
  structured-output method, temperature, the completion-token limit, the images' long side and JPEG quality) decide
  who answers and what it is shown: a run started with model A and resumed by an agent of model B scored one reward from two
  models' answers, and nothing said so (two OpenAI models injected shared the name "ChatOpenAI"); one started at
  max_tokens 512 and resumed at 4096 mixed answers cut at two limits. Timeouts, retries and the endpoint's address
  are the transport's and may differ.
  The switches, caps and backbone settings are compared one by one, and the refusal names each that differs
  ("switch audit True (agent False)"), not the whole dicts; the served model only where it says more than the model's
  name (an injected model, named by its class): an agent built from settings asks for the model it is named by, and
  one of another RAA_MODEL was refused naming both.
  The stages left ran under the other config's switches, caps and gate: a `full` run resumed by an `audit_no_gate`
  agent skipped the final check and scored a clip whose failure `full` establishes, and its result carried the other
  preset's label beside a trace of the first one's stages. A checkpoint with no recorded config (before the quality
  step, or written before the config was recorded) is not checked, nor is what a checkpoint of an older version did
  not record yet (its switches, overrides, caps, draw or backbone settings: a run of 2026-11-29..12-04 recorded its
  preset alone, or without its overrides, and was refused as if it had been started with other switches, or with
  none of this agent's caps). A run that recorded its overrides but no `server` (12-04..12-06) listed there the server settings
  it changed: the others are the defaults, not this agent's (a run started with tool calls passed for one of
  `inspect_mode` plan).
  The caps are judged by their recorded values (`graph.config.run_caps`), not by the overrides, which are
  differences from the defaults of the version that ran: read against a later version's defaults, a run of an old
  default passed for one of the new, and a run that set the new default explicitly was refused (a run recorded before
  its caps is still judged by its overrides). Only the caps, switches and backbone settings both know are compared:
  one added since says nothing (a switch added since was no module of the run's version: every run recorded before
  it was refused, as a whole-dict comparison saw a key missing), nor one removed since, except a switch the run had
  on: its module is not in this version, and the stages left would run without it under a record saying it ran.
  The draw (`AgentConfig.draw`) is checked too: it salts the stage-cache keys, so a draw-0 run resumed at draw 1
  took its stages left from draw 1's answers, a run of neither draw (its draw-0 rerun was no longer served from the
  cache). Not `motion_prefetch` (`graph.config.SPEED_FIELDS`), which decides when the grid track is computed, not
  what the run gathers: a run started with it off was refused a resume under the default.
- A resume that passes its own context (`context=`, a `graph.context.RunContext`: another backbone or tools) is
  checked against that context's settings, which run its stages left (a context of another model was let through);
  they are computed only for a resume of a run that recorded its config (a fresh run's were computed and unused).
- The calls checked here, and resumes and `Command`s on a thread, also claim their run id in a SQLite trace file
  for the run's length, before the look-up (`graph.thread_claims`), so that every run of the agent, not only the
  API's, is seen in flight or dead.
- The checkpointer checked and claimed in is the one the run writes to, picked as LangGraph picks it: one lent in
  the call's config (`configurable[CONFIG_KEY_CHECKPOINTER]`, "__pregel_checkpointer") wins over the compiled one.
  The lent one was checked, but the claim went to the compiled checkpointer's file: none for an agent compiled
  without one, the wrong file for one compiled with another database.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import aclosing
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from pydantic import BaseModel

from graph.thread_claims import aclaimed, claimed


class ThreadInUseError(ValueError):
    """A new input was sent to a thread that already holds a run (see module docstring)."""


class ResumeMismatchError(ValueError):
    """A run was resumed by an agent built with another config than the one it was started by (module docstring)."""


def _run_config(graph: CompiledStateGraph,
                config: RunnableConfig | None) -> tuple[RunnableConfig, BaseCheckpointSaver] | None:
    """(the call's config: `graph.config`, bound by `with_config`, merged with `config`, as LangGraph merges them;
    the checkpointer the run writes to) when this call runs on a thread of a checkpointer (its run id is claimed
    there, and a new input is checked); None when it does not (module docstring)."""
    config = merge_configs(graph.config, config)
    configurable = config.get("configurable") or {}
    if configurable.get("thread_id") is None or configurable.get("checkpoint_ns"):
        return None
    # as LangGraph's Pregel picks it: one lent in the config wins over the compiled one (none with False)
    saver = None if graph.checkpointer is False else configurable.get(CONFIG_KEY_CHECKPOINTER, graph.checkpointer)
    return (config, saver) if isinstance(saver, BaseCheckpointSaver) else None


def _new_input(input: Any) -> bool:
    """Whether `input` starts a run (checked for a thread that holds one), not a resume (None) or a `Command`."""
    return input is not None and not isinstance(input, Command)


def refusal(thread_id: Any, values: dict[str, Any]) -> ThreadInUseError | None:
    """The error for a new input on a thread whose state is `values`; None when the thread holds no run."""
    steps, result = values.get("steps") or [], values.get("result")
    if not steps and result is None:
        return None
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json")
    status = str(result.get("status")) if isinstance(result, dict) else "incomplete"
    return ThreadInUseError(f"thread {str(thread_id)!r} already holds a run ({len(steps)} steps, {status}); its "
                            "trace is kept as it is: score a new input on a new thread id (the run id)")


def resume_refusal(thread_id: Any, values: dict[str, Any],
                   settings: dict[str, Any] | None) -> ResumeMismatchError | None:
    """The error for resuming the run whose state is `values` with an agent whose `graph.config.run_settings` are
    `settings`; None when they match, when the run recorded no config yet, or for an agent that has none."""
    return _resume_refusal(thread_id, values, lambda: settings)


def _resume_refusal(thread_id: Any, values: dict[str, Any],
                    settings_of: Callable[[], dict[str, Any] | None]) -> ResumeMismatchError | None:
    """`resume_refusal`, the agent's settings computed (`settings_of`) only for a run that recorded its config."""
    from graph.config import AgentConfig, recorded_settings, result_overrides, server_settings

    if "preset" not in values:  # nothing recorded to check (a new thread, a run before its quality step)
        return None
    if (settings := settings_of()) is None:  # an agent that has none
        return None
    overrides, server = recorded_settings(values.get("overrides") or {}, values.get("server") or {})
    # the server settings a run did not record: the defaults when it recorded its overrides (before `server` was
    # recorded, it listed there those it changed), this agent's when it recorded neither (nothing is known)
    unlisted = server_settings(AgentConfig().resolved()) if "overrides" in values else settings["server"]
    recorded = {"preset": values.get("preset"),
                "overrides": result_overrides(overrides),  # a speed setting (motion_prefetch) may differ
                "server": {**unlisted, **server}}
    settings = {**settings, "overrides": result_overrides(settings["overrides"])}
    # what an older version did not record (the switches, the overrides, the caps, the draw, the backbone settings,
    # the extra tools' names) is not held against this
    # agent; a run that recorded its caps is judged by them, not by its overrides (differences from its defaults)
    caps = values.get("caps") if isinstance(values.get("caps"), dict) else None
    checked = ["preset", *(["overrides"] if "overrides" in values and caps is None else []), "server"]
    diffs = [f"{k} {recorded[k]!r} (agent {settings[k]!r})" for k in checked if recorded[k] != settings[k]]
    # the switches, caps and backbone settings both versions know, each by name (one added since, or removed, says
    # nothing: a switch added since was no module of the run's version), and the draw
    for kind, name in (("switches", "switch "), ("caps", "")):
        diffs += _named_diffs(values.get(kind), settings.get(kind) or {}, name)
    diffs += _backbone_diffs(values.get("backbone"), settings.get("backbone") or {})
    # but a switch this version no longer has, on in the run, was a module the stages left cannot run
    diffs += [f"switch {k} {v!r} (agent has no such switch)" for k, v in _dict(values.get("switches")).items()
              if v and k not in (settings.get("switches") or {})]
    if "draw" in values and values["draw"] != settings["draw"]:  # another draw's stage-cache entries
        diffs.append(f"draw {values['draw']!r} (agent {settings['draw']!r})")
    # the tools wire the extra node, and their reports are what reflect shows, in their order: the same names, in
    # the same order
    if "extra_tools" in values and list(values["extra_tools"] or []) != list(settings["extra_tools"]):
        diffs.append(f"extra evidence tools {values['extra_tools']!r} (agent {settings['extra_tools']!r})")
    if not diffs:
        return None
    return ResumeMismatchError(f"thread {str(thread_id)!r} was started by an agent of preset {recorded['preset']!r} "
                               f"with another config than this agent's (preset {settings['preset']!r}): "
                               + "; ".join(diffs) + "; resume it with an agent built with the config it was started "
                               "with, or score the clip again on a new thread id (the run id)")


def _named_diffs(recorded: Any, agent: dict[str, Any], prefix: str) -> list[str]:
    """"{prefix}{name} {recorded} (agent {agent's})" for each setting of the `recorded` dict (None for a run that did
    not record it) that the `agent`'s settings hold with another value."""
    return [f"{prefix}{k} {v!r} (agent {agent[k]!r})" for k, v in _dict(recorded).items() if k in agent and v != agent[k]]


def _backbone_diffs(recorded: Any, agent: dict[str, Any]) -> list[str]:
    """`_named_diffs` of the backbone settings, without the served model where the run's and the agent's each name the
    model they ask for (agents built from settings): its difference is the model's, said once."""
    recorded = _dict(recorded)
    if recorded.get("served_model") == recorded.get("model") and agent.get("served_model") == agent.get("model"):
        recorded = {k: v for k, v in recorded.items() if k != "served_model"}
    return _named_diffs(recorded, agent, "")


def _dict(recorded: Any) -> dict[str, Any]:
    """A recorded setting's dict; empty for a run that did not record it (None, or another value a fork wrote)."""
    return recorded if isinstance(recorded, dict) else {}


def _refusal(thread_id: Any, input: Any, values: dict[str, Any], agent_settings: dict[str, Any] | None,
             context: Any) -> ValueError | None:
    """Why this call may not run on the thread whose state is `values`: a new input on a thread that holds a run
    (`refusal`), a resume by an agent of another config (`resume_refusal`, against `_call_settings`, computed only
    for a run that recorded its config); None when it may."""
    if _new_input(input):
        return refusal(thread_id, values)
    return _resume_refusal(thread_id, values, partial(_call_settings, agent_settings, context))


def _call_settings(agent_settings: dict[str, Any] | None, context: Any) -> dict[str, Any] | None:
    """The run settings a call runs under: those of the `RunContext` it passes (`context=`: its own backbone and
    tools run the stages left, `graph.nodes.common`), else the agent's."""
    from graph.context import RunContext

    return context.run_settings() if agent_settings is not None and isinstance(context, RunContext) else agent_settings


def _generator(stream: AsyncIterator[Any]) -> AsyncGenerator[Any, None]:
    """`Pregel.astream`'s stream as the async generator it is (LangGraph annotates it as an AsyncIterator): what
    `aclosing` closes when the caller stops reading it early, so that LangGraph's run ends there too."""
    if not isinstance(stream, AsyncGenerator):
        raise TypeError(f"Pregel.astream gave a {type(stream).__name__}, not an async generator")
    return stream


class RewardAgent(CompiledStateGraph):
    """The compiled reward agent (module docstring). `invoke` / `ainvoke` run through `stream` / `astream`."""

    def __init__(self, *, run_settings: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_settings = run_settings
        """`graph.config.run_settings` of the config the agent was built with (a resume is checked against them)."""

    @classmethod
    def of(cls, compiled: CompiledStateGraph[Any, Any, Any, Any],
           run_settings: dict[str, Any] | None = None) -> RewardAgent:
        """`compiled` as a RewardAgent (the same attributes, as `Pregel.copy` builds a copy), built with the config
        whose `graph.config.run_settings` are `run_settings`."""
        attrs = {k: v for k, v in compiled.__dict__.items() if k != "__orig_class__"}
        return cls(**attrs, run_settings=run_settings)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        if (found := _run_config(self, config)) is None:
            yield from super().stream(input, config, **kwargs)
            return
        run, saver = found
        with claimed(saver, run):  # graph.thread_claims: before the look-up, held for the run
            if (error := _refusal(run["configurable"]["thread_id"], input, self.get_state(run).values,
                                  self.run_settings, kwargs.get("context"))) is not None:
                raise error
            yield from super().stream(input, config, **kwargs)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        if (found := _run_config(self, config)) is None:
            async with aclosing(_generator(super().astream(input, config, **kwargs))) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        run, saver = found
        async with aclaimed(saver, run):  # graph.thread_claims: before the look-up, held for the run
            if (error := _refusal(run["configurable"]["thread_id"], input, (await self.aget_state(run)).values,
                                  self.run_settings, kwargs.get("context"))) is not None:
                raise error
            async with aclosing(_generator(super().astream(input, config, **kwargs))) as chunks:
                async for chunk in chunks:
                    yield chunk
