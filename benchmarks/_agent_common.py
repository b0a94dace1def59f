"""Shared pieces of the agent benchmarks (not a benchmark itself): synthetic clips, a scripted
backbone that behaves the same for every clip, and a cheap stand-in surprise scorer.

- `write_clips` renders textured clips with a moving block (distinct per seed, so no two clips share a
  stage input that carries their images; stages that send no image of the clip, such as contract, audit
  and the later inspect rounds, have the same input for every clip).
- `agent_script()` replies for every stage of every preset. The inspect stage is a function of the
  conversation (tool calls until tool results are present, then a closing text), so each run does the
  same inspection work no matter how runs interleave, and identical inputs get identical replies.
- `DiffSurprise` implements the SurpriseScorer protocol with mean absolute frame differences over
  16-frame windows. It stands in for V-JEPA 2 (no weights in CI); the benchmarks measure the agent,
  not the world model. It computes the differences with cv2.norm on uint8 frame pairs: an earlier
  float32 numpy version allocated ~80 MB of temporaries per clip and, through page faults, cost
  ~50 ms CPU per run, a third of what the benchmarks attributed to the agent (values agree to 1e-9).
- `stub_server()` serves `agent_script()` from the OpenAI-compatible stub of `tests/openai_stub.py`
  in a subprocess (its CPU is not the measured process's), for benchmarks of the real `ChatOpenAI` path.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python benchmarks/x.py` puts benchmarks/ first on sys.path, not the repo
    sys.path.insert(0, str(ROOT))

INSTRUCTION = "push the red block to the right"
OBSERVATION = {"scene": "a red block on a table", "events": [{"start_frame": 0, "end_frame": 32,
               "description": "a red block slides to the right"}], "objects": ["red block"],
               "visual_issues": [], "summary": "A red block moves right."}
CONTRACT = {"requirements": [
    {"id": "R1", "kind": "object", "text": "the red block is involved", "essential": True},
    {"id": "R2", "kind": "outcome", "text": "the red block ends on the right", "essential": True},
    {"id": "R3", "kind": "action", "text": "the push is smooth", "essential": False}]}
ASSESSMENT = {"judgments": [{"requirement_id": rid, "status": st, "evidence_frames": [0, 16, 32],
                             "rationale": "seen", "confidence": 0.9}
                            for rid, st in (("R1", "met"), ("R2", "met"), ("R3", "partial"))],
              "physical_level": 5, "physical_rationale": "ok", "visual_level": 4, "visual_rationale": "ok"}
CLEAN_AUDIT = {"missing_requirements": [], "invented_conditions": [], "contradictions": []}
NO_FAILURE = {"failure_established": False, "essential_unverifiable": False, "rationale": "ok"}


def _tool_calls(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": f"c{i}", "name": n, "args": a, "type": "tool_call"}
                                             for i, (n, a) in enumerate(calls)])


def _text(message: BaseMessage) -> str:
    """The text parts of a message. `str(message.content)` would also copy every image's base64 data URL:
    ~5% of the event loop's CPU in agent_concurrency.py went to this stand-in reading its own input."""
    if isinstance(message.content, str):
        return message.content
    return " ".join(b.get("text", "") for b in message.content if isinstance(b, dict))


def inspect_reply(messages: list[BaseMessage], _k: int) -> AIMessage | str:
    """Round 1: view two frames and a crop; round 2 (motion tool offered): track; then close."""
    rounds = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    offered_motion = any("track_motion" in _text(m) for m in messages[:2])
    if not any(isinstance(m, ToolMessage) for m in messages) and rounds == 0:
        return _tool_calls(("view_frames", {"frames": [10, 20]}),
                           ("view_crop", {"frame": 20, "box": [0.25, 0.25, 0.75, 0.75]}))
    if rounds == 1 and offered_motion:
        return _tool_calls(("track_motion", {"start_frame": 0, "end_frame": 32, "points": []}))
    return "The extra views confirm R1 and R2."


def agent_script() -> dict[str, Any]:
    """Replies for every stage (success path)."""
    return {
        "observe": [OBSERVATION], "contract": [CONTRACT], "assess": [ASSESSMENT], "inspect": inspect_reply,
        "plan": [{"views": [{"frames": [10, 20]}], "tracks": [], "rationale": "check"}],
        "reflect": [ASSESSMENT], "audit": [CLEAN_AUDIT], "repair": [ASSESSMENT], "final_check": [NO_FAILURE],
        "direct": [{"reward": 0.8, "rationale": "looks done"}],
    }


def write_clips(folder: Path, n: int, *, frames: int = 33, size: int = 256, width: int | None = None) -> list[str]:
    """`n` distinct clips (textured background, red block moving right), `size` high and `width` (default
    `size`) wide."""
    from tools.video import write_video

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    h, w = size, width or size
    for i in range(n):
        rng = np.random.default_rng(i)
        # per-pixel noise over a left-to-right ramp: pure noise is a uniform clip to the quality pre-check
        # (no structure) at small sizes, and the ramp gives even 32x32 clips some
        ramp = np.linspace(0, 100, w, dtype=np.float32)[None, :, None]
        bg = (rng.integers(30, 110, (h, w, 3)) + ramp).astype(np.uint8)
        clip = np.empty((frames, h, w, 3), np.uint8)
        for t in range(frames):
            f = bg.copy()
            x = w // 16 + int((w // 2) * t / max(frames - 1, 1))
            f[h * 3 // 8:h * 5 // 8, x:x + w // 5] = (220, 40, 40)
            clip[t] = f
        paths.append(str(write_video(folder / f"clip{i:02d}.mp4", clip, fps=16.0)))
    return paths


class DiffSurprise:
    """Stand-in SurpriseScorer: mean absolute frame difference per 16-frame window (stride 8)."""

    def score(self, frames: np.ndarray) -> Any:
        from tools.surprise import SurpriseEvidence, SurpriseWindow

        n = len(frames)
        if n < 16:
            return SurpriseEvidence(status="not_enough_frames", windows=[], top=[], mean=None, num_frames=n)
        # per pair of frames: L1 norm of the uint8 difference (cv2, no float copies of the clip)
        diffs = np.array([cv2.norm(frames[t], frames[t + 1], cv2.NORM_L1)
                          for t in range(n - 1)]) / (frames[0].size * 255.0)
        windows = [SurpriseWindow(start=s, end=s + 15, frames=list(range(s, s + 16)),
                                  surprise=float(diffs[s:s + 15].mean()))
                   for s in range(0, n - 15, 8)]  # stride 8
        top = sorted(windows, key=lambda w: w.surprise, reverse=True)[:2]
        return SurpriseEvidence(status="ok", windows=windows, top=top,
                                mean=float(np.mean([w.surprise for w in windows])), num_frames=n, stride=8)


def sequential_calls(stages: list[str]) -> int:
    """Backbone calls on one run's critical path: observe and contract run in parallel, so when both
    called the model they count once; every other call is sequential."""
    return len(stages) - (1 if "observe" in stages and "contract" in stages else 0)


@contextlib.contextmanager
def stub_server() -> Iterator[str]:
    """Base URL of an OpenAI-compatible stub answering like `ScriptedChatModel(agent_script())`, served
    from a subprocess until the block ends."""
    server = subprocess.Popen([sys.executable, "-P", __file__, "--serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"stub server did not start: {base_url!r}")
        yield base_url
    finally:
        server.stdin.close()
        server.wait(timeout=30)


def _serve() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from openai_stub import OpenAIStub, script_responder

    with OpenAIStub(responder=script_responder(agent_script()), keep_alive=True) as stub:  # as vLLM answers
        print(stub.base_url, flush=True)
        sys.stdin.read()  # until the parent closes the pipe


if __name__ == "__main__" and "--serve" in sys.argv:  # stub_server()'s subprocess
    _serve()
