"""Per-clip overhead of the reward agent beyond the unavoidable frame work.

Preset full with a zero-latency scripted backbone, the LK motion tool, a stand-in surprise scorer and an
on-disk SqliteSaver (default trace durability: one checkpoint when the run ends); each clip runs on a
fresh agent (cold frame cache), one after another.

Prints `overhead_over_frame_work`: mean per-clip wall time over the time to decode the distinct frames
the run touched (union of its steps' frame indices) and JPEG-encode as many images as the run sent
distinct data URLs, each of the sent image's size (full frames at the agent's long side and quality; a
crop at its size, as a region of such a frame). Target <= 2.0.
Everything else (LangGraph, pydantic, prompts, stage keys, checkpoints, LK tracking, surprise) is overhead.

Diagnostics:
- `tracks_free_over_frame_work`: the same runs when the motion tracks cost nothing (the tracker
  replays tracks it computed in an untimed earlier run of the clip), interleaved with the measured
  runs. It bounds what any faster or offloaded tracker (another thread, a process, the tool service)
  could give: 2.3-3.2 on the 2-core VM, so the rest of the run alone is above the target.
- `cpu_per_clip_s` (process CPU time of the run, all threads) and
  `cpu_floor_over_frame_work` = cpu_per_clip_s / cores / frame_work_s: the ratio no scheduling could
  beat on this machine (every core busy for the whole run). When it is above the target, the target
  needs less CPU per run, not more overlap. The floor is optimistic: the event loop's Python (~20-30 ms
  a run: LangGraph, langchain, the nodes) and the Python parts of worker jobs share one GIL, so work
  started in the background while the loop is busy runs slower (the speculative LK track took 35-57
  ms instead of ~14 ms when started right after decoding), and the decode every later step waits for
  cannot overlap with loop work at all.
- `loop_thread_cpu_per_clip_s` / `loop_thread_cpu_over_frame_work`: CPU time of the thread that runs
  the event loop (LangGraph, langchain, pydantic, prompts, stage keys, checkpoints and the nodes'
  own Python; decoding, encoding and tools run in worker threads and are not in it). That work is
  serial: one thread, one step after another, and most steps wait for it. Least of the repeats.

- `rollout_<H>x<W>x<T>_*`: the same figures on clips shaped like the videos the trainer scores (3 clips
  each): Wan 2.1 I2V 480p rollouts (480x832, 81 frames) and Cosmos-Predict2 720p (704x1280, 93 frames).
  The headline clips (256x256, 33 frames) make the frame work small (~16-20 ms), so the per-run Python of
  LangGraph and the nodes (~20-30 ms of event-loop CPU, independent of the clip) dominates the ratio; at 480p
  the frame work is ~6x larger and the ratio measures the agent on the inputs it is used on. At 720p the
  tools' own decoding dominates instead: the surprise scorer decodes every frame again at 448 pixels (a
  second pass over the clip, swscale AREA scaling) and the 576-pixel track bound keeps 67% of the pixels,
  so LK runs at full size; `tracks_free` there shows that the tracker is not the main cost.
  `rollout_*_per_clip_wall_s` and `rollout_*_cpu_per_clip_s` are the absolute figures behind the ratio:
  a faster decoder lowers them and the frame work alike, so the ratio alone can rise while every run got
  faster (slice threads for multi-slice H.264, `tools.video_slices`: 720p wall per clip ~1.17 s ->
  ~0.96 s, ratio 3.7 -> 4.3).

Measurement: each clip is run `REPEATS` times, each time on a fresh agent (cold frame cache, new run id),
and its frame work is timed `REPEATS` times; per clip the minimum of each is taken (both sides measured
the same way: the least-disturbed repeat), then averaged over clips. What is counted is unchanged; the
minimum only removes scheduler noise of a single timing on a shared machine.
"""

from __future__ import annotations

import asyncio
import os
import sys  # noqa: E402
import tempfile
import time
from pathlib import Path

# Run with `python -P` (see README): benchmarks/ goes last so benchmarks/tools.py never shadows `tools`.
sys.path.append(str(Path(__file__).resolve().parent))
from _agent_common import INSTRUCTION, DiffSurprise, agent_script, write_clips  # noqa: E402

N_CLIPS = 6
N_SHAPED = 3
ROLLOUT_SHAPES = ((81, 480, 832), (93, 704, 1280))
"""(frames, height, width) of the rollout-shaped diagnostics: Wan 2.1 I2V at 480p (81 frames, 480x832, the
trainer's backend) and Cosmos-Predict2 video2world at 720p (93 frames, 704x1280)."""
REPEATS = 3
LONG_SIDE, QUALITY = 512, 85


class ReplayTracker:
    """MotionTracker that computes each distinct request once with LK and replays it afterwards."""

    def __init__(self) -> None:
        from tools.motion import LKTracker

        self.lk = LKTracker()
        self.memo: dict[tuple, object] = {}

    def track(self, frames, *, grid_size=None, queries=None):  # noqa: ANN001, ANN201 (protocol)
        key = (frames.shape, frames[:, ::16, ::16].tobytes(), grid_size,
               None if queries is None else queries.tobytes())
        if key not in self.memo:
            self.memo[key] = self.lk.track(frames, grid_size=grid_size, queries=queries)
        return self.memo[key]


def _run_clip(clip: str, db: Path, run_id: str, tracker: object = None) -> tuple[float, object, tuple]:
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.api import arun_agent
    from graph.backbone import Backbone
    from graph.builder import default_checkpointer
    from graph.cache import StageCache
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    model = ScriptedChatModel(agent_script())
    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(model, cache=StageCache(None), retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=tracker or LKTracker(), surprise=DiffSurprise()),
                               checkpointer=default_checkpointer(db),
                               frame_store=FrameStore(long_side=LONG_SIDE, quality=QUALITY))
    t0, c0, l0 = time.perf_counter(), time.process_time(), time.thread_time()
    result = asyncio.run(arun_agent(agent, clip, INSTRUCTION, run_id, "full"))
    wall, cpu, loop = time.perf_counter() - t0, time.process_time() - c0, time.thread_time() - l0
    state = agent.get_state({"configurable": {"thread_id": run_id}}).values
    return wall, result, (model, state, cpu, loop)


def _image_size(url: str) -> tuple[int, int]:
    """(height, width) of a JPEG data URL the run sent."""
    import base64

    import cv2
    import numpy as np

    data = np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8)
    return cv2.imdecode(data, cv2.IMREAD_UNCHANGED).shape[:2]


def _frame_work(clip: str, indices: list[int], sizes: list[tuple[int, int]]) -> float:
    """Decode ``indices`` and JPEG-encode one image per sent image, each with the sent image's pixel count
    (a crop is encoded at its size, as a region of a resized frame, not as a whole frame)."""
    import cv2

    from tools.video import encode_jpeg_data_url, read_frames, resize_long_side

    t0 = time.perf_counter()
    frames = read_frames(clip, indices)
    for k, (h, w) in enumerate(sizes):
        frame = resize_long_side(frames[k % len(frames)], LONG_SIDE)
        if (h, w) != frame.shape[:2]:  # a crop, resized as the agent resizes crops when it is larger
            frame = frame[:h, :w] if h <= frame.shape[0] and w <= frame.shape[1] else cv2.resize(frame, (w, h))
        encode_jpeg_data_url(frame, quality=QUALITY)
    return time.perf_counter() - t0


def _measure(clips: list[str]) -> dict[str, float]:
    """The figures of the module docstring for `clips` (means over clips of per-clip minima); traces go next
    to the clips."""
    tmp = Path(clips[0]).parent
    walls, works, images, touched, cpus, loops, free_walls = [], [], [], [], [], [], []
    replay = ReplayTracker()
    _run_clip(clips[0], tmp / "warm.sqlite", "warm")  # warm imports / first-call costs
    for clip in clips:
        _run_clip(clip, tmp / "warm.sqlite", f"warm-{Path(clip).stem}", replay)  # records the tracks
        runs, free = [], []
        for r in range(REPEATS):  # interleaved: a slow period of the host hits both kinds
            runs.append(_run_clip(clip, tmp / "traces.sqlite", f"run-{Path(clip).stem}-{r}"))
            free.append(_run_clip(clip, tmp / "traces.sqlite", f"free-{Path(clip).stem}-{r}", replay)[0])
        free_walls.append(min(free))
        assert all(r[1].status == "scored" for r in runs), [r[1].reasons for r in runs]
        wall, _, (model, state, cpu, _) = min(runs, key=lambda r: r[0])
        loops.append(min(r[2][3] for r in runs))
        indices = sorted({int(f) for s in state["steps"] for f in s.get("frames") or []})
        urls = {b["image_url"]["url"] for c in model.calls for m in c.messages if isinstance(m.content, list)
                for b in m.content if isinstance(b, dict) and b.get("type") == "image_url"}
        walls.append(wall)
        cpus.append(cpu)
        sizes = [_image_size(u) for u in sorted(urls)]
        works.append(min(_frame_work(clip, indices, sizes) for _ in range(REPEATS)))
        images.append(len(urls))
        touched.append(len(indices))

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    return {"frames_touched": mean(touched), "images_sent": mean(images), "wall": mean(walls),
            "work": mean(works), "cpu": mean(cpus), "loop": mean(loops), "free": mean(free_walls)}


def main() -> None:
    from graph.workers import usable_cores

    with tempfile.TemporaryDirectory() as tmp:
        m = _measure(write_clips(Path(tmp) / "small", N_CLIPS))
        shaped = {}
        for frames, height, width in ROLLOUT_SHAPES:
            folder = Path(tmp) / f"{height}x{width}x{frames}"
            shaped[folder.name] = _measure(write_clips(folder, N_SHAPED, frames=frames, size=height, width=width))
    wall, work, cpu, cores = m["wall"], m["work"], m["cpu"], usable_cores()
    print(f"frames_touched_per_clip: {m['frames_touched']:.1f}")
    print(f"images_sent_per_clip: {m['images_sent']:.1f}")
    print(f"per_clip_wall_s: {wall:.3f}")
    print(f"frame_work_s: {work:.3f}")
    print(f"cpu_per_clip_s: {cpu:.3f}")
    print(f"cpu_count: {cores}")
    print(f"cpu_floor_over_frame_work: {cpu / cores / work:.3f}")
    print(f"loop_thread_cpu_per_clip_s: {m['loop']:.3f}")
    print(f"loop_thread_cpu_over_frame_work: {m['loop'] / work:.3f}")
    print(f"tracks_free_over_frame_work: {m['free'] / work:.3f}")
    for name, r in shaped.items():
        print(f"rollout_{name}_frame_work_s: {r['work']:.3f}")
        print(f"rollout_{name}_per_clip_wall_s: {r['wall']:.3f}")
        print(f"rollout_{name}_cpu_per_clip_s: {r['cpu']:.3f}")
        print(f"rollout_{name}_tracks_free_over_frame_work: {r['free'] / r['work']:.3f}")
        print(f"rollout_{name}_cpu_floor_over_frame_work: {r['cpu'] / cores / r['work']:.3f}")
        print(f"rollout_{name}_overhead_over_frame_work: {r['wall'] / r['work']:.3f}")
    print(f"loadavg_1m: {os.getloadavg()[0]:.2f}")
    print(f"overhead_over_frame_work: {wall / work:.3f}")


if __name__ == "__main__":
    main()
