"""Event-loop CPU of a reward-agent run through the real ChatOpenAI client, next to the scripted backbone.

The agent benchmarks use a scripted LangChain chat model; deployments use `ChatOpenAI` against vLLM or
another OpenAI-compatible server. This script serves the same scripted replies from a local
OpenAI-compatible stub (`tests/openai_stub.py`, in a subprocess so its CPU is not the client's) and
runs preset full on the same clips through both, measuring the CPU time of the thread running the
event loop (where LangGraph, the nodes and the client's request building run).

Prints, per structured-output method (`json_schema`, `function_calling`):
- `{method}_loop_cpu_per_run_s`: event-loop CPU of one run through ChatOpenAI (median).
- `{method}_loop_cpu_per_call_ms`: the same per model call.
- `{method}_max_runs_per_s_one_loop`: 1 / loop CPU per run, the ceiling of one process's event loop
  however fast the server answers (shard larger batches over processes).
and `scripted_loop_cpu_per_run_s`, `chatopenai_over_scripted_loop_cpu` (json_schema), and
`structured_build_ms`: what `ChatOpenAI.with_structured_output(Assessment)` costs; the backbone builds
it once per schema instead of once per call.

No target: a diagnostic for sizing batch scoring. Most of the client's cost is outside this project:
the openai SDK's request transform walks every content block with type introspection (about half
of a 32-frame call's CPU with openai 3.57, once per request also on the `parse()` path that
`json_schema` uses), and langchain-openai checks each block's type against type hints computed afresh
per block (about a quarter; langchain-core's `_get_data_content_block_types` is not cached).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run with `python -P` (see README): benchmarks/ goes last so benchmarks/tools.py never shadows `tools`.
sys.path.append(str(Path(__file__).resolve().parent))
from _agent_common import INSTRUCTION, DiffSurprise, agent_script, stub_server, write_clips  # noqa: E402

N_CLIPS = 4
REPEATS = 3
METHODS = ("json_schema", "function_calling")


def _agent(model: object, method: str) -> object:
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.cache import StageCache
    from graph.frame_store import FrameStore
    from tools.motion import LKTracker

    return build_reward_agent(AgentConfig(preset="full"),
                              backbone=Backbone(model, method=method, cache=StageCache(None), retry_wait=(0.0, 0.0)),
                              tools=AgentTools(tracker=LKTracker(), surprise=DiffSurprise()),
                              checkpointer=InMemorySaver(), frame_store=FrameStore())


def _run(agent: object, clip: str, run_id: str) -> tuple[float, int]:
    """(event-loop thread CPU seconds, model calls) of one run."""
    from graph.api import arun_agent

    async def go() -> tuple[object, float]:
        start = time.thread_time()
        result = await arun_agent(agent, clip, INSTRUCTION, run_id, "full")
        return result, time.thread_time() - start

    result, loop_cpu = asyncio.run(go())
    assert result.status == "scored", result.reasons
    return loop_cpu, int(result.usage["calls"])


def main() -> None:
    from langchain_openai import ChatOpenAI

    from graph.schemas import Assessment
    from graph.testing import ScriptedChatModel

    with stub_server() as base_url, tempfile.TemporaryDirectory() as tmp:
        clips = write_clips(Path(tmp), N_CLIPS)
        kinds = {"scripted": lambda: _agent(ScriptedChatModel(agent_script()), "json_schema")}
        for method in METHODS:
            kinds[method] = lambda m=method: _agent(
                ChatOpenAI(model="stub", api_key="EMPTY", base_url=base_url, max_retries=0), m)
        for make in kinds.values():
            _run(make(), clips[0], "warm")  # imports, first-call costs
        cpu: dict[str, list[float]] = {k: [] for k in kinds}
        calls: dict[str, list[int]] = {k: [] for k in kinds}
        for r in range(REPEATS):  # interleaved, so a slow period of the host hits every kind
            for i, clip in enumerate(clips):
                for kind, make in kinds.items():
                    loop_cpu, n = _run(make(), clip, f"{kind}-{r}-{i}")
                    cpu[kind].append(loop_cpu)
                    calls[kind].append(n)
        model = ChatOpenAI(model="stub", api_key="EMPTY", base_url=base_url, max_retries=0)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"scripted_loop_cpu_per_run_s: {med['scripted']:.3f}")
    for method in METHODS:
        per_call = med[method] / statistics.median(calls[method])
        print(f"{method}_loop_cpu_per_run_s: {med[method]:.3f}")
        print(f"{method}_loop_cpu_per_call_ms: {per_call * 1000:.1f}")
        print(f"{method}_max_runs_per_s_one_loop: {1 / med[method]:.1f}")
    print(f"model_calls_per_run: {statistics.median(calls['json_schema']):.0f}")
    t0 = time.perf_counter()
    for _ in range(50):
        model.with_structured_output(Assessment, method="json_schema", include_raw=True)
    print(f"structured_build_ms: {(time.perf_counter() - t0) / 50 * 1000:.2f}")
    print(f"chatopenai_over_scripted_loop_cpu: {med['json_schema'] / med['scripted']:.2f}")


if __name__ == "__main__":
    main()
