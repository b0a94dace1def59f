"""TrainConfig.wandb_project: MetricsLog mirrors its rows to a W&B run that a resume continues
(training/wandb_log.py). A recording stand-in checks what is sent; the real wandb, offline, checks that
it accepts it."""

from __future__ import annotations

import json
import math
import sys
import time
import types

import pytest

from training.config import ConfigError
from training.metrics_log import MetricsLog
from training.wandb_log import ID_FILE, WandbError, require_wandb


class _Run:
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def define_metric(self, name, step_metric=None):  # noqa: ANN001, ANN201 (wandb's signature)
        self.calls.append(("define_metric", name, step_metric))

    def log(self, data, step=None):  # noqa: ANN001, ANN201 (wandb's signature)
        self.calls.append(("log", data, step))

    def finish(self, exit_code=None):  # noqa: ANN001, ANN201 (wandb's signature)
        self.calls.append(("finish",) if not exit_code else ("finish", exit_code))


def _iteration(log: MetricsLog, row: dict) -> None:
    """A training iteration's row as the trainer logs it: its files, then W&B."""
    log.write_iteration(row, [])
    log.wandb_iteration(row)


def _evaluation(log: MetricsLog, row: dict, items: list | None = None) -> None:
    """A held-out evaluation's row and samples as training/evaluate.py logs them: its files, then W&B."""
    log.write_evaluation(row, items or [])
    log.wandb_evaluation(row, items or [])


@pytest.fixture
def fake_wandb(monkeypatch):
    calls: list = []
    errors = types.SimpleNamespace(Error=type("Error", (Exception,), {}))
    module = types.SimpleNamespace(errors=errors, fail=False)

    def init(**kwargs):  # noqa: ANN202
        if module.fail:
            raise errors.Error("api_key not configured (no-tty)")
        calls.append(("init", kwargs))
        return _Run(calls)

    module.init = init
    module.Video = lambda path, caption=None, format=None: ("Video", path, caption, format)  # noqa: A006
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module, calls


def test_rows_go_to_wandb_under_their_section_at_their_iteration(tmp_path, fake_wandb):
    _, calls = fake_wandb
    out = tmp_path / "my-run"
    log = MetricsLog(out, enabled=True, tensorboard=False, append=False, wandb_project="grpo",
                     config={"learning_rate": 0.01})
    _iteration(log, {"iteration": 1, "reward_mean": 0.5, "approx_kl": math.nan, "update_skipped": 0})
    _evaluation(log, {"iteration": 1, "eval_reward_mean": 0.25})
    log.close()
    log.close()  # twice: finished once
    (_, init), *rest = calls
    run_id = json.loads((out / ID_FILE).read_text())["id"]
    assert init == {"project": "grpo", "name": "my-run", "id": run_id, "resume": "allow", "dir": str(out),
                    "config": {"learning_rate": 0.01}}
    assert rest == [("define_metric", "iteration", None), ("define_metric", "train/*", "iteration"),
                    ("define_metric", "eval/*", "iteration"),
                    ("log", {"train/reward_mean": 0.5, "train/update_skipped": 0, "iteration": 1}, 1),  # no NaN
                    ("log", {"eval/reward_mean": 0.25, "iteration": 1}, 1), ("finish",)]  # wandb's step: the iteration
    assert [json.loads(line)["approx_kl"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [None]


def test_saved_held_out_videos_go_to_wandb_at_their_iteration(tmp_path, fake_wandb):
    """Only the files rank 0 can read are uploaded (another node's disk is not), keyed by prompt and sample."""
    _, calls = fake_wandb
    out = tmp_path / "run"
    log = MetricsLog(out, enabled=True, tensorboard=False, append=False, wandb_project="grpo")
    (out / "eval_videos" / "iter_000010").mkdir(parents=True)
    (out / "eval_videos" / "iter_000010" / "p000_s00.mp4").write_bytes(b"mp4")
    rows = [{"iteration": 10, "prompt": 0, "sample": 0, "text": "open the drawer", "reward": 0.5, "reason": None,
             "run_id": None, "video": "eval_videos/iter_000010/p000_s00.mp4"},
            {"iteration": 10, "prompt": 1, "sample": 0, "text": "b", "reward": 0.5, "reason": None, "run_id": None,
             "video": "eval_videos/iter_000010/p001_s00.mp4"},  # written by a rank on another node
            {"iteration": 10, "prompt": 2, "sample": 0, "text": "c", "reward": None, "reason": "x", "run_id": None,
             "video": None}]
    _evaluation(log, {"iteration": 10, "eval_reward_mean": 0.5}, rows)
    _evaluation(log, {"iteration": 20, "eval_reward_mean": 0.75}, rows[2:])  # no video: no video call
    log.close()
    logged = [c[1] for c in calls if c[0] == "log"]
    video = str(out / "eval_videos" / "iter_000010" / "p000_s00.mp4")
    assert logged == [{"eval/reward_mean": 0.5, "iteration": 10},
                      {"eval/video/p000_s00": ("Video", video, "open the drawer", "mp4"), "iteration": 10},
                      {"eval/reward_mean": 0.75, "iteration": 20}]  # each row's scalars, then its videos
    assert len((out / "eval_rewards.jsonl").read_text().splitlines()) == 4


def test_a_resume_rewinds_the_wandb_run_to_its_checkpoint(tmp_path, fake_wandb):
    """A crash after iteration 3 with the last checkpoint at 2: metrics.jsonl drops row 3 (trim_after) and the
    resumed run writes it again. W&B got both attempts' rows 3 (plotted side by side at iteration 3, wandb's
    step counting calls); now its step is the iteration and a resume rewinds the run (``resume_from``) to just
    before the checkpoint's iteration, replays that iteration's kept rows, and logs on from there."""
    _, calls = fake_wandb
    out = tmp_path / "run"
    log = MetricsLog(out, enabled=True, tensorboard=False, append=False, wandb_project="grpo")
    for i in (1, 2, 3):
        _iteration(log, {"iteration": i, "reward_mean": i / 10})
    _evaluation(log, {"iteration": 2, "eval_reward_mean": 0.5})
    log.close()
    run_id = json.loads((out / ID_FILE).read_text())["id"]
    del calls[:]
    log = MetricsLog(out, enabled=True, tensorboard=False, append=True, wandb_project="grpo", resume_step=2)
    assert log.trim_after(2) == {"metrics.jsonl": 1}
    for i in (3, 4):
        _iteration(log, {"iteration": i, "reward_mean": i / 10 + 1})
    log.close()
    init = calls[0][1]
    assert init["resume_from"] == f"{run_id}?_step=1" and "resume" not in init and init["id"] == run_id
    logged = [(c[2], c[1]) for c in calls if c[0] == "log"]
    assert logged == [(2, {"train/reward_mean": 0.2, "iteration": 2}), (2, {"eval/reward_mean": 0.5, "iteration": 2}),
                      (3, {"train/reward_mean": 1.3, "iteration": 3}), (4, {"train/reward_mean": 1.4, "iteration": 4})]


def test_a_rewind_wandb_refuses_continues_the_run_and_says_what_it_shows(tmp_path, fake_wandb, capsys):
    """Rewind is a W&B preview feature: a server (or account) without it refuses ``resume_from``. The run then
    continues as before rewind existed (``resume="allow"``), and the note says which iterations W&B keeps
    from the crashed attempt; nothing is replayed (W&B would drop rows below its step)."""
    module, calls = fake_wandb
    out = tmp_path / "run"
    MetricsLog(out, enabled=True, tensorboard=False, append=False, wandb_project="grpo").close()
    real_init = module.init

    def no_rewind(**kwargs):  # noqa: ANN202
        if "resume_from" in kwargs:
            raise module.errors.Error("failed to rewind run: rewind is not enabled")
        return real_init(**kwargs)

    module.init = no_rewind
    del calls[:]
    log = MetricsLog(out, enabled=True, tensorboard=False, append=True, wandb_project="grpo", resume_step=5)
    log.trim_after(5)
    _iteration(log, {"iteration": 6, "reward_mean": 0.5})
    log.close()
    assert calls[0][1]["resume"] == "allow" and "resume_from" not in calls[0][1]
    assert [c[2] for c in calls if c[0] == "log"] == [6]
    err = capsys.readouterr().err
    assert "could not rewind" in err and "rewind is not enabled" in err and "after iteration 5" in err
    assert "metrics.jsonl" in err


def test_rewind_needs_a_checkpoint_iteration(tmp_path, fake_wandb):
    with pytest.raises(ValueError, match="resume_step must be an integer >= 1, got 0"):
        MetricsLog(tmp_path, enabled=True, tensorboard=False, append=True, wandb_project="grpo", resume_step=0)


def test_a_resume_continues_the_run_and_a_fresh_start_begins_another(tmp_path, fake_wandb):
    _, calls = fake_wandb
    out = tmp_path / "run"

    def start(append: bool, project: str = "grpo") -> str:
        MetricsLog(out, enabled=True, tensorboard=False, append=append, wandb_project=project).close()
        return [c for c in calls if c[0] == "init"][-1][1]["id"]

    first = start(append=False)
    assert start(append=True) == first  # --resume
    assert start(append=True, project="other") != first  # another project: another run
    assert start(append=False) not in (first,)  # a fresh run in the same folder
    (out / ID_FILE).write_text("{broken")
    assert start(append=True)  # an unreadable id file: a new run, no crash
    for content in ('["not", "an", "object"]', "null", '{"project": "grpo", "id": 7}'):
        (out / ID_FILE).write_text(content)  # valid JSON but no saved run: a new run, not an AttributeError
        assert isinstance(start(append=True), str) and json.loads((out / ID_FILE).read_text())["project"] == "grpo"
    MetricsLog(out, enabled=False, tensorboard=False, wandb_project="grpo").close()  # other ranks: no run
    assert len([c for c in calls if c[0] == "init"]) == 8


def test_a_run_that_cannot_start_says_what_to_do(tmp_path, fake_wandb):
    module, _ = fake_wandb
    module.fail = True
    with pytest.raises(WandbError, match="api_key not configured .*wandb login.*WANDB_MODE=offline"):
        MetricsLog(tmp_path, enabled=True, tensorboard=False, wandb_project="grpo")


def test_a_run_that_cannot_start_leaves_no_tensorboard_writer_open(tmp_path, fake_wandb, monkeypatch):
    """The metrics log opened TensorBoard's writer, then the W&B run; one that could not start (not logged in:
    the fast failure before the model loads) raised out of ``MetricsLog()`` with the writer open, which no
    ``close`` could reach (the trainer had no log to close)."""
    import torch.utils.tensorboard

    module, _ = fake_wandb
    module.fail = True
    writers: list = []

    class Writer(torch.utils.tensorboard.SummaryWriter):
        def __init__(self, *args, **kwargs):  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            writers.append(self)

    monkeypatch.setattr(torch.utils.tensorboard, "SummaryWriter", Writer)
    with pytest.raises(WandbError):
        MetricsLog(tmp_path, enabled=True, tensorboard=True, append=False, wandb_project="grpo")
    assert len(writers) <= 1 and all(w.all_writers is None for w in writers)  # closed, or never opened


def test_require_wandb_names_the_install(monkeypatch):
    require_wandb(None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    require_wandb(None)  # off: nothing to check
    with pytest.raises(ConfigError, match="wandb_project is 'grpo' but wandb is not installed: `pip install wandb`"):
        require_wandb("grpo")


def test_real_wandb_offline_takes_the_rows(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")  # wandb's own setting: no network, no account
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    for append, iteration in ((False, 1), (True, 2)):
        log = MetricsLog(out, enabled=True, tensorboard=False, append=append, wandb_project="raa-test",
                         config={"seed": 0})
        _iteration(log, {"iteration": iteration, "reward_mean": 0.125 * iteration})
        log.close()
    run_id = json.loads((out / ID_FILE).read_text())["id"]
    files = sorted((out / "wandb").glob(f"offline-run-*-{run_id}*/run-{run_id}.wandb"))
    assert len(files) == 2  # both launches wrote to the same run id
    # seen about 1 run in 8 (never reproduced with a pause): a launch's file still held only its 7-byte header
    # when read right after finish(); wandb's service process writes it, so give it a few seconds
    deadline = time.monotonic() + 10
    while any(p.stat().st_size <= 7 for p in files) and time.monotonic() < deadline:
        time.sleep(0.1)
    for launch, path in enumerate(files, start=1):
        records = _offline_records(path)
        assert ("train/*", "iteration") in [(r.metric.glob_name, r.metric.step_metric) for r in records
                                           if r.WhichOneof("record_type") == "metric"]  # its x axis
        logged = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
                  for r in records if r.WhichOneof("record_type") == "history"]
        assert [(row["iteration"], row["train/reward_mean"]) for row in logged] == [(launch, 0.125 * launch)]


def test_real_wandb_offline_rewinds_a_resumed_run(tmp_path, monkeypatch):
    """wandb itself takes ``resume_from`` offline (``wandb sync`` rewinds the run on the server later): the
    resumed launch's file names the branch point, step 1 of the same run, and its history starts at step 2
    with the checkpoint's row, then the repeated iteration 3 at step 3."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    log = MetricsLog(out, enabled=True, tensorboard=False, append=False, wandb_project="raa-test")
    for i in (1, 2, 3):
        _iteration(log, {"iteration": i, "reward_mean": 0.125 * i})
    log.close()
    log = MetricsLog(out, enabled=True, tensorboard=False, append=True, wandb_project="raa-test", resume_step=2)
    log.trim_after(2)
    _iteration(log, {"iteration": 3, "reward_mean": 1.0})
    log.close()
    run_id = json.loads((out / ID_FILE).read_text())["id"]
    files = sorted((out / "wandb").glob(f"offline-run-*-{run_id}*/run-{run_id}.wandb"))
    assert len(files) == 2
    deadline = time.monotonic() + 10  # as above: wandb's service process writes the file
    while any(p.stat().st_size <= 7 for p in files) and time.monotonic() < deadline:
        time.sleep(0.1)
    records = _offline_records(files[1])
    runs = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert [(r.branch_point.run, r.branch_point.metric, r.branch_point.value) for r in runs[:1]] == [
        (run_id, "_step", 1.0)]
    history = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    assert [(row["_step"], row["iteration"], row["train/reward_mean"]) for row in history] == [(2, 2, 0.25), (3, 3, 1.0)]


def _offline_records(path):  # noqa: ANN001, ANN202
    """The records of an offline ``.wandb`` file: a 7-byte wandb header, then LevelDB's log format (32 KiB
    blocks; each record fragment has a 7-byte header: crc32c, length, type FULL=1 / FIRST=2 / MIDDLE=3 /
    LAST=4; a block tail shorter than a header is padding). Searching the raw bytes instead misses a string
    that a block boundary splits."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data, pos, fragments, records = path.read_bytes(), 7, b"", []
    assert data[:4] == b":W&B", "not a wandb transaction log"
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:  # zero padding at the end of a block
            pos += 32768 - pos % 32768
            continue
        fragments, pos = fragments + data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(fragments)
            records.append(record)
            fragments = b""
    return records


def test_real_wandb_offline_takes_a_saved_video(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    import numpy as np

    from tools.video import write_video

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    log = MetricsLog(out, enabled=True, tensorboard=False, append=False, wandb_project="raa-test")
    name = "eval_videos/iter_000000/p000_s00.mp4"
    (out / name).parent.mkdir(parents=True)
    write_video(out / name, np.full((9, 32, 48, 3), 90, np.uint8), fps=8.0)
    _evaluation(log, {"iteration": 0, "eval_reward_mean": 0.5},
                [{"iteration": 0, "prompt": 0, "sample": 0, "text": "open the drawer", "reward": 0.5, "reason": None,
                  "run_id": None, "video": name}])
    log.close()
    uploaded = list((out / "wandb").glob("offline-run-*/files/media/videos/eval/video/p000_s00*.mp4"))
    assert len(uploaded) == 1 and uploaded[0].read_bytes() == (out / name).read_bytes()


def test_a_resume_on_a_full_disk_keeps_the_runs_id(tmp_path, fake_wandb, monkeypatch):
    """wandb.json was rewritten in place at every launch: a resume on a full disk (the crash that the resume
    follows often is one) left it empty, and the next resume started a second W&B run for the same run."""
    import errno
    from pathlib import Path

    _, calls = fake_wandb
    out = tmp_path / "run"
    MetricsLog(out, enabled=True, tensorboard=False, append=False, wandb_project="grpo").close()
    first = [c for c in calls if c[0] == "init"][-1][1]["id"]
    real = Path.write_text

    def disk_full(self, data, *args, **kwargs):
        real(self, data[:5], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError):
        MetricsLog(out, enabled=True, tensorboard=False, append=True, wandb_project="grpo")
    monkeypatch.setattr(Path, "write_text", real)
    MetricsLog(out, enabled=True, tensorboard=False, append=True, wandb_project="grpo").close()
    assert [c for c in calls if c[0] == "init"][-1][1]["id"] == first
    assert sorted(p.name for p in out.iterdir()) == [ID_FILE]  # no temporary file left


def test_the_rewind_point_is_the_loaded_checkpoints_iteration(tmp_path, fake_wandb):
    """The trainer passes the iteration of the checkpoint it plans to load (its folder name, before the model
    loads, so that a W&B run that cannot start fails in seconds); trim_after with another iteration would
    replay the wrong rows into a run rewound elsewhere, so it is refused."""
    from training.engine import tag_iteration

    assert tag_iteration("iter_000010") == 10 and tag_iteration("iter_000010_universal") == 10
    for bad in ("latest", "iter_", "iter_12x", "best"):
        with pytest.raises(ValueError, match="is not a checkpoint folder name"):
            tag_iteration(bad)
    out = tmp_path / "run"
    MetricsLog(out, enabled=True, tensorboard=False, append=False, wandb_project="grpo").close()
    log = MetricsLog(out, enabled=True, tensorboard=False, append=True, wandb_project="grpo", resume_step=10)
    with pytest.raises(ValueError, match=r"trim_after\(20\) after the W&B run was rewound to iteration 10"):
        log.trim_after(20)
