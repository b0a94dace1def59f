"""keep_checkpoints (training.engine.stale_checkpoints / prune), resume refusals, reshard, resumed runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.launches import destroy_process_group, launch, run_to_end
from training.config import ConfigError
from training.config_io import config_to_dict, load_config
from training.engine import prune, stale_checkpoints
from training.reshard import ReshardError, reshard
from training.resume import StateLayout, write_layout

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"


def test_stale_checkpoints_keeps_the_newest_and_latest():
    tags = ["iter_000010", "iter_000002", "iter_000001", "notes", "iter_abc", "iter_000003"]
    assert stale_checkpoints(tags, "iter_000010", 2) == ["iter_000001", "iter_000002"]  # numeric order
    assert stale_checkpoints(tags, "iter_000010", 4) == []
    assert stale_checkpoints(tags, "iter_000002", 1) == ["iter_000001", "iter_000003"]  # latest stays
    assert stale_checkpoints(tags, None, 1) == ["iter_000001", "iter_000002", "iter_000003"]
    with pytest.raises(ValueError, match="keep must be >= 1"):
        stale_checkpoints(tags, None, 0)


def test_prune_deletes_only_stale_checkpoint_folders(tmp_path):
    for tag in ("iter_000001", "iter_000001_universal", "iter_000002", "iter_000003", "other"):
        (tmp_path / tag).mkdir()
        (tmp_path / tag / "mp_rank_00_model_states.pt").write_bytes(b"x")
    (tmp_path / "latest").write_text("iter_000003")
    assert prune(tmp_path, 2, local_rank=1) == []  # not this node's deleting process
    assert prune(tmp_path, 2, local_rank=0) == ["iter_000001"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_000002", "iter_000003", "latest", "other"]
    assert prune(tmp_path / "missing", 2, local_rank=0) == []


def test_keep_checkpoints_is_validated():
    with pytest.raises(ConfigError, match="keep_checkpoints must be >= 1"):
        load_config(SMOKE, ["--keep_checkpoints", "0"])


def _fake_checkpoint(ckpt: Path, tag: str, ranks: int, prefix: str = "") -> None:
    (ckpt / tag).mkdir(parents=True)
    (ckpt / tag / "mp_rank_00_model_states.pt").write_bytes(b"x")
    for r in range(ranks):
        (ckpt / tag / f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"x")
    (ckpt / "latest").write_text(tag)


def test_reshard_refuses_what_is_not_a_zero_checkpoint(tmp_path):
    with pytest.raises(ReshardError, match="no checkpoint in"):
        reshard(tmp_path / "checkpoints")
    (tmp_path / "checkpoints" / "iter_000001").mkdir(parents=True)
    with pytest.raises(ReshardError, match="is not a ZeRO checkpoint"):
        reshard(tmp_path / "checkpoints", "iter_000001")
    done = tmp_path / "checkpoints" / "iter_000002"
    _fake_checkpoint(tmp_path / "checkpoints", "iter_000002", ranks=2)
    (tmp_path / "checkpoints" / "iter_000002_universal" / "zero").mkdir(parents=True)
    assert reshard(tmp_path / "checkpoints") == done.with_name("iter_000002_universal")  # kept, not redone
    with pytest.raises(ReshardError, match="ds_to_universal failed"):  # fake shards: DeepSpeed refuses them
        reshard(tmp_path / "checkpoints", force=True)
    assert not (tmp_path / "checkpoints" / "iter_000002_universal.partial").exists()


# Each case is a `python -m training.train` launch (~5 s). The default run keeps "other model" (the launch path of a
# refusal: exit 2, the reason, no traceback, the run's config.yaml untouched); the other reasons run in `make
# test-slow`, and each is checked in-process by default: test_train_config.py's --check test ("no checkpoint in",
# the ZeRO stage), tests/test_resume.py (the world size).
@pytest.mark.parametrize("case", [pytest.param("no checkpoint", marks=pytest.mark.slow),
                                  pytest.param("other world size", marks=pytest.mark.slow), "other model",
                                  pytest.param("other zero stage", marks=pytest.mark.slow)])
def test_a_resume_that_cannot_load_stops_before_the_model_loads(tmp_path, case):
    """Exit 2 with the reason, instead of DeepSpeed's traceback after the model has loaded."""
    out = tmp_path / "run"
    extra = []
    if case == "other world size":
        _fake_checkpoint(out / "checkpoints", "iter_000002", ranks=2)
    if case == "other model":
        _fake_checkpoint(out / "checkpoints", "iter_000002", ranks=1)
        saved = load_config(SMOKE, ["--finetune", "lora", "--lora_rank", "4"])
        (out / "config.yaml").write_text(yaml.safe_dump(config_to_dict(saved), sort_keys=False))
        extra = ["--finetune", "lora", "--lora_rank", "8"]
    if case == "other zero stage":
        _fake_checkpoint(out / "checkpoints", "iter_000002", ranks=1)
        write_layout(out / "checkpoints" / "iter_000002", StateLayout(2, "float32"))
        extra = ["--zero_stage", "3"]
    cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out),
           "--progress", "false", "--tensorboard", "false", "--resume", *extra]
    before = (out / "config.yaml").read_text() if (out / "config.yaml").exists() else None
    proc = launch(cmd, timeout=300, what="the resume")
    assert proc.returncode == 2, proc.stderr[-4000:]
    want = {"no checkpoint": "no checkpoint in", "other world size": "written by 2 ranks and this launch has 1",
            "other model": "lora_rank: 4 -> 8", "other zero stage": "under ZeRO stage 2 and this launch runs stage 3"}[case]
    assert "error: --resume: " in proc.stderr and want in proc.stderr, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    after = (out / "config.yaml").read_text() if (out / "config.yaml").exists() else None
    assert after == before  # nothing of the run was touched


def test_a_refused_resume_releases_its_process_group(tmp_path):
    """The refusal comes after the process group is up; exiting with it still up aborted the process now and
    then (exit -6 in CI instead of 2), so main destroys it before returning the exit code."""
    import torch.distributed as dist

    from training.train import main

    out = tmp_path / "run"
    _fake_checkpoint(out / "checkpoints", "iter_000002", ranks=1)
    write_layout(out / "checkpoints" / "iter_000002", StateLayout(2, "float32"))
    keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE")
    saved = {k: os.environ.pop(k) for k in keys if k in os.environ}
    try:
        code = main(["--config", str(SMOKE), "--output_dir", str(out), "--progress", "false", "--tensorboard",
                     "false", "--resume", "--zero_stage", "3"])
        assert code == 2
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            destroy_process_group()
        for k in keys:
            os.environ.pop(k, None)
        os.environ.update(saved)


@pytest.mark.slow
def test_a_run_keeps_its_newest_checkpoints_and_resumes(tmp_path):
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}

    def train(iterations: int, *extra: str) -> None:
        cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out),
               "--progress", "false", "--tensorboard", "false", "--export", "none", "--checkpoint_every", "1",
               "--keep_checkpoints", "2", "--max_iterations", str(iterations), *extra]
        run_to_end(cmd, timeout=600, what="training", env=env)

    train(3)
    ckpt = out / "checkpoints"
    assert sorted(p.name for p in ckpt.iterdir() if p.is_dir()) == ["iter_000002", "iter_000003"]
    assert (ckpt / "latest").read_text().strip() == "iter_000003"
    train(4, "--resume")
    assert sorted(p.name for p in ckpt.iterdir() if p.is_dir()) == ["iter_000003", "iter_000004"]


@pytest.mark.slow
def test_a_diverged_run_stops_before_saving_its_weights(tmp_path):
    """learning_rate 1e30: the first step blows the weights up, the second iteration's rollouts have NaN / inf
    latents. The run stops there (exit 1) naming the last good checkpoint and never saves the diverged weights;
    with nonfinite_loss: skip it goes on (those rollouts ineligible, never scored: no update)."""
    import json

    def train(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out),
               "--progress", "false", "--tensorboard", "false", "--export", "none", "--checkpoint_every", "1",
               "--max_iterations", "4", "--learning_rate", "1e30", *extra]
        return launch(cmd, timeout=600, what="training")

    proc = train(tmp_path / "stop")
    assert proc.returncode == 1, proc.stderr[-3000:]
    ckpt = tmp_path / "stop" / "checkpoints"
    # the blown-up weights' rollouts have NaN / inf latents: never scored (no loss at all), they say it
    assert "error: iteration 2: the latents of 8 rollout(s) were NaN or inf" in proc.stderr
    assert f"Last checkpoint: {ckpt / 'iter_000001'}" in proc.stderr
    assert sorted(p.name for p in ckpt.iterdir() if p.is_dir()) == ["iter_000001"]
    rows = [json.loads(line) for line in (tmp_path / "stop" / "metrics.jsonl").read_text().splitlines()]
    assert [r["ineligible_nan"] + r["ineligible_inf"] for r in rows] == [0, 8]
    proc = train(tmp_path / "skip", "--nonfinite_loss", "skip")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "skip" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["ineligible_nan"] + r["ineligible_inf"] == 8 and r["update_skipped"]
                                  for r in rows[1:])


@pytest.mark.slow
@pytest.mark.distributed
def test_a_two_rank_run_continues_on_one_process_after_reshard(tmp_path):
    """2 ranks write iter_000002; `python -m training.reshard` converts it; one process resumes it. With
    learning_rate 1e-30 (below float32 resolution) the resumed iteration cannot move the weights, so its
    checkpoint must hold exactly
    the 2-rank run's weights: the universal checkpoint was loaded, not a fresh model."""
    import torch
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    from tests.launches import torchrun

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    common = ["-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress", "false",
              "--tensorboard", "false", "--export", "none", "--checkpoint_every", "1"]
    run_to_end([*torchrun(), *common, "--max_iterations", "2"], timeout=600, what="training (2 ranks)", env=env)
    run_to_end([sys.executable, "-m", "training.reshard", "--run", str(out)], timeout=600, what="reshard", env=env)
    assert (out / "checkpoints" / "iter_000002_universal" / "zero").is_dir()
    run_to_end([sys.executable, *common, "--max_iterations", "3", "--resume", "--learning_rate", "1e-30"],
               timeout=600, what="the 1-process resume", env=env)
    rows = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["iteration"] for r in rows] == [1, 2, 3]
    before = get_fp32_state_dict_from_zero_checkpoint(str(out / "checkpoints"), tag="iter_000002")
    after = get_fp32_state_dict_from_zero_checkpoint(str(out / "checkpoints"), tag="iter_000003")
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert len(list((out / "checkpoints" / "iter_000003").glob("*optim_states.pt"))) == 1  # now a 1-rank run


@pytest.mark.slow
def test_a_resume_trains_with_the_learning_rate_it_is_given(tmp_path):
    """Loading the optimizer state restored the saved learning rate: a run resumed with a lower one (what a
    diverged run is told to do) went on with the old. Resumed with 1e-30 (below float32 resolution), the
    next iteration must leave the weights exactly as they were."""
    import torch
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    common = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out),
              "--progress", "false", "--tensorboard", "false", "--export", "none", "--checkpoint_every", "1"]
    for extra in (["--max_iterations", "2"], ["--max_iterations", "3", "--resume", "--learning_rate", "1e-30"]):
        output = run_to_end(common + extra, timeout=600, what="training", env=env)
    assert "learning_rate: 0.01 -> 1e-30" in output  # the resume warning names the change ...
    before = get_fp32_state_dict_from_zero_checkpoint(str(out / "checkpoints"), tag="iter_000002")
    after = get_fp32_state_dict_from_zero_checkpoint(str(out / "checkpoints"), tag="iter_000003")
    assert all(torch.equal(before[k], after[k]) for k in before)  # ... and the run uses it


@pytest.mark.slow
def test_a_learning_rate_warmup_goes_on_across_a_resume(tmp_path):
    """lr_warmup_steps: 4 with one optimizer step per iteration: 1/4, 2/4, 3/4, 4/4 of the rate, logged as
    `lr`. Added on a resume of a run without warmup (its checkpoint holds no scheduler state) and with a new
    learning_rate: the warmup stands at the restored step count, towards the new rate."""
    import json

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    common = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out),
              "--progress", "false", "--tensorboard", "false", "--export", "none", "--checkpoint_every", "2"]
    for extra in (["--max_iterations", "2"],
                  ["--max_iterations", "4", "--resume", "--lr_warmup_steps", "4", "--learning_rate", "0.02"],
                  ["--max_iterations", "6", "--resume", "--lr_warmup_steps", "8", "--learning_rate", "0.02"]):
        run_to_end(common + extra, timeout=600, what="training", env=env)
    lrs = [json.loads(line)["lr"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert lrs == pytest.approx([0.01, 0.01, 0.02 * 3 / 4, 0.02, 0.02 * 5 / 8, 0.02 * 6 / 8])


@pytest.mark.slow
def test_a_cosine_schedule_decays_over_the_run_and_a_longer_resume_stretches_it(tmp_path):
    """lr_schedule: cosine to min_lr_ratio 0.5 over max_iterations (one optimizer step per iteration), logged as
    `lr`; a resume to more iterations stretches what is left of the decay from where the rate was
    (training/lr_schedule.py): resumed at 2 of 4 towards 8, at 8 (the decay over) towards 10. It used to be
    recomputed over the longer run, the rate jumping up at each resume."""
    import json
    import math

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    common = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out),
              "--progress", "false", "--tensorboard", "false", "--export", "none", "--checkpoint_every", "2",
              "--lr_schedule", "cosine", "--min_lr_ratio", "0.5"]
    from training.engine import mark_latest

    run_to_end(common + ["--max_iterations", "4"], timeout=600, what="training", env=env)
    mark_latest(out / "checkpoints", 2)  # resumed from its iteration-2 checkpoint, mid-decay, towards 8
    outputs = [run_to_end(common + ["--max_iterations", str(n), "--resume"], timeout=600, what="training", env=env)
               for n in (8, 10)]
    lrs = [json.loads(line)["lr"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    def cosine(progress: float) -> float:
        return 0.01 * (0.5 + 0.25 * (1 + math.cos(math.pi * progress)))

    # planned over 4 steps; from step 2 (progress 0.5) the other half over steps 2..8; at 8 the decay has ended
    assert lrs == pytest.approx([cosine(0), cosine(0.25)] + [cosine(0.5 + 0.5 * k / 6) for k in range(6)]
                                + [cosine(1), cosine(1)])
    assert "the decay now ends at optimizer step 8 (was 4)" in outputs[0] and "had finished its decay" in outputs[1]


def test_latest_moves_atomically_and_an_empty_latest_is_refused(tmp_path):
    """DeepSpeed's save_latest wrote `latest` on rank 0 before the other ranks had finished, in place: a kill
    left it naming a torn checkpoint, or empty (resume then took the checkpoints folder itself as the tag)."""
    from training.engine import latest_tag, mark_latest
    from training.resume import resume_source

    ckpt = tmp_path / "checkpoints"
    (ckpt / "iter_000004").mkdir(parents=True)
    mark_latest(ckpt, 4)
    assert latest_tag(ckpt) == "iter_000004" and sorted(p.name for p in ckpt.iterdir()) == ["iter_000004", "latest"]
    (ckpt / "latest").write_text("")
    with pytest.raises(ValueError, match="is empty or unreadable"):
        resume_source(ckpt, 1)



def test_nodes_sharing_the_checkpoint_folder_mark_latest_at_the_same_moment(tmp_path, monkeypatch):
    """Each node's local rank 0 moves `latest`; on a shared filesystem they did it through one temp name, so
    the second node's rename found the file gone (FileNotFoundError). Two threads stand in for two nodes
    (one host name each), both writing their temp file before either renames it."""
    import pathlib
    import socket
    import threading

    from training.engine import latest_tag, mark_latest

    ckpt = tmp_path / "checkpoints"
    (ckpt / "iter_000006").mkdir(parents=True)
    monkeypatch.setattr(socket, "gethostname", lambda: threading.current_thread().name)
    both_written = threading.Barrier(2, timeout=10)
    write_text = pathlib.Path.write_text

    def write_then_wait(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        n = write_text(self, *args, **kwargs)
        if self.parent == ckpt:
            both_written.wait()
        return n

    monkeypatch.setattr(pathlib.Path, "write_text", write_then_wait)
    errors = []

    def node() -> None:
        try:
            mark_latest(ckpt, 6)
        except Exception as exc:  # noqa: BLE001 (reported by the assertion below)
            errors.append(exc)

    threads = [threading.Thread(target=node, name=f"node{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert latest_tag(ckpt) == "iter_000006"
    assert sorted(p.name for p in ckpt.iterdir()) == ["iter_000006", "latest"]  # no temp file left


class _FakeEngine:
    """Writes the files a ZeRO-2 save of `ranks` ranks writes (DeepSpeed writes into an existing folder)."""

    lr_scheduler = None  # a DeepSpeed engine's, for a constant rate without warmup
    global_steps = skipped_steps = 0  # DeepSpeed's step counters (the constant rate's record has the position)

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks

    def save_checkpoint(self, save_dir, tag, client_state, save_latest):  # noqa: ANN001, ANN201
        folder = Path(save_dir) / tag
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "mp_rank_00_model_states.pt").write_bytes(b"new")
        for r in range(self.ranks):
            (folder / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"new")


def test_a_save_replaces_an_unfinished_attempt_at_the_same_iteration(tmp_path):
    """A save killed part-way (here by 2 ranks), then a resume (on 1 rank) saves the same iteration again: the
    earlier attempt's shards stayed in the folder, so the export found two optim_states files and a resume
    counted 2 ranks. Its universal conversion (of the earlier state) went stale with it."""
    from training.engine import checkpoint_ranks, save

    ckpt = tmp_path / "checkpoints"
    _fake_checkpoint(ckpt, "iter_000005", 1)  # latest: what the run resumed from
    (ckpt / "iter_000006").mkdir()
    for r in range(2):
        (ckpt / "iter_000006" / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"old")
    (ckpt / "iter_000006_universal" / "zero").mkdir(parents=True)
    save(_FakeEngine(1), ckpt, 6, data_position=12, local_rank=0)
    assert checkpoint_ranks(ckpt / "iter_000006") == 1
    assert sorted(p.name for p in ckpt.iterdir()) == ["iter_000005", "iter_000006", "latest"]
    assert checkpoint_ranks(ckpt / "iter_000005") == 1  # the checkpoint latest names is untouched

    (ckpt / "iter_000007").mkdir()  # another node's local rank 0 clears a shared folder; this process waits
    (ckpt / "iter_000007" / "zero_pp_rank_1_mp_rank_00_optim_states.pt").write_bytes(b"old")
    save(_FakeEngine(1), ckpt, 7, data_position=14, local_rank=1)
    assert checkpoint_ranks(ckpt / "iter_000007") == 2


def test_the_checkpoint_latest_names_is_never_saved_over(tmp_path):
    """Only a hand-edited `latest` can name the iteration being saved: the run stops before touching it."""
    from training.engine import clear_unfinished, save

    ckpt = tmp_path / "checkpoints"
    _fake_checkpoint(ckpt, "iter_000006", 2)
    with pytest.raises(RuntimeError, match="refusing to save checkpoint iter_000006 over the one"):
        save(_FakeEngine(1), ckpt, 6, data_position=12, local_rank=0)
    assert sorted(p.name for p in (ckpt / "iter_000006").iterdir()) == [
        "mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    assert (ckpt / "iter_000006" / "mp_rank_00_model_states.pt").read_bytes() == b"x"
    assert clear_unfinished(ckpt, "iter_000007", 0) == []  # nothing there: nothing deleted
