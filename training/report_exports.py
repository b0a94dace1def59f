"""The training report's "final export" line (training/report.py header): which iteration ``final/`` holds, and
whether the run's latest checkpoint is newer.

Decision where the issue was silent: the line said only "yes", while ``final/`` can hold an older policy than the
run's curves end at: a resumed run whose end-of-run export failed (exit 1) keeps the earlier end's ``final/``, and
``training.export --tag iter_N --out RUN/final`` writes any checkpoint there. ``training.generate --policy
RUN/final`` then samples that older policy. The line names export.json's iteration and, when ``latest`` names a
later checkpoint, that one and the command that exports it. An export.json that cannot be read is said so, not
guessed.
"""

from __future__ import annotations

from pathlib import Path

from tools.file_kinds import read_at
from tools.jsonl import parsed_file
from training.run_dir import EXPORT_FILE, read_latest

_EXPORT_COMMAND = "python -m training.export --run"


def final_export_label(run_dir: Path) -> str:
    """"no", "iteration N (from TAG)", plus a warning when ``checkpoints/latest`` names a later iteration."""
    info_file = run_dir / "final" / EXPORT_FILE
    try:
        kind, data = read_at(info_file)  # one look: a file gone after an is_file read as "not readable JSON"
        if kind is not None:
            return "no"
        info = parsed_file(info_file, data=data)
    except (OSError, ValueError):
        return f"{info_file} is not readable JSON"
    iteration = info.get("iteration") if isinstance(info, dict) else None
    if not isinstance(iteration, int) or isinstance(iteration, bool):
        return "yes (its export.json names no iteration)"
    source = info.get("source")
    label = f"iteration {iteration}" + (f" (from {Path(source).name})" if isinstance(source, str) and source else "")
    latest = read_latest(run_dir / "checkpoints") or ""
    digits = latest.removeprefix("iter_")
    if latest.startswith("iter_") and digits.isdigit() and int(digits) > iteration:
        label += (f"; older than the run's latest checkpoint {latest}: `{_EXPORT_COMMAND} {run_dir}` exports that "
                  "one into final/")
    return label
