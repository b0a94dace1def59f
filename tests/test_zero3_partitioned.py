"""ZeRO-3 with its parameters really partitioned, end to end on 2 CPU ranks (torchrun, gloo, DeepSpeed).

The smoke model's tensors are all below DeepSpeed's default ``stage3_param_persistence_threshold`` (1e5
elements), so ``--zero_stage 3`` over ds_zero2.json keeps every parameter whole on every rank: no forward
gathers anything and a rank that ran a forward the other did not went unnoticed. The bundled
ds_zero3.json sets the threshold to 0: every parameter is split over the ranks (the checkpoints' module
tensors are empty, checked), every forward of the transformer gathers it from both ranks, the
gradients are reduce-scattered. What is checked, full fine-tune and LoRA (both with beta > 0, so the
reference pass runs: the frozen copy, or the adapters disabled), two optimizer steps per iteration:

* two iterations with rollouts, updates, a checkpoint each, held-out evaluation with a padded rank (3
  prompts, 2 ranks), and the final export;
* the same run under ZeRO-2 logs the same metrics (float32: equal up to reduction order) and exports the
  same weights; the export equals DeepSpeed's consolidation of the partitioned checkpoint;
* resumed from the iteration-1 checkpoint, the run logs what the uninterrupted run logged and ends with the
  same optimizer state on each rank;
* converted to the universal form (training/reshard.py), the checkpoint resumes on one process with the
  2-rank run's weights (its held-out evaluation, and its master weights).

Each launch has a deadline: ranks out of step wait in a collective forever, which ends the test.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

from tests.launches import run_to_end, torchrun

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"
HELD_OUT = ("[{text: 'push the red block to the left', image_seed: 11}, {text: 'open the drawer', image_seed: 12}, "
            "{text: 'stack the blocks', image_seed: 13}]")  # 3 prompts over 2 ranks: one rank pads
COMMON = ("--max_iterations", "2", "--checkpoint_every", "1", "--eval_every", "2", "--eval_dataset", HELD_OUT,
          "--optimizer_steps_per_epoch", "2")  # the second step of an iteration is off-policy: KLs not 0
LORA = ("--finetune", "lora", "--lora_rank", "4", "--beta", "0.1")
DEADLINE_S = 240  # a run here takes 25-45 s; ranks out of step never finish

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def _train(out: Path, *extra: str) -> None:
    """A 2-rank training launch into ``out``; fails the test when it fails or hangs past DEADLINE_S (the
    whole process group is killed: torchrun and both ranks)."""
    cmd = [*torchrun(), "-m", "training.train",
           "--config", str(SMOKE), "--output_dir", str(out), "--progress", "false", "--tensorboard", "false", *extra]
    run_to_end(cmd, timeout=DEADLINE_S, what="training (2 ranks)")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


def _assert_rows_close(a: list[dict], b: list[dict], rel: float) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b, strict=True):
        assert set(ra) == set(rb)
        for key, value in ra.items():
            if key.startswith("seconds"):
                continue
            if isinstance(value, float) and math.isfinite(value):
                assert rb[key] == pytest.approx(value, rel=rel, abs=1e-9), f"iteration {ra['iteration']}: {key}"
            else:
                assert rb[key] == value, f"iteration {ra['iteration']}: {key}"


def _assert_partitioned(folder: Path) -> None:
    """Every rank's ZeRO-3 model-states file holds empty module tensors: the parameters were split."""
    for rank in (0, 1):
        module = _load(folder / f"zero_pp_rank_{rank}_mp_rank_00_model_states.pt")["module"]
        trained = {k: v for k, v in module.items() if k.startswith("world_model.transformer.")}
        assert trained and all(v.numel() == 0 for v in trained.values()), \
            f"rank {rank}: parameters kept whole: {[k for k, v in trained.items() if v.numel()][:5]}"


def _trained_weights(run: Path) -> dict[str, torch.Tensor]:
    sys.path.insert(0, str(ROOT))
    from training.export import load_policy

    return load_policy(run / "final")[0].transformer.state_dict()


@pytest.fixture(scope="module", params=["full", "lora"])
def zero3_run(request, tmp_path_factory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp(f"z3-{request.param}") / "run"
    _train(out, "--ds_config", "ds_zero3.json", *COMMON, *(LORA if request.param == "lora" else ()))
    return request.param, out


def test_partitioned_zero3_matches_zero2_and_exports_its_checkpoint(zero3_run, tmp_path):
    mode, z3 = zero3_run
    _assert_partitioned(z3 / "checkpoints" / "iter_000002")
    rows = _rows(z3 / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [1, 2] and all(r["update_skipped"] == 0 for r in rows)
    assert rows[0]["approx_kl"] > 0 and rows[-1]["mu_kl"] > 0  # the reference pass ran and saw a moved policy
    assert [r["iteration"] for r in _rows(z3 / "eval.jsonl")] == [0, 2]
    z2 = tmp_path / "z2"
    _train(z2, "--ds_config", "ds_zero2.json", *COMMON, *(LORA if mode == "lora" else ()))
    _assert_rows_close(rows, _rows(z2 / "metrics.jsonl"), rel=1e-4)
    _assert_rows_close(_rows(z3 / "eval.jsonl"), _rows(z2 / "eval.jsonl"), rel=1e-6)

    from training.export import consolidate

    merged = consolidate(z3 / "checkpoints", "iter_000002")
    assert merged and all(v.numel() > 0 for v in merged.values())
    assert any("lora_" in k for k in merged) == (mode == "lora")
    other = consolidate(z2 / "checkpoints", "iter_000002")
    assert set(merged) == set(other)
    for name, value in merged.items():
        torch.testing.assert_close(value, other[name], rtol=1e-4, atol=1e-5, msg=name)
    state, state2 = _trained_weights(z3), _trained_weights(z2)
    if mode == "full":  # the export is the consolidated checkpoint
        assert set(merged) == set(state) and all(torch.equal(state[k], v) for k, v in merged.items())
    for name, value in state.items():
        torch.testing.assert_close(value, state2[name], rtol=1e-4, atol=1e-5, msg=name)


def test_partitioned_zero3_resumes_as_it_ran(zero3_run, tmp_path):
    mode, z3 = zero3_run
    resumed = tmp_path / "resumed"
    shutil.copytree(z3, resumed, ignore=shutil.ignore_patterns("iter_000002", "final"))
    (resumed / "checkpoints" / "latest").write_text("iter_000001")
    _train(resumed, "--ds_config", "ds_zero3.json", *COMMON, *(LORA if mode == "lora" else ()), "--resume")
    _assert_partitioned(resumed / "checkpoints" / "iter_000002")
    assert _rows(resumed / "metrics.jsonl") == [{**r, **{k: r2[k] for k in r2 if k.startswith("seconds")}}
                                                for r, r2 in zip(_rows(z3 / "metrics.jsonl"),
                                                                 _rows(resumed / "metrics.jsonl"), strict=True)]
    for rank in (0, 1):
        name = f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"
        a = _load(z3 / "checkpoints" / "iter_000002" / name)["optimizer_state_dict"]
        b = _load(resumed / "checkpoints" / "iter_000002" / name)["optimizer_state_dict"]
        assert len(a["fp32_flat_groups"]) == len(b["fp32_flat_groups"])
        for x, y in zip(a["fp32_flat_groups"], b["fp32_flat_groups"], strict=True):
            assert x.numel() > 0 and torch.equal(x, y), f"rank {rank}: master weights differ"
    weights = _trained_weights(resumed)
    for name, value in _trained_weights(z3).items():
        assert torch.equal(weights[name], value), name


def _one_process(*argv: str) -> None:
    """``python -m ...`` without torchrun's variables (one process); fails the test past DEADLINE_S."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    run_to_end([sys.executable, "-m", *argv], timeout=DEADLINE_S, what=argv[0], env=env)


def test_partitioned_zero3_continues_on_one_process_after_reshard(zero3_run, tmp_path):
    """The 2-rank partitioned checkpoint, converted to the universal form, resumes on one process: its held-out
    evaluation at the checkpoint (owed: the row is removed) is the 2-rank run's, so the engine's own partitioned
    parameters were loaded, not only the optimizer's master weights; an iteration at learning rate 1e-30 (below
    float32 resolution) then leaves the master weights exactly as they were."""
    mode, z3 = zero3_run
    run = tmp_path / "run"
    shutil.copytree(z3, run, ignore=shutil.ignore_patterns("final"))
    for name in ("eval.jsonl", "eval_rewards.jsonl"):
        path = run / name
        path.write_text("".join(line + "\n" for line in path.read_text().splitlines()
                                if json.loads(line)["iteration"] != 2))
    _one_process("training.reshard", "--run", str(run))
    _one_process("training.train", "--config", str(SMOKE), "--output_dir", str(run), "--progress", "false",
                 "--tensorboard", "false", "--ds_config", "ds_zero3.json", *COMMON, *(LORA if mode == "lora" else ()),
                 "--max_iterations", "3", "--resume", "--learning_rate", "1e-30", "--export", "none")  # the last wins
    [before] = [r for r in _rows(z3 / "eval.jsonl") if r["iteration"] == 2]
    [after] = [r for r in _rows(run / "eval.jsonl") if r["iteration"] == 2]
    _assert_rows_close([before], [after], rel=1e-6)
    assert [r["iteration"] for r in _rows(run / "metrics.jsonl")] == [1, 2, 3]
    from training.export import consolidate

    merged, later = consolidate(run / "checkpoints", "iter_000002"), consolidate(run / "checkpoints", "iter_000003")
    assert set(merged) == set(later)
    for name, value in merged.items():
        assert torch.equal(later[name], value), name
