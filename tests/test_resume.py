"""What --resume may load (training/resume.py): ranks, ZeRO stage and dtype of the checkpoint vs the launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launches import launch, run_to_end, torchrun
from tests.test_checkpoints import ROOT, SMOKE, _fake_checkpoint
from training.config_io import load_config
from training.resume import (
    LAYOUT_FILE,
    ResumeSource,
    StateLayout,
    layout_change,
    read_layout,
    read_world,
    resume_source,
    run_layout,
    state_layout,
    write_layout,
)

F32, BF16 = "float32", "bfloat16"


def test_layout_change_follows_what_deepspeed_can_load():
    """The table measured on CPU (module docstring): stage groups {0}, {1, 2}, {3}; dtype via universal."""
    cases = {
        ((2, F32), (2, F32)): "same",
        ((2, F32), (1, F32)): "same",
        ((1, BF16), (2, BF16)): "same",
        ((2, F32), (0, F32)): "impossible",
        ((2, F32), (3, F32)): "impossible",
        ((3, F32), (2, F32)): "impossible",
        ((0, F32), (1, F32)): "impossible",
        ((2, F32), (2, BF16)): "universal",
        ((2, BF16), (1, F32)): "universal",
        ((3, F32), (3, BF16)): "universal",
        ((0, F32), (0, BF16)): "impossible",
        ((0, BF16), (0, BF16)): "same",
    }
    for (saved, now), want in cases.items():
        assert layout_change(StateLayout(*saved), StateLayout(*now)) == want, (saved, now)


def test_state_layout_takes_the_stage_from_the_json_unless_overridden():
    assert state_layout(load_config(SMOKE)) == StateLayout(2, F32)  # ds_zero2.json
    assert state_layout(load_config(SMOKE, ["--ds_config", "ds_zero3.json"])) == StateLayout(3, F32)
    assert state_layout(load_config(SMOKE, ["--zero_stage", "0", "--dtype", BF16])) == StateLayout(0, BF16)
    assert run_layout(None) is None


def test_layout_file_round_trip(tmp_path):
    assert read_layout(tmp_path) is None
    write_layout(tmp_path, StateLayout(3, BF16))
    assert read_layout(tmp_path) == StateLayout(3, BF16)
    assert [p.name for p in tmp_path.iterdir()] == [LAYOUT_FILE]  # no temporary file left
    (tmp_path / LAYOUT_FILE).write_text("{not json")
    assert read_layout(tmp_path) is None  # unreadable: as if absent (then config.yaml, then DeepSpeed)
    write_layout(tmp_path / "missing", StateLayout(2, F32))  # a folder this node holds nothing of
    assert not (tmp_path / "missing").exists()


def test_resume_source_names_what_a_resume_cannot_use(tmp_path):
    ckpt = tmp_path / "checkpoints"
    with pytest.raises(ValueError, match="no checkpoint in"):
        resume_source(ckpt, 1)
    _fake_checkpoint(ckpt, "iter_000004", ranks=2)
    assert resume_source(ckpt, 2) == ResumeSource("iter_000004", universal=False)
    with pytest.raises(ValueError, match="written by 2 ranks and this launch has 1") as err:
        resume_source(ckpt, 1)
    assert "--nproc_per_node 2" in str(err.value) and "python -m training.reshard --run" in str(err.value)
    (ckpt / "iter_000004_universal" / "zero").mkdir(parents=True)  # converted (training/reshard.py)
    assert resume_source(ckpt, 1) == ResumeSource("iter_000004_universal", universal=True)
    assert resume_source(ckpt, 2) == ResumeSource("iter_000004", universal=False)  # same size: the original
    (ckpt / "latest").write_text("iter_000009")
    with pytest.raises(ValueError, match="names iter_000009, but"):
        resume_source(ckpt, 2)
    other = tmp_path / "bf16"
    _fake_checkpoint(other, "iter_000001", ranks=1, prefix="bf16_")  # ZeRO-1 with the bf16 optimizer
    with pytest.raises(ValueError, match="written by 1 rank and this launch has 8.* with 1 process "):
        resume_source(other, 8)


def test_a_saved_checkpoint_without_latest_is_named_with_the_way_to_resume_it(tmp_path):
    """A save that finished (layout.json) before 'latest' moved: a fresh launch is refused as holding a
    checkpoint (training.run_dir), so --resume must not say "start the run without --resume"."""
    ckpt = tmp_path / "checkpoints"
    _fake_checkpoint(ckpt, "iter_000004", ranks=1)
    write_layout(ckpt / "iter_000004", StateLayout(2, F32))
    (ckpt / "latest").unlink()
    with pytest.raises(ValueError, match="iter_000004 was saved in full.*write that tag into .*latest"):
        resume_source(ckpt, 1)


def test_a_checkpoint_without_its_model_states_is_refused_before_the_model_loads(tmp_path):
    """Before: --check said ok, and DeepSpeed's load stopped with a bare AssertionError after the model loaded."""
    ckpt = tmp_path / "checkpoints"
    _fake_checkpoint(ckpt, "iter_000004", ranks=1)
    (ckpt / "iter_000004" / "mp_rank_00_model_states.pt").unlink()
    with pytest.raises(ValueError, match=r"iter_000004 lacks \*model_states.pt .*incomplete"):
        resume_source(ckpt, 1)
    write_layout(ckpt / "iter_000004", StateLayout(2, F32))
    with pytest.raises(ValueError, match="iter_000004 lacks mp_rank_00_model_states.pt"):
        resume_source(ckpt, 1, StateLayout(2, F32))
    write_layout(ckpt / "iter_000004", StateLayout(3, F32))  # ZeRO-3: one file per rank
    (ckpt / "iter_000004" / "zero_pp_rank_0_mp_rank_00_model_states.pt").write_bytes(b"x")
    assert resume_source(ckpt, 1, StateLayout(3, F32)) == ResumeSource("iter_000004", universal=False)
    _fake_checkpoint(tmp_path / "z3", "iter_000002", ranks=2)
    write_layout(tmp_path / "z3" / "iter_000002", StateLayout(3, F32))
    (tmp_path / "z3" / "iter_000002" / "zero_pp_rank_0_mp_rank_00_model_states.pt").write_bytes(b"x")
    with pytest.raises(ValueError, match="lacks zero_pp_rank_1_mp_rank_00_model_states.pt"):
        resume_source(tmp_path / "z3", 2, StateLayout(3, F32))


def test_resume_source_compares_the_checkpoint_layout_with_the_launch(tmp_path):
    ckpt = tmp_path / "checkpoints"
    _fake_checkpoint(ckpt, "iter_000004", ranks=1)
    write_layout(ckpt / "iter_000004", StateLayout(2, F32))
    plain = ResumeSource("iter_000004", universal=False)
    assert resume_source(ckpt, 1, StateLayout(1, F32)) == plain  # stages 1 and 2 share a layout
    with pytest.raises(ValueError, match="saved under ZeRO stage 2 and this launch runs stage 3") as err:
        resume_source(ckpt, 1, StateLayout(3, F32))
    assert "`--zero_stage 1` or `--zero_stage 2`" in str(err.value)
    with pytest.raises(ValueError, match="saved in float32 and this launch runs bfloat16") as err:
        resume_source(ckpt, 1, StateLayout(2, BF16))
    assert "python -m training.reshard --run" in str(err.value) and "--dtype float32" in str(err.value)
    (ckpt / "iter_000004_universal" / "zero").mkdir(parents=True)
    assert resume_source(ckpt, 1, StateLayout(2, BF16)) == ResumeSource("iter_000004_universal", universal=True)
    assert resume_source(ckpt, 1, StateLayout(2, F32)) == plain  # no change: never the slower universal load
    with pytest.raises(ValueError, match="ZeRO stage 2 and this launch runs stage 0"):  # a conversion cannot help
        resume_source(ckpt, 1, StateLayout(0, F32))

    # The checkpoint's own file wins over the run's config.yaml (which a crashed resume may have rewritten);
    # without the file, the saved config is the fallback; with neither, DeepSpeed's load is the check.
    assert resume_source(ckpt, 1, StateLayout(2, F32), fallback=StateLayout(2, BF16)) == plain
    (ckpt / "iter_000004" / LAYOUT_FILE).unlink()
    with pytest.raises(ValueError, match="stage 3 and this launch runs stage 2"):
        resume_source(ckpt, 1, StateLayout(2, F32), fallback=StateLayout(3, F32))
    assert resume_source(ckpt, 1, StateLayout(3, F32)) == plain

    stage0 = tmp_path / "stage0"
    _fake_checkpoint(stage0, "iter_000001", ranks=0)
    write_layout(stage0 / "iter_000001", StateLayout(0, F32))
    assert resume_source(stage0, 4, StateLayout(0, F32)) == ResumeSource("iter_000001", universal=False)
    with pytest.raises(ValueError, match="stage-0 checkpoint has no universal form") as err:
        resume_source(stage0, 1, StateLayout(0, BF16))
    assert "--dtype float32" in str(err.value)


def _train(out, *extra: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out),
           "--progress", "false", "--tensorboard", "false", "--checkpoint_every", "1", *extra]
    return launch(cmd, timeout=timeout, what="training")


@pytest.mark.slow
def test_a_run_changes_its_dtype_through_the_universal_form_and_not_its_stage_group(tmp_path):
    """float32 ZeRO-2 -> bfloat16: refused with the conversion to make, then loaded from it; ZeRO-2 -> 3 is
    refused before the model loads (DeepSpeed: a bare AssertionError after it had)."""
    out = tmp_path / "run"
    proc = _train(out, "--max_iterations", "2", "--export", "none")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert read_layout(out / "checkpoints" / "iter_000002") == StateLayout(2, F32)
    for extra, want in ((["--dtype", BF16], "python -m training.reshard --run"),
                        (["--zero_stage", "3"], "saved under ZeRO stage 2 and this launch runs stage 3")):
        proc = _train(out, "--max_iterations", "3", "--resume", *extra, timeout=300)
        assert proc.returncode == 2 and want in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    proc = launch([sys.executable, "-m", "training.reshard", "--run", str(out)], timeout=600, what="reshard")
    assert proc.returncode == 0, proc.stderr[-4000:]
    proc = _train(out, "--max_iterations", "3", "--resume", "--dtype", BF16, "--export", "none")
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    assert read_layout(out / "checkpoints" / "iter_000003") == StateLayout(2, BF16)
    assert list((out / "checkpoints" / "iter_000003").glob("bf16_zero_pp_rank_*_optim_states.pt"))


@pytest.mark.slow
@pytest.mark.distributed
def test_every_rank_resumes_the_checkpoint_rank_0_picked(tmp_path):
    """Each rank read `latest` itself: one that moved between two ranks' reads (here each rank sees a folder of its
    own) had them load different checkpoints, and a refusal on rank 0 alone left the others waiting for it."""
    for view, tags in (("view0", ["iter_000002"]), ("view1", ["iter_000002", "iter_000004"])):
        ckpt = tmp_path / "moved" / view / "checkpoints"  # latest moved on from 2 to 4: both folders are there
        for tag in tags:
            _fake_checkpoint(ckpt, tag, ranks=2)
            write_layout(ckpt / tag, StateLayout(2, F32))
    _fake_checkpoint(tmp_path / "missing" / "view1" / "checkpoints", "iter_000004", ranks=2)
    (tmp_path / "missing" / "view0").mkdir(parents=True)  # rank 0 sees no checkpoint at all
    answers = _probe(tmp_path, "moved,missing")
    assert answers[0] == answers[1], answers
    assert answers[0][0] == {"tag": "iter_000002"} and "no checkpoint in" in answers[0][1]["error"]


def _probe(tmp_path: Path, cases: str) -> list[list[dict]]:
    """What plan_resume answered each of 2 ranks (tests/resume_probe.py), each rank reading its own view of the
    run folder (``CASE/viewR``), as two nodes with node-local checkpoint folders do."""
    cmd = [*torchrun(), str(ROOT / "tests" / "resume_probe.py"), str(tmp_path), str(tmp_path), cases]
    # this checkout's modules, not those an editable install of another checkout points at
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    run_to_end(cmd, timeout=300, what="resume probe", extra={"PYTHONPATH": path})
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow
@pytest.mark.distributed
def test_a_node_whose_copy_of_the_checkpoint_is_incomplete_is_refused_on_every_rank(tmp_path):
    """Rank 0 picks the checkpoint from its own view; a node whose (node-local) copy lacked that folder or its
    own ranks' files got no word of it: plan_resume answered the tag, and DeepSpeed failed on that node after
    the model loaded (FileNotFoundError) while the other ranks waited in a collective. Now every rank checks
    the files it will open, and every rank stops with the same message, naming the rank, host and files."""
    for case, drop in (("noshard", "zero_pp_rank_1_mp_rank_00_optim_states.pt"), ("nofolder", None)):
        for view in ("view0", "view1"):
            ckpt = tmp_path / case / view / "checkpoints"
            _fake_checkpoint(ckpt, "iter_000002", ranks=2)
            write_layout(ckpt / "iter_000002", StateLayout(2, F32))
        if drop:
            (tmp_path / case / "view1" / "checkpoints" / "iter_000002" / drop).unlink()
    import shutil

    shutil.rmtree(tmp_path / "nofolder" / "view1" / "checkpoints" / "iter_000002")
    answers = _probe(tmp_path, "noshard,nofolder")
    assert answers[0] == answers[1], answers
    noshard, nofolder = answers[0][0].get("error", ""), answers[0][1].get("error", "")
    assert "iter_000002 is incomplete where rank 1" in noshard and "zero_pp_rank_1_mp_rank_00_optim_states.pt" in noshard
    assert "rank 0" not in noshard.split("incomplete where")[1].split(";")[0]
    assert "use_node_local_storage" in noshard and "storage every node shares" in noshard
    assert "iter_000002 is incomplete where rank 1" in nofolder and "the folder" in nofolder


def test_a_node_local_copy_counts_the_ranks_the_checkpoint_records(tmp_path):
    """With node-local checkpoint folders (DeepSpeed's checkpoint.use_node_local_storage) rank 0's node holds only
    its own ranks' optimizer shares: counting them said a 2-rank checkpoint was written by 1 rank and refused the
    resume ("convert it with training.reshard"), and under ZeRO-3 it missed the other ranks' model states. The
    save records its number of ranks in layout.json; a node-local resume compares that, and each rank checks its
    own files (check_every_copy)."""
    ckpt = tmp_path / "checkpoints"
    _fake_checkpoint(ckpt, "iter_000002", ranks=1)  # node 0's copy: rank 0's share only
    write_layout(ckpt / "iter_000002", StateLayout(2, F32), world=2)
    assert resume_source(ckpt, 2, StateLayout(2, F32), node_local=True) == ResumeSource("iter_000002", universal=False)
    with pytest.raises(ValueError, match="written by 2 ranks and this launch has 4"):
        resume_source(ckpt, 4, StateLayout(2, F32), node_local=True)
    with pytest.raises(ValueError, match="written by 1 rank and this launch has 2"):  # shared: what is there counts
        resume_source(ckpt, 2, StateLayout(2, F32))
    write_layout(ckpt / "iter_000002", StateLayout(3, F32), world=2)
    (ckpt / "iter_000002" / "zero_pp_rank_0_mp_rank_00_model_states.pt").write_bytes(b"x")
    assert resume_source(ckpt, 2, StateLayout(3, F32), node_local=True) == ResumeSource("iter_000002", universal=False)
    write_layout(ckpt / "iter_000002", StateLayout(2, F32))  # saved before the count was recorded: unknown
    assert resume_source(ckpt, 2, StateLayout(2, F32), node_local=True) == ResumeSource("iter_000002", universal=False)
    assert read_world(ckpt / "iter_000002") is None


def test_node_local_storage_is_the_deepspeed_jsons_setting(tmp_path):
    from training.resume import node_local_storage

    for content, expected in (({}, False), ({"checkpoint": {"use_node_local_storage": True}}, True),
                              ({"checkpoint": {"use_node_local_storage": False}}, False)):
        (tmp_path / "ds.json").write_text(json.dumps(content))
        cfg = load_config(SMOKE, [f"--ds_config={tmp_path / 'ds.json'}"])
        assert node_local_storage(cfg) is expected
