"""A resume whose prompts changed says so (training/prompt_stamp.py): each checkpoint records the prompt count and a
hash of the prompts; the data position restored counts positions of the old prompt order."""

from __future__ import annotations

import pytest

from training.config import PromptSpec
from training.prompt_stamp import prompt_change_warning, prompt_stamp, write_prompt_stamp

OLD = [PromptSpec("pick the cup"), PromptSpec("open the drawer", image_seed=2)]


def test_a_changed_count_is_named_with_the_file(tmp_path):
    write_prompt_stamp(tmp_path, prompt_stamp(OLD, "data/prompts.jsonl"))
    warning = prompt_change_warning(tmp_path, prompt_stamp([*OLD, PromptSpec("wipe")], "data/prompts.jsonl"))
    assert warning is not None
    assert "data/prompts.jsonl" in warning and "2 prompts" in warning and "3 now" in warning


def test_changed_content_of_the_same_count_is_named(tmp_path):
    write_prompt_stamp(tmp_path, prompt_stamp(OLD, "p.jsonl"))
    warning = prompt_change_warning(tmp_path, prompt_stamp([OLD[0], PromptSpec("close the drawer")], "p.jsonl"))
    assert warning is not None and "p.jsonl" in warning and "content" in warning


def test_the_same_prompts_and_an_old_checkpoint_say_nothing(tmp_path):
    assert prompt_change_warning(tmp_path, prompt_stamp(OLD, None)) is None  # saved before stamps
    write_prompt_stamp(tmp_path, prompt_stamp(OLD, "p.jsonl"))
    assert prompt_change_warning(tmp_path, prompt_stamp(list(OLD), "p.jsonl")) is None


@pytest.mark.slow
def test_a_resume_with_more_prompts_warns_end_to_end(tmp_path):
    """The smoke run, 1 iteration, then a resume with a prompt file added: the warning names it and the counts."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.launches import launch

    root = Path(__file__).resolve().parents[1]
    extra = tmp_path / "more.jsonl"
    extra.write_text('{"text": "wipe the table", "image_seed": 5}\n')

    def train(iterations: int, *args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "training.train", "--config", str(root / "training/configs/smoke.yaml"),
               "--output_dir", str(tmp_path / "run"), "--progress", "false", "--tensorboard", "false",
               "--export", "none", "--checkpoint_every", "1", "--max_iterations", str(iterations), *args]
        proc = launch(cmd, timeout=600, what="training", cwd=root)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return proc

    assert "training prompts" not in train(1).stderr
    assert (tmp_path / "run/checkpoints/iter_000001/prompts.json").is_file()
    warned = train(2, "--resume", "--dataset_file", str(extra)).stderr
    assert f"training prompts ({extra}) had 4 prompts and has 5 now" in warned
