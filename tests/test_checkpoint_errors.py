"""Export / resume error paths that ended in tracebacks: each is one error line naming the file (exit 2)."""

from __future__ import annotations

import pytest
from checkpoint_runs import SMOKE, saved_run

import training.export as export
from training.config import ConfigError
from training.config_io import load_config
from training.engine import latest_tag, load, rng_state
from training.export import ExportError, checkpoint_tag, main
from training.export_folder import save_policy
from training.resume import resume_source
from training.run_dir import earlier_checkpoints


def test_an_unwritable_export_folder_is_an_export_error_naming_it(tmp_path):
    from training.models import build_world_model

    cfg = load_config(SMOKE, [])
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "final"  # its parent is a file: mkdir's FileExistsError / NotADirectoryError
    with pytest.raises(ExportError, match=rf"cannot write the export to {out}: .*Error"):
        save_policy(build_world_model(cfg, "cpu"), cfg, out, iteration=1, source="unit")


def test_export_main_reports_an_os_error_in_one_line(tmp_path, capsys, monkeypatch):
    saved_run(tmp_path)
    out = tmp_path / "locked" / "final"

    def refuse(*_a, **_k):
        raise PermissionError(13, "Permission denied", str(out))

    monkeypatch.setattr(export, "export_policy", refuse)
    assert main(["--run", str(tmp_path / "run"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(out) in err and "Permission denied" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


class _Engine:
    def __init__(self, client: dict | None) -> None:
        self.client = client

    def load_checkpoint(self, ckpt_dir, tag, load_lr_scheduler_states):
        return f"{ckpt_dir}/{tag}", self.client


@pytest.mark.parametrize("client, missing", [
    ({"data_position": 4}, "'iteration'"),
    ({"iteration": 3}, "'data_position'"),
    ({"iteration": 3, "data_position": 4}, "'rng'"),
    ({"iteration": "three", "data_position": 4}, "'iteration'"),
])
def test_a_checkpoint_without_its_counters_is_a_config_error_naming_it(tmp_path, client, missing):
    client = {"rng": [rng_state()], **client} if missing != "'rng'" else client
    with pytest.raises(ConfigError, match=rf"--resume: {tmp_path / 'iter_000003'}: .*{missing}"):
        load(_Engine(client), tmp_path, "iter_000003", learning_rate=1e-4, weight_decay=0.0, max_iterations=10)


@pytest.mark.parametrize("path, client", [(None, None), ("x/iter_000003", None)])
def test_a_checkpoint_deepspeed_cannot_load_is_a_config_error_naming_its_folder(tmp_path, path, client):
    class _Missing(_Engine):
        def load_checkpoint(self, ckpt_dir, tag, load_lr_scheduler_states):
            return path, self.client

    folder = tmp_path / "iter_000003"
    with pytest.raises(ConfigError, match=rf"--resume: DeepSpeed could not load {folder}: .*mp_rank_00"):
        load(_Missing(client), tmp_path, "iter_000003", learning_rate=1e-4, weight_decay=0.0, max_iterations=10)


def test_a_saved_client_state_gives_its_counts(tmp_path):
    import numpy as np

    from training.engine import client_counts

    rng = [rng_state()]
    assert client_counts({"iteration": 3, "data_position": np.int64(12), "rng": rng}, tmp_path) == (3, 12, 0)
    saved = {"iteration": 3, "data_position": 12, "skipped_iterations": 2, "rng": rng}
    assert client_counts(saved, tmp_path) == (3, 12, 2)


def test_a_latest_file_that_is_not_utf8_is_named_not_a_traceback(tmp_path, capsys):
    cfg, ckpt = saved_run(tmp_path)
    (ckpt / "latest").write_bytes(b"iter_\xff\xfe003")
    assert latest_tag(ckpt) == "iter_\\xff\\xfe003"  # escaped: shown in the refusals, never a tag
    assert earlier_checkpoints(tmp_path / "run")  # the folder still counts as an earlier run's checkpoints
    with pytest.raises(ValueError, match=r"latest is empty or unreadable \('iter_\\\\xff"):
        resume_source(ckpt, 1, None)
    with pytest.raises(ExportError, match="'latest' is empty or does not name a checkpoint folder"):
        checkpoint_tag(ckpt)
    assert main(["--run", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "latest" in err and "Traceback" not in err


def test_a_latest_file_starting_with_a_byte_order_mark_names_its_checkpoint(tmp_path):
    _cfg, ckpt = saved_run(tmp_path)
    (ckpt / "latest").write_bytes(b"\xef\xbb\xbfiter_000003\n")  # saved by an editor that writes a BOM
    assert latest_tag(ckpt) == "iter_000003"
    assert checkpoint_tag(ckpt) == "iter_000003"  # was "no checkpoint '\ufeffiter_000003'"
