"""build_reward_agent: wires the LangGraph state machine from the config's module switches (DESIGN.md §3).

The nodes a config wires and their edges are in `graph.routes` (with the graph's picture); this module
builds the context, adds the nodes and edges and compiles.

Building loads no weights and opens no network connection: the chat model is only constructed
(ChatOpenAI connects on first request) and evidence tools load lazily on first use.

Decisions where the issue was silent:
- Extra keyword arguments beyond DESIGN.md: `backbone=` (a ready Backbone, e.g. to share one stage
  cache across presets), `settings=` (BackboneSettings; read from the environment only when needed
  for a default: model None, or checkpointer None) and `frame_store=` (share decoded frames, encoded
  images, motion tracks and surprise scores across agents: only between agents with the same tools,
  since tool outputs are filed by clip and request, not by tool). `checkpointer=False` compiles
  without a checkpointer.
- Default tools (tools None): `tools.toolbox.Toolbox(ToolSettings.from_env())`, built lazily on the
  first tool use; its quality thresholds (`RAA_QUALITY_*`) apply to the quality node in every preset.
- The defaults that hold weights or files are shared by every agent the process builds with the same
  settings: one Toolbox per tool settings, one trace-database saver per `traces_path`, one stage cache per
  `cache_path` (`_shared_toolbox`, `_shared_checkpointer`, `_stage_cache`). `score_video` builds an
  agent per call: in a loop it loaded V-JEPA 2 / CoTracker3 again for every clip, and each call opened
  SQLite connections whose file descriptors SQLite keeps until every connection to that file closes (one
  more open file per call, towards the process limit).
- The default checkpointer is a SqliteSaver at `settings.traces_path` with async methods, so `ainvoke`
  (used by `ascore_videos`) works with it: reads and writes run in a worker thread, so a database
  locked by another process (a wait of up to `graph.stores.TRACE_WAIT_S`) never stalls the event loop
  that all runs share. With the default durability ("exit") that is one hop per run: no difference
  in benchmarks/agent_overhead.py (three interleaved pairs, 2.99-3.22 inline vs 2.99-3.06). With
  durability "async" (a checkpoint per step) the hops cost ~10 ms of wall time per full-preset run on
  the 2-core VM (69-79 ms inline vs 81-87 ms, two interleaved pairs), the price of never blocking the
  loop in that opt-in mode. Its serializer allow-lists the graph.schemas records (`graph.tracing.traces_serde`). Pass
  `InMemorySaver(serde=traces_serde())` for in-memory traces without deserialization warnings.
- The agent carries its own recursion limit (`recursion_limit`: the longest run its caps allow, from
  `graph.routes.max_supersteps`, plus slack), so the loops end at `max_tool_rounds` and `max_repair_rounds`, not
  at LangGraph's default: 25 supersteps in the langgraph releases pyproject.toml admits (>=0.6) before the
  default was raised, which a full run with max_tool_rounds=6 (26 supersteps) passed, so every such run raised
  GraphRecursionError and ended ineligible. A limit passed at invoke still wins.
- The agent is a `graph.thread_guard.RewardAgent`: a new input on a thread that already holds a run raises
  `ThreadInUseError` before LangGraph checkpoints it, so the finished run's trace is never overwritten; a resume by
  an agent of another config than the run's raises `ResumeMismatchError` (the stages left ran under the other's
  switches and gate); and each
  run claims its id in a SQLite trace file (`graph.thread_claims`), with the settings' claim age when the builder
  has settings (`BackboneSettings.foreign_claim_max_age_s`, bound in the agent's config).
- The trace database runs in WAL mode with synchronous=NORMAL: each checkpoint commit appends to
  the write-ahead log instead of fsyncing the database (about 13 ms per commit on this machine, tens
  of commits per run). A process crash loses no committed checkpoint; a power loss may lose the last commits.
  WAL needs a local filesystem (not NFS); readers (`raa trace`, Studio) see committed traces as before.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langgraph.graph import StateGraph

from graph.config import AgentConfig
from graph.context import RunContext, tool_provider
from graph.frame_store import FrameStore
from graph.nodes.assess import assess
from graph.nodes.audit import audit, repair
from graph.nodes.common import make_node
from graph.nodes.contract import contract
from graph.nodes.direct import direct
from graph.nodes.extra import extra
from graph.nodes.final_check import final_check
from graph.nodes.gate import gate
from graph.nodes.inspect import inspect, tool_call
from graph.nodes.observe import observe
from graph.nodes.quality import quality
from graph.nodes.reflect import reflect
from graph.nodes.surprise import surprise
from graph.routes import RouteStep, expected_nodes, max_supersteps, node_routes, static_edges
from graph.state import AgentInput, AgentState
from graph.stores import (
    TRACE_TABLES,
    TRACE_WAIT_S,
    connect_wal,
    ensure_parent,
    retry_locked,
    store_errors,
)
from graph.thread_claims import CLAIM_AGE_KEY
from graph.thread_guard import RewardAgent

_STAGES = {"quality": quality, "observe": observe, "contract": contract, "surprise": surprise, "extra": extra,
           "assess": assess, "inspect": inspect, "tool_call": tool_call, "reflect": reflect, "audit": audit,
           "repair": repair, "final_check": final_check, "gate": gate, "direct": direct}


def build_reward_agent(config: AgentConfig | None = None, *, model: Any = None, tools: Any = None,
                       checkpointer: Any = None, backbone: Any = None, settings: Any = None,
                       frame_store: FrameStore | None = None):
    """A compiled LangGraph reward agent (DESIGN.md §3 "Public API").

    Args:
        config: module switches and caps (default `AgentConfig(preset="full")`).
        model: any LangChain chat model (a plain ChatOpenAI is read as the one from settings is:
            `graph.completion_shape.shaped`); None builds ChatOpenAI from `BackboneSettings.from_env()`. An
            injected model gets an in-memory stage cache (`graph.cache.MEMORY_ENTRIES` most recent
            outputs), not the file at `settings.cache_path`: its name may not identify who answers.
        tools: `AgentTools(tracker=..., surprise=..., quality=...)` or a `tools.toolbox.Toolbox`; None
            builds a lazy Toolbox from `ToolSettings.from_env()`.
        checkpointer: a LangGraph checkpointer; None = SqliteSaver at `settings.traces_path`;
            False = none.
        backbone: a ready `graph.backbone.Backbone` (overrides `model`).
        settings: `graph.settings.BackboneSettings` (default: from the environment, when needed).
        frame_store: shared FrameStore (default: a new one sized from the settings).
    """
    from graph.backbone import Backbone, default_chat_model
    from graph.cache import StageCache

    config = config or AgentConfig()
    cfg = config.resolved()
    settings = needed_settings(settings, model=model, backbone=backbone, checkpointer=checkpointer)
    if backbone is None:
        if model is None:
            chat = default_chat_model(settings)  # a missing endpoint fails here, before the cache file exists
            backbone = Backbone.from_settings(settings, model=chat, cache=_stage_cache(settings.cache_path))
        else:
            backbone = Backbone(model, cache=StageCache(None), **_backbone_opts(settings))
    if backbone.draw != cfg.draw:  # AgentConfig.draw: this agent's runs take their own stage-cache entries
        backbone = backbone.for_draw(cfg.draw)
    if tools is None:  # lazy: builds no model; also carries the quality thresholds from the settings
        from tools.settings import ToolSettings

        tool_settings = ToolSettings.from_env()
        tools = _shared_toolbox(tool_settings.model_dump_json(), tool_settings.token())
    store = frame_store or frame_store_for(settings)
    ctx = RunContext(backbone=backbone, config=cfg, frames=store, tools=tool_provider(tools))
    extra = bool(ctx.tools.extra)
    g = StateGraph(AgentState, context_schema=RunContext, input_schema=AgentInput)
    for name in expected_nodes(cfg, extra=extra):
        g.add_node(name, make_node(name, _STAGES[name], ctx, guard=name not in ("quality", "gate")))
    for source, target in static_edges(cfg, extra=extra):
        g.add_edge(source, target)
    for name, (route, destinations) in node_routes(cfg, extra=extra).items():
        g.add_conditional_edges(name, RouteStep(route), sorted(set(destinations)))
    if checkpointer is None:
        checkpointer = _shared_checkpointer(str(settings.traces_path))
    agent = RewardAgent.of(g.compile(checkpointer=checkpointer or None, name=AGENT_NAME.format(cfg.preset)),
                           ctx.run_settings())  # a resumed run's must match
    bound: dict[str, Any] = {"recursion_limit": recursion_limit(cfg, extra=extra)}
    if settings is not None:  # a run.s claim of its id ages as the settings say (graph.thread_claims)
        bound["configurable"] = {CLAIM_AGE_KEY: settings.foreign_claim_max_age_s}
    return agent.with_config(**bound)


RECURSION_SLACK = 8
"""Supersteps allowed beyond `graph.routes.max_supersteps` (LangGraph counts the input as one more)."""


def recursion_limit(cfg: Any, *, extra: bool = False) -> int:
    """The recursion limit an agent is compiled with: its longest run's supersteps plus `RECURSION_SLACK`
    (module docstring)."""
    return max_supersteps(cfg, extra=extra) + RECURSION_SLACK


AGENT_NAME = "reward_agent[{}]"
"""The compiled agent's `name`, with its preset label (`agent_preset` reads it back)."""


def agent_preset(agent: Any) -> str | None:
    """The preset label of an agent `build_reward_agent` compiled (from its `name`); None for another graph."""
    name = getattr(agent, "name", None)
    head, _, tail = AGENT_NAME.partition("{}")
    if isinstance(name, str) and name.startswith(head) and name.endswith(tail):
        return name[len(head): len(name) - len(tail)] or None
    return None


@functools.lru_cache(maxsize=8)
def _shared_toolbox(settings_json: str, token: str | None) -> Any:
    """The default Toolbox of these tool settings (JSON of `ToolSettings`, and its token, which the JSON
    masks as "**********": a toolbox built from the JSON alone sent that mask to the tool service), one
    per process (module docstring)."""
    import json

    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    return Toolbox(ToolSettings.model_validate({**json.loads(settings_json), "tools_token": token}))


@functools.lru_cache(maxsize=16)
def _shared_checkpointer(path: str) -> Any:
    """The default trace saver of the database at `path`, one per process (module docstring)."""
    return default_checkpointer(path)


def _stage_cache(path: Any) -> Any:
    """The stage cache at `path`, one per process (module docstring); None: a new in-memory one."""
    from graph.cache import StageCache

    return StageCache(None) if path is None else _shared_stage_cache(str(path))


@functools.lru_cache(maxsize=16)
def _shared_stage_cache(path: str) -> Any:
    from graph.cache import StageCache

    return StageCache(path)


def needed_settings(settings: Any, *, model: Any, backbone: Any, checkpointer: Any) -> Any:
    """`settings`, or when None and a default needs them (no model and no backbone: ChatOpenAI from the
    settings; no checkpointer: the trace database) `BackboneSettings.from_env()`; else None."""
    from graph.settings import BackboneSettings

    if settings is None and (backbone is None and model is None or checkpointer is None):
        return BackboneSettings.from_env()
    return settings


def frame_store_for(settings: Any) -> FrameStore:
    """The FrameStore an agent built with `settings` (`graph.settings.BackboneSettings` or None for the
    defaults) gets unless one is passed: images at the settings' long side and JPEG quality."""
    if settings is None:
        return FrameStore()
    return FrameStore(long_side=settings.image_long_side, quality=settings.jpeg_quality)


def _backbone_opts(settings: Any) -> dict[str, Any]:
    if settings is None:
        return {}
    return {"method": settings.method, "schema_retries": settings.schema_retries,
            "max_retries": settings.max_retries, "timeout_s": settings.timeout_s, "temperature": settings.temperature}


def default_checkpointer(path: str | Path):
    """SqliteSaver at `path` (parent folders created) usable from sync and async code."""
    from graph.tracing import ThreadedAsyncSaver, traces_serde

    with store_errors(path, "trace database", "RAA_TRACES_PATH"):
        ensure_parent(path)
        saver = ThreadedAsyncSaver(connect_wal(path, "trace database", TRACE_TABLES, timeout=TRACE_WAIT_S),
                                   serde=traces_serde())
        retry_locked(saver.conn, saver.setup)  # tables: another process may be creating them too
    return saver


def node_names(agent: Any) -> Iterator[str]:
    """Stage nodes of a compiled agent (without START/END)."""
    return (n for n in agent.get_graph().nodes if not n.startswith("__"))
