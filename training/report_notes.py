"""Notes of the training report (training/report.py) that the page lacked: the count of ineligible held-out
rewards (section [held-out]) and which checkpoint folders are saves killed part-way (the header).

eval.jsonl's ``eval_reward_mean`` averages the eligible rewards only (training/evaluate.py), and an evaluation
whose rewards were all ineligible has a null mean, which the held-out curve cannot draw. The page therefore names,
under the curve, each evaluation with ineligible rewards: ``iteration 4: 4 of 4 (no mean, not charted)``, with
the total over the evaluations shown, and for an evaluation an outage made incomplete (training/evaluate.py) how
many rewards it lost: its mean is charted but never chosen as the best checkpoint. Decision where the issue was silent: a row without integer
``eval_ineligible_count`` / ``eval_videos`` (a run from before they were logged, a hand-edited file) is left out
of the count, not guessed; nothing is written when no evaluation had an ineligible reward.

The header's checkpoint list marks a folder ``training.run_dir.unfinished_checkpoints`` names (no ``layout.json``,
numbered after a finished checkpoint, not ``latest``) as an unfinished save: nothing resumes or exports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evals.report_html import esc
from training.finite import finite_number
from training.run_dir import LAYOUT_FILE, read_latest, unfinished_checkpoints


def _count(row: dict[str, Any], key: str) -> int | None:
    value = row.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def ineligible_evaluations(rows: list[dict[str, Any]]) -> list[tuple[int, int, int, bool, int]]:
    """(iteration, ineligible, samples, has a mean, lost to an outage) of each held-out row (one per iteration, as
    the report keeps them) that counts ineligible rewards; pure."""
    out = []
    for row in rows:
        bad, total = _count(row, "eval_ineligible_count"), _count(row, "eval_videos")
        if bad and total is not None:
            out.append((int(row["iteration"]), bad, total, finite_number(row.get("eval_reward_mean"), bools=True),
                        _count(row, "eval_outages") or 0))
    return out


def ineligible_note(rows: list[dict[str, Any]]) -> str:
    """The held-out section's paragraph naming the evaluations with ineligible rewards ("" for none)."""
    found = ineligible_evaluations(rows)
    if not found:
        return ""
    counted = [r for r in rows if _count(r, "eval_ineligible_count") is not None and _count(r, "eval_videos") is not None]
    bad, total = sum(_count(r, "eval_ineligible_count") or 0 for r in counted), sum(_count(r, "eval_videos") or 0 for r in counted)
    parts = [f"iteration {it}: {n} of {of}" + ("" if has_mean else " (no mean, not charted)")
             + (f" ({lost} lost to an outage: incomplete, never the best checkpoint)" if lost and has_mean else "")
             for it, n, of, has_mean, lost in found]
    return (f"<p id=\"held-out-ineligible\"><b>ineligible held-out rewards ({bad} of {total})</b>, left out of the "
            f"means: {esc('; '.join(parts))}</p>")


def checkpoint_list(ckpt_dir: Path) -> str:
    """The header's checkpoints: every ``iter_*`` folder of ``ckpt_dir`` by name, an unfinished save marked (module
    docstring); "none" without one."""
    unfinished = set(unfinished_checkpoints(ckpt_dir, read_latest(ckpt_dir)))
    names = sorted(p.name for p in ckpt_dir.glob("iter_*") if p.is_dir())
    return ", ".join(n + (f" (unfinished save: no {LAYOUT_FILE})" if n in unfinished else "") for n in names) or "none"
