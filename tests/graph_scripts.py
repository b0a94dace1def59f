"""Shared helpers for the graph tests: synthetic clips and scripted stage replies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from langchain_core.messages import AIMessage

from tools.video import write_video


def moving_square(path: Path, frames: int = 33, size: int = 128, seed: int = 0) -> Path:
    """A small clip: a textured background and a coloured square moving left to right."""
    rng = np.random.default_rng(seed)
    bg = (rng.integers(40, 90, (size, size, 3))).astype(np.uint8)
    out = np.empty((frames, size, size, 3), np.uint8)
    for t in range(frames):
        f = bg.copy()
        x = 8 + int((size - 40) * t / max(frames - 1, 1))
        f[48:80, x:x + 24] = (220, 40, 40)
        out[t] = f
    return write_video(path, out, fps=16.0)


PUSH = "push the red block to the right"
"""The instruction the scripted agent's replies are about (`full_script`)."""


def square_clips(folder: Path, n: int) -> list[Path]:
    """`n` moving-square clips ``c0.mp4`` .. ``c{n-1}.mp4`` in ``folder`` (seeds 0..n-1)."""
    return [moving_square(folder / f"c{i}.mp4", seed=i) for i in range(n)]


def square_batch(folder: Path, n: int, instruction: str = PUSH, name: str = "manifest.jsonl") -> Path:
    """`square_clips` and a score-batch manifest ``name`` in ``folder`` listing each with ``instruction``, one
    line a clip; the manifest's path."""
    square_clips(folder, n)
    manifest = folder / name
    manifest.write_text("".join(json.dumps({"path": f"c{i}.mp4", "instruction": instruction}) + "\n"
                                for i in range(n)))
    return manifest


def textured_frames(rng: np.random.Generator, frames: int = 9, size: int = 32) -> np.ndarray:
    """[frames, size, size, 3] uint8 of a smooth random texture drifting right: a clip with structure (pure
    per-pixel noise is a uniform clip to the quality pre-check, scored 0 before any model call)."""
    import cv2

    base = cv2.GaussianBlur(rng.integers(0, 255, (size, size, 3), dtype=np.uint8), (0, 0), 1.5)
    return np.stack([np.roll(base, t, axis=1) for t in range(frames)])


def uniform_clip(path: Path, frames: int = 33, size: int = 128) -> Path:
    """A spatially uniform (flat grey) clip."""
    return write_video(path, np.full((frames, size, size, 3), 128, np.uint8), fps=16.0)


def garbage_file(path: Path) -> Path:
    """A file that is not a video."""
    path.write_bytes(b"this is not a video" * 100)
    return path


OBSERVATION = {"scene": "a red block on a table", "events": [{"start_frame": 0, "end_frame": 32,
               "description": "a red square slides to the right"}], "objects": ["red block"],
               "visual_issues": [], "summary": "A red block moves right."}
CONTRACT = {"requirements": [
    {"id": "R1", "kind": "object", "text": "the red block is involved", "essential": True},
    {"id": "R2", "kind": "outcome", "text": "the red block ends on the right", "essential": True},
    {"id": "R3", "kind": "action", "text": "the push is smooth", "essential": False}]}


def judgments(s1: str = "met", s2: str = "met", s3: str = "partial", frames: tuple[int, ...] = (0, 17, 32)) -> list:
    return [{"requirement_id": rid, "status": st, "evidence_frames": list(frames), "rationale": "seen",
             "confidence": 0.9} for rid, st in (("R1", s1), ("R2", s2), ("R3", s3))]


def assessment(s1: str = "met", s2: str = "met", s3: str = "partial", phys: int = 5, vis: int = 4,
               frames: tuple[int, ...] = (0, 17, 32)) -> dict:
    return {"judgments": judgments(s1, s2, s3, frames), "physical_level": phys, "physical_rationale": "ok",
            "visual_level": vis, "visual_rationale": "ok"}


CLEAN_AUDIT = {"missing_requirements": [], "invented_conditions": [], "contradictions": []}
NO_FAILURE = {"failure_established": False, "essential_unverifiable": False, "rationale": "ok"}


def tool_call(name: str, args: dict, call_id: str = "c1") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": call_id, "name": name, "args": args, "type": "tool_call"}])


def full_script(**overrides) -> dict:
    """Replies for every stage of the full preset (success path); override per stage."""
    script = {
        "observe": [OBSERVATION],
        "contract": [CONTRACT],
        "assess": [assessment()],
        "inspect": [tool_call("view_frames", {"frames": [10, 20]}), "The frames confirm R1 and R2."],
        "plan": [{"views": [{"frames": [10, 20]}], "tracks": [], "rationale": "check"}],
        "reflect": [assessment()],
        "audit": [CLEAN_AUDIT],
        "repair": [assessment()],
        "final_check": [NO_FAILURE],
        "direct": [{"reward": 0.8, "rationale": "looks done"}],
    }
    script.update(overrides)
    return script


class FakeSurprise:
    """SurpriseScorer protocol fake: one window over frames 8..23 with surprise 0.4."""

    def __init__(self) -> None:
        self.calls = 0

    def score(self, frames):
        from tools.surprise import SurpriseEvidence, SurpriseWindow

        self.calls += 1
        if len(frames) < 24:  # like a real scorer: no window past the frames it was given
            return SurpriseEvidence(status="not_enough_frames", num_frames=len(frames))
        w = SurpriseWindow(start=8, end=23, frames=list(range(8, 24)), surprise=0.4)
        return SurpriseEvidence(status="ok", windows=[w], top=[w], mean=0.4, num_frames=len(frames))


class FailingTracker:
    """MotionTracker protocol fake that fails like a broken configured backend."""

    def track(self, frames, *, grid_size=None, queries=None):
        from tools.errors import ToolFault

        raise ToolFault("motion", "run", "tracker crashed")


class FailingSurprise:
    """SurpriseScorer fake that fails to run."""

    def score(self, frames):
        from tools.errors import ToolFault

        raise ToolFault("surprise", "run", "V-JEPA 2 out of memory")


def job_priorities_script(store, kind: str) -> tuple[dict, dict[str, list[tuple[bool, str]]]]:
    """(script, seen): a full_script whose observe and assess replies record, in ``seen["observe"]`` and
    ``seen["assess"]``, each shared job of `kind` ("surprise", "extra") in the FrameStore `store` as (done,
    priority it was queued at)."""
    seen: dict[str, list[tuple[bool, str]]] = {}

    def entries() -> list[tuple[bool, str]]:
        return [(job.done(), queued_at) for key, (job, queued_at) in store._jobs.snapshot() if key[0] == kind]

    def observe_reply(_messages, _k):
        seen["observe"] = entries()
        return OBSERVATION

    def assess_reply(_messages, _k):
        seen["assess"] = entries()
        return assessment()

    return full_script(observe=observe_reply, assess=assess_reply), seen


def make_agent(preset: str = "full", script: dict | None = None, *, tracker=None, surprise=None, frame_store=None,
               **cfg):
    """(agent, model): a scripted agent with in-memory checkpoints and fake tools."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import traces_serde
    from tools.motion import LKTracker

    model = ScriptedChatModel(script if script is not None else full_script())
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    tools = AgentTools(tracker=tracker or LKTracker(), surprise=surprise or FakeSurprise())
    agent = build_reward_agent(AgentConfig(preset=preset, **cfg), backbone=backbone, tools=tools,
                               checkpointer=InMemorySaver(serde=traces_serde()), frame_store=frame_store)
    return agent, model


def run(agent, video, instruction: str = "push the red block to the right", run_id: str = "run-test") -> dict:
    return agent.invoke({"video": str(video), "instruction": instruction, "run_id": run_id},
                        {"configurable": {"thread_id": run_id}})


def nodes(out: dict) -> list[str]:
    return [s["node"] for s in out["steps"]]


def grid_followup(frames, queries) -> bool:
    """Whether a tracker call is a grid track's second call (`tools.motion.grid.grid_tracks`: the later
    query frames' points where the first grid left cells uncovered), which tests counting track jobs by
    tracker calls leave out: no query on the first frame, every point a centre of the agent's grid."""
    import numpy as np

    from graph.nodes.tracking import GRID_SIZE
    from tools.motion.base import grid_points

    if queries is None or not len(queries):
        return False
    q = np.asarray(queries, dtype=np.float32)
    if (q[:, 0] == 0).any():
        return False
    centres = grid_points(GRID_SIZE, int(frames.shape[1]), int(frames.shape[2]))
    return bool(np.isclose(q[:, None, 1:3], centres[None]).all(axis=-1).any(axis=1).all())


PARALLEL = {"contract", "observe"}


def canonical(seq: list[str]) -> list[str]:
    """Sort each run of the parallel group: contract and observe run in one superstep and finish (and stream)
    in either order."""
    out, group = [], []
    for n in [*seq, ""]:
        if n in PARALLEL:
            group.append(n)
            continue
        out += sorted(group)
        group = []
        if n:
            out.append(n)
    return out
