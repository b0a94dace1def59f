"""What validation (training/config.py) and the prompt loader (training/data.py) refuse in a config's prompts;
moved out of training/config.py, which re-exports these names, to keep that file to the dataclass and its checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from training.config import PromptSpec


def prompt_problems(spec: PromptSpec) -> list[str]:
    """What is wrong with a config prompt, as a JSONL row is refused (training.data.prompt_from_row): blank
    text (the policy and the reward would be given no task) and a negative image_seed (numpy refuses it when
    the synthetic frame is drawn, a bare ValueError mid-run)."""
    problems = []
    if not isinstance(spec.text, str) or not spec.text.strip():
        problems.append(f"'text' must be a non-empty string, got {spec.text!r}")
    if isinstance(spec.image_seed, int) and spec.image_seed < 0:
        problems.append(f"'image_seed' must be >= 0, got {spec.image_seed} (prompt {spec.text!r})")
    return problems


def is_blank_file(value: str | None) -> bool:
    """Whether a prompt-file setting is blank text: refused (`blank_file_problem`) by validation and the loader
    alike (validation took "" as unset, the loader as the path ".")."""
    return value is not None and not value.strip()


def blank_file_problem(name: str) -> str:
    return f"{name} is empty (an unset shell variable?): give a JSONL file, or none for no file"
