"""A training run's log files in output_dir (`training.metrics_log.LOG_FILES`, launches.jsonl) that are no regular
file. A folder named metrics.jsonl passed ``--check`` with ``--overwrite_output_dir`` (or ``--resume``), which do not
read the log, and the launch then ended in an IsADirectoryError traceback when the log was restarted or appended to;
overwriting deletes the earlier run's output folders by name, never a folder in a log's place, which may hold
anything. A FIFO named metrics.jsonl blocked the fresh launch's check forever (it counts the log's rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fifo_files import call_unblocked, make_fifo
from training.config import ConfigError
from training.config_io import load_config
from training.run_dir import check_output_dir

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


@pytest.mark.parametrize("name", ["metrics.jsonl", "eval.jsonl", "launches.jsonl"])
@pytest.mark.parametrize("flags", [[], ["--overwrite_output_dir"], ["--resume"]], ids=["fresh", "overwrite", "resume"])
def test_a_folder_in_a_logs_place_is_refused_naming_it(tmp_path, name, flags):
    (tmp_path / name).mkdir()
    cfg = load_config(SMOKE, ["--output_dir", str(tmp_path), *flags])
    why = rf"{tmp_path / name} is a folder, where the run writes its log {name}: neither --resume nor --overwrite"
    with pytest.raises(ConfigError, match=why):
        check_output_dir(cfg)


def test_a_fifo_metrics_log_is_refused_not_waited_on(tmp_path):
    make_fifo(tmp_path / "metrics.jsonl")
    for flags in ([], ["--overwrite_output_dir"]):
        cfg = load_config(SMOKE, ["--output_dir", str(tmp_path), *flags])
        with pytest.raises(ConfigError, match=rf"{tmp_path / 'metrics.jsonl'} is a FIFO, where the run writes its log"):
            call_unblocked(lambda: check_output_dir(cfg), tmp_path / "metrics.jsonl")  # noqa: B023


def test_regular_logs_still_pass_with_overwrite_and_resume(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"iteration": 1}\n')
    (tmp_path / "eval.jsonl").write_text("")
    for flag in ("--overwrite_output_dir", "--resume"):
        check_output_dir(load_config(SMOKE, ["--output_dir", str(tmp_path), flag]))


@pytest.mark.parametrize("name", ["metrics.jsonl", "eval.jsonl"])
@pytest.mark.parametrize("flags", [[], ["--overwrite_output_dir"], ["--resume"]], ids=["fresh", "overwrite", "resume"])
def test_a_log_linked_to_dev_null_is_refused_alike_naming_the_link_and_why(tmp_path, name, flags):
    """A log linked to /dev/null (to discard it) is refused by every launch (training/run_dir.py says why): before,
    ``--resume`` wrote into it while a fresh launch deleted the link and wrote a file. The message names the link's
    target, not only "a character device", and says why a log cannot be discarded."""
    (tmp_path / name).symlink_to("/dev/null")
    cfg = load_config(SMOKE, ["--output_dir", str(tmp_path), *flags])
    with pytest.raises(ConfigError) as caught:
        check_output_dir(cfg)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / name} is a link to /dev/null, a character device, where the run writes "
                              f"its log {name}: neither --resume nor --overwrite_output_dir"), message
    assert "a log cannot be discarded: the run reads its logs back" in message, message


def test_a_folder_in_a_logs_place_is_not_told_a_log_cannot_be_discarded(tmp_path):
    """Why a log cannot be discarded answers a log sent to a device (or a FIFO): a folder in a log's place discards
    nothing, and its refusal ended with that reason all the same."""
    (tmp_path / "metrics.jsonl").mkdir()
    with pytest.raises(ConfigError) as caught:
        check_output_dir(load_config(SMOKE, ["--output_dir", str(tmp_path)]))
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'metrics.jsonl'} is a folder, where the run writes its log"), message
    assert message.endswith("move or delete it, or set another output_dir"), message
