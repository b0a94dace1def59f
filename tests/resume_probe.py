"""Run by tests/test_resume.py under `torchrun --nproc_per_node 2` (gloo, CPU): each rank resumes a run folder of
its own, standing in for one `latest` read at two moments (another process moved it in between) or on two
nodes. Each rank writes what `training.resume.plan_resume` answered it to OUT/rank<R>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from training.config import ConfigError, PromptSpec, TrainConfig
from training.resume import StateLayout, plan_resume


def main(base: Path, out: Path) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    answers = []
    for case in sys.argv[3].split(",") if len(sys.argv) > 3 else ("moved", "missing"):
        cfg = TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")], zero_stage=2, resume=True,
                          output_dir=str(base / case / f"view{rank}"))
        try:
            source, _ = plan_resume(cfg, dist.get_world_size(), StateLayout(2, "float32"))
            answers.append({"tag": source.tag})
        except ConfigError as exc:
            answers.append({"error": str(exc)})
    (out / f"rank{rank}.json").write_text(json.dumps(answers))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
