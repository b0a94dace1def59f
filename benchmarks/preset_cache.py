"""Stage-output cache across the paper's 14 presets (Table 2): every preset scores the same 10 clips
through one shared Backbone / StageCache, all 140 runs in flight together.

Prints `backbone_calls_over_unique_stage_inputs`: model calls made over the number of distinct stage
inputs requested. 1.0 means every distinct input reached the model exactly once (target 1.0); without
the cache the same ratio would be `requests_over_unique_stage_inputs`.

A distinct input is counted from what the agent asks the backbone for, written out in full (stage, the
schema or tool definitions, parameters, and every message's type, content with its whole image data
URLs, tool calls and tool call id), not with the cache's own `stage_key`: counted by the key, a key
that left something out (wrong outputs served) or changed per request (no reuse) still gives 1.0.
`unique_stage_keys_over_unique_stage_inputs` compares the two counts: 1.0 when the cache tells inputs
apart exactly as their content does (fewer keys: different inputs share a key; more: equal inputs do not).
"""

from __future__ import annotations

import asyncio
import json
import sys  # noqa: E402
import tempfile
import time
from pathlib import Path

# Run with `python -P` (see README): benchmarks/ goes last so benchmarks/tools.py never shadows `tools`.
sys.path.append(str(Path(__file__).resolve().parent))
from _agent_common import INSTRUCTION, DiffSurprise, agent_script, write_clips  # noqa: E402

N_CLIPS = 10


def _written_out(stage: str, spec: object, params: dict | None, messages: list) -> str:
    """One stage input in full, as text: equal for equal inputs, independent of `graph.cache_keys.stage_key`."""
    rows = [m.model_dump(include={"type", "content", "tool_calls", "tool_call_id"}) for m in messages]
    return json.dumps([stage, spec, params or {}, rows], sort_keys=True, default=str)


def main() -> None:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from graph import AgentConfig, AgentTools, ascore_videos, build_reward_agent
    from graph.backbone import Backbone
    from graph.cache import StageCache
    from graph.config import PRESETS
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    keys: list[str] = []
    inputs: list[str] = []

    class KeyedBackbone(Backbone):
        """Records every request (cache hit or not): its stage key and its input written out in full."""

        async def astructured(self, stage, schema, messages, usage, *, params=None):
            keys.append(self.key_of(stage, messages, method=self.method, params=params, schema=schema))
            inputs.append(_written_out(stage, schema.model_json_schema(), params, messages))
            return await super().astructured(stage, schema, messages, usage, params=params)

        async def atool_round(self, stage, messages, tools, usage):
            specs = [convert_to_openai_tool(t) for t in tools]
            keys.append(self.key_of(stage, messages, method="tools", tools=specs))
            inputs.append(_written_out(stage, specs, None, messages))
            return await super().atool_round(stage, messages, tools, usage)

    model = ScriptedChatModel(agent_script())
    backbone = KeyedBackbone(model, cache=StageCache(None), retry_wait=(0.0, 0.0))
    tools = AgentTools(tracker=LKTracker(), surprise=DiffSurprise())
    store = FrameStore()
    with tempfile.TemporaryDirectory() as tmp:
        items = [(c, INSTRUCTION) for c in write_clips(Path(tmp), N_CLIPS)]

        async def all_presets() -> list:
            runs = []
            for preset in PRESETS:
                agent = build_reward_agent(AgentConfig(preset=preset), backbone=backbone, tools=tools,
                                           checkpointer=False, frame_store=store)
                runs.append(ascore_videos(items, AgentConfig(preset=preset), agent=agent,
                                          max_concurrency=N_CLIPS))
            return await asyncio.gather(*runs)

        t0 = time.perf_counter()
        results = [r for group in asyncio.run(all_presets()) for r in group]
        wall = time.perf_counter() - t0
    bad = [(r.preset, r.reasons) for r in results if r.status != "scored"]
    assert not bad, bad[:3]
    unique = len(set(inputs))
    print(f"runs: {len(results)}")
    print(f"stage_requests: {len(inputs)}")
    print(f"unique_stage_inputs: {unique}")
    print(f"unique_stage_keys: {len(set(keys))}")
    print(f"backbone_calls: {len(model.calls)}")
    print(f"cache_hits: {len(inputs) - len(model.calls)}")
    print(f"wall_s: {wall:.2f}")
    print(f"unique_stage_keys_over_unique_stage_inputs: {len(set(keys)) / unique:.3f}")
    print(f"requests_over_unique_stage_inputs: {len(inputs) / unique:.3f}")
    print(f"backbone_calls_over_unique_stage_inputs: {len(model.calls) / unique:.3f}")


if __name__ == "__main__":
    main()
