"""Issue 3's required tests where the existing ones did not fail when the behaviour was broken.

Each test names the breakage it catches (checked by breaking the source and running it):
- a repair whose output is dropped: the old audit/repair test passed, because reflect already kept R3 from
  assess, so the requirement the audit called missing was never actually missing;
- a model-written reward / score field taking part in the reward: no test sent one;
- decoded frames or the chat model kept in state: `repr` of a state holding 32 ndarrays stays short (numpy
  summarises them), so the repr-length check passed, and the checkpoint serializer drops a chat model on
  read-back; this test checks what the checkpointer writes and counts its bytes;
- the 81-frame boundary of the inspection access policy (ALL_FRAMES_LIMIT = 80 passed every test).
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from graph_scripts import (
    CLEAN_AUDIT,
    FakeSurprise,
    assessment,
    full_script,
    make_agent,
    moving_square,
    nodes,
    run,
    tool_call,
)
from pydantic import BaseModel

MODEL_NUMBERS = {"reward": 1.0, "score": 1.0, "final_reward": 1.0, "R": 1.0, "T": 1.0, "P": 1.0, "V": 1.0,
                 "R_diag": 1.0, "overall_score": 10}


def _shown_frames(messages) -> list[int]:
    """The frame indices a repair message says it shows ("Frames shown below: [..]")."""
    text = "\n".join(m.content if isinstance(m.content, str) else
                     "\n".join(b.get("text", "") for b in m.content if isinstance(b, dict)) for m in messages)
    return ast.literal_eval(re.search(r"Frames shown below: (\[[^\]]*\])", text).group(1))


def test_repair_judges_the_requirement_the_audit_found_missing(clip):
    """Audit finds R3 missing (assess and reflect never judged it) -> repair judges it from the frames it was
    shown -> the next audit is clean and the repaired judgment is the one scored."""
    partial = assessment()
    partial["judgments"] = partial["judgments"][:2]  # R3 never judged

    def repair(messages, _k):
        return assessment(s3="met", frames=tuple(_shown_frames(messages)[:2]))

    missing = {"missing_requirements": ["R3"], "invented_conditions": [], "contradictions": []}
    script = full_script(assess=[partial], reflect=[partial], audit=[missing, CLEAN_AUDIT], repair=repair)
    agent, model = make_agent("full", script)
    out = run(agent, clip)
    assert [n for n in nodes(out) if n in ("audit", "repair")] == ["audit", "repair", "audit"]
    assert out["audits"][0].missing_requirements == ["R3"] and out["audits"][-1].clean
    assert out["repair_rounds"] == 1 and model.calls_for("repair")[0].images() > 0
    assert out["assessment"].judgment("R3").status == "met"  # the repair's judgment, backed by shown frames
    assert out["result"].status == "scored" and out["result"].reward == pytest.approx(0.975)


def test_numbers_the_model_writes_never_reach_the_reward(clip):
    """T, P, V come from the statuses and levels by fixed code; reward/score fields in the model's replies are
    ignored. R2 not_met, physical 2, visual 2, no failure gate:
    T = (1 + 0) / 2 = 0.5, P = V = 0.25 -> (0.35 + 0.05 + 0.025) * (0.5 + 0.125) = 0.265625."""
    bad = {**assessment(s2="not_met", phys=2, vis=2), **MODEL_NUMBERS}
    script = full_script(assess=[bad], reflect=[bad], repair=[bad],
                         audit=[{**CLEAN_AUDIT, **MODEL_NUMBERS}],
                         observe=[{**full_script()["observe"][0], **MODEL_NUMBERS}])
    agent, model = make_agent("audit_no_gate", script)
    res = run(agent, clip)["result"]
    assert (res.T, res.P, res.V) == (0.5, 0.25, 0.25)
    assert res.reward == pytest.approx(0.265625) and res.status == "scored"
    assert model.calls_for("reflect")  # the replies carrying the numbers were read

    # with the failure gate: the model's numbers do not lift a failed clip above 0 either
    script["final_check"] = [{"failure_established": True, "essential_unverifiable": False, **MODEL_NUMBERS}]
    res = run(make_agent("full", script)[0], clip)["result"]
    assert res.reward == 0.0 and res.status == "zero" and (res.T, res.P, res.V) == (0.5, 0.25, 0.25)


def _thread_bytes(saver, thread_id: str) -> int:
    """Bytes the in-memory checkpointer serialized for one thread (checkpoints, channel blobs, writes)."""
    total = sum(len(c[0][1]) + len(c[1][1]) for ns in saver.storage[thread_id].values() for c in ns.values())
    total += sum(len(v[1]) for k, v in saver.blobs.items() if k[0] == thread_id)
    total += sum(len(w[2][1]) for k, ws in saver.writes.items() if k[0] == thread_id for w in ws.values())
    return total


def _heavy(value, path: str = "state") -> list[str]:
    """Paths in a state value that hold anything but plain data and pydantic records."""
    if isinstance(value, str | int | float | bool | type(None)):
        return []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _heavy(v, f"{path}.{k}")]
    if isinstance(value, list | tuple | set | frozenset):
        return [p for i, v in enumerate(value) for p in _heavy(v, f"{path}[{i}]")]
    from graph.schemas import RECORD_MODULES

    if isinstance(value, BaseModel) and type(value).__module__ in RECORD_MODULES:
        return [p for k, v in value.__dict__.items() for p in _heavy(v, f"{path}.{k}")]
    return [f"{path}: {type(value).__module__}.{type(value).__name__}"]


def test_checkpoints_stay_small_and_hold_no_frames_or_models(clip):
    """Everything the checkpointer serializes is plain data or a graph.schemas record (checked as it is written:
    the serializer keeps a chat model out of the state it reads back, so reading the history back is not
    enough), and the whole run's checkpoints stay small."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import traces_serde
    from tools.motion import LKTracker

    serde, heavy = traces_serde(), []
    dumps = serde.dumps_typed

    def checked_dumps(obj):
        heavy.extend(_heavy(obj, "checkpoint"))
        return dumps(obj)

    object.__setattr__(serde, "dumps_typed", checked_dumps)
    saver = InMemorySaver(serde=serde)
    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(ScriptedChatModel(full_script()), retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()), checkpointer=saver)
    assert run(agent, clip, run_id="small")["result"].status == "scored"
    assert heavy == []
    # the whole run, every checkpoint: ~60 KB; 32 decoded 128x128 frames alone would be 1.5 MB
    assert _thread_bytes(saver, "small") < 250_000
    assert len(list(agent.get_state_history({"configurable": {"thread_id": "small"}}))) > 5


def _outside_sample(n: int) -> list[int]:
    sample = set(np.round(np.linspace(0, n - 1, 32)).astype(int).tolist())
    return [f for f in range(n) if f not in sample]


@pytest.mark.parametrize(("n", "extras"), [(81, 32), (82, 16)])
def test_81_frames_allow_any_frame_and_82_at_most_16_extra(tmp_path, n, extras):
    """Clips of at most 81 frames: any frame may be viewed; longer: at most 16 frames beyond the sample."""
    long_clip = moving_square(tmp_path / f"c{n}.mp4", frames=n, size=64)
    outside = _outside_sample(n)
    asks = [tool_call("view_frames", {"frames": outside[:16]}, call_id="c1"),
            tool_call("view_frames", {"frames": outside[16:32]}, call_id="c2"), "done"]
    agent, _ = make_agent("full", full_script(inspect=asks), frame_budget=64, max_images_per_call=64)
    out = run(agent, long_clip)
    assert out["meta"]["frames"] == n and len(out["sample"]) == 32
    shown = {f for e in out["exchanges"] for f in e["frames"]}
    assert len(shown - set(out["sample"])) == extras
    capped = any("outside the allowed set" in e["text"] for e in out["exchanges"])
    assert capped == (n > 81)
    assert out["result"].status == "scored"
