"""Rows of a `raa score-batch` output as the evaluation readers take them (`evals.compare`, `evals.draws`): which
line is a usable row (`score_batch_row`: a ``result`` whose status and reward agree, `checked_reward`; an integer
draw, `row_draw`; a string path and instruction), a file that is none (`read_results_file`), a row's preset
(`row_preset`, `shown_preset`), who scored it (`scorer_label`, `scored_differently`), its reward
(`eligible_reward`), and a file that holds no one batch to compare (`batch_problem`, `several_draws`,
`several_presets`). The rules
are argued in `evals.compare`'s module docstring. Split from evals/compare.py (its size)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from evals.table_rows import MAX_FLOAT, finite, row_faults
from tools.file_kinds import read_or_problem
from tools.jsonl import LineError, SkippedLine, skipped_listing


def row_draw(row: dict[str, Any], where: str) -> int:
    """The stage-cache draw of a score-batch row (0 for rows written before rows recorded it)."""
    draw = row.get("draw", 0)
    if isinstance(draw, bool) or not isinstance(draw, int):
        raise LineError(f"{where}: draw must be an integer, got {draw!r}")
    return draw


def row_preset(row: dict[str, Any]) -> str:
    """The preset a score-batch row records ("" when it records none: not "None", the text of the missing value);
    a row whose preset is no string is no usable row (`score_batch_row` skips its line)."""
    preset = row.get("preset")
    return preset if isinstance(preset, str) else ""


def shown_preset(preset: str) -> str:
    """A preset as printed: "(none)" for rows that record none."""
    return preset or "(none)"


def read_results_file(path: Path) -> tuple[str | None, bytes]:
    """(None, the bytes of the score-batch output at `path`), or (why it cannot be read as a results file: missing; a
    folder, a FIFO, named from what is there; b""), from one look (`tools.file_kinds.read_or_problem`). `evals.draws`
    and `evals.compare_rows` asked whether it was a file (a stat), then read it by name: removed in between, the
    read's bare FileNotFoundError escaped, not "results file not found". The one check of a results file (a look
    without the read, `results_file_problem`, was left to tests alone and removed)."""
    return read_or_problem(path, "results file", _not_results(path))


def _not_results(path: Path) -> Callable[[str], str]:
    """The words for `path` when it is a `kind` of file other than a regular one (`read_results_file`)."""
    return lambda kind: f"{path} is {kind}, not a results file (give the file `raa score-batch --out` wrote)"


def score_batch_row(where: str, row: Any) -> dict[str, Any]:
    """``row`` when it is a usable score-batch row: a ``result`` object whose status and reward agree
    (`checked_reward`), an integer draw, a string preset or none, and a string path and instruction unless it is a
    bad manifest line's row;
    `LineError` (the line is skipped) otherwise, naming a row of `raa eval
    reward` as one (its fields are at the top level). Shared with `evals.draws`."""
    if not isinstance(row, dict) or not isinstance(row.get("result"), dict):
        whose = (" but a row of `raa eval reward` (its results.jsonl); this command reads `raa score-batch` "
                 "outputs" if isinstance(row, dict) and {"preset", "status", "reward"} <= row.keys() else "")
        raise LineError(f"{where}: not a score-batch row (no 'result' object){whose}")
    checked_reward(row["result"], where, LineError)
    try:
        row_faults(row["result"])
    except ValueError:
        raise LineError(f"{where}: 'faults' is not a list of fault records (stage, kind, message)") from None
    row_draw(row, where)
    if row.get("preset") is not None and not isinstance(row["preset"], str):  # a hand edit's 5 read as preset "5"
        raise LineError(f"{where}: preset must be a string (or null: none recorded), got {row['preset']!r}")
    from graph.batch import is_bad_line_row

    if not is_bad_line_row(row):  # score-batch writes both as text; a hand edit's null or 5 named a clip "None", "5"
        for name in ("path", "instruction"):
            if not isinstance(row.get(name), str):
                raise LineError(f"{where}: no string {name!r} to name its clip by, got {row.get(name)!r}")
    return row


def checked_reward(result: dict[str, Any], where: str, error: type[ValueError]) -> float | None:
    """The reward of a score-batch row's ``result`` (None for status ``ineligible``); raises `error` naming
    `where` (``PATH:N``) when the status and the reward disagree (`evals.compare`'s module docstring)."""
    status, value = result.get("status"), result.get("reward")
    if status == "ineligible":
        if value is not None:
            raise error(f"{where}: an ineligible row carries a reward ({value!r}); expected reward null")
        return None
    if status not in ("scored", "zero"):
        raise error(f"{where}: status {status!r} is not one of scored, zero, ineligible")
    if not finite(value):
        got = f"reward {value!r}" if "reward" in result else "no reward"
        raise error(f"{where}: a row with status {status!r} needs a finite number as its reward, got {got} "
                    "(an unscored row has status 'ineligible' and reward null)")
    if not 0.0 <= value <= 1.0:
        raise error(f"{where}: reward {value!r} is outside 0..1 (no reward of the agent is)")
    if status == "zero" and value != 0:
        raise error(f"{where}: a row with status 'zero' has reward {value!r}; expected 0")
    return float(value)


def eligible_reward(result: dict[str, Any]) -> float | None:
    """The reward of a score-batch row's ``result`` as a float, None when it has none (ineligible) or it is
    not a finite number (a whole number too large for a float included: `evals.table_rows.finite`)."""
    value = result.get("reward")
    if not finite(value) or abs(value) > MAX_FLOAT:
        return None
    return float(value)


def scorer_label(row: dict[str, Any]) -> str:
    """Who scored a score-batch row: "preset · model @ T=temperature", or "preset · model unrecorded"."""
    preset, scorer = row.get("preset") or "preset unrecorded", row.get("scorer")
    if not isinstance(scorer, dict):
        return f"{preset} · model unrecorded"
    return f"{preset} · {scorer.get('model')} @ T={scorer.get('temperature')}"


def scored_differently(row_a: dict[str, Any], row_b: dict[str, Any]) -> bool:
    """True when two rows were scored by other presets, or by recorded scorers that differ (`graph.batch.same_scorer`;
    an unrecorded one is not "different")."""
    if row_a.get("preset") != row_b.get("preset"):
        return True
    from graph.batch import same_scorer

    sa, sb = row_a.get("scorer"), row_b.get("scorer")
    return isinstance(sa, dict) and isinstance(sb, dict) and not same_scorer(sa, sb)


def several_draws(where: str, what: str, first: int, drawn: int) -> str:
    """Why `what` at line `where` stops a comparison: it is in draws `first` and `drawn` (pooled, one clip would
    count once per draw)."""
    return (f"{where}: {what} appears in draws {first} and {drawn}: the file holds several draws of its manifest; "
            "compare one draw (--draw K), or draw K of A with draw J of B (--draw K --draw-b J; two draws of this "
            "file differ by draw noise, not the videos), or summarise the draws with `raa eval draws`")


def several_presets(path: str, presets: list[str], doing: str, pooled: str) -> str:
    """Why a file of rows of several `presets` (sorted) stops `doing` (": compare", ": summarise"): pooled, `pooled`.
    Shared by `batch_problem` and `evals.draws`, so both name the presets and the option alike."""
    unnamed = "; --preset '' for the rows without one" if "" in presets else ""
    return (f"{path} holds presets {', '.join(map(shown_preset, presets))}{doing} one preset at a time "
            f"(--preset NAME{unnamed}); pooled, {pooled}")


def no_preset_rows(path: Path | str, preset: str, presets: list[str]) -> str:
    """Why `path`, whose rows are of `presets` (sorted), has nothing of `preset`: one wording for `raa eval compare`
    (`batch_problem`) and `raa eval draws` (it said "has no rows of preset X (it holds: ...)")."""
    return f"{path}: no row of preset {preset!r} (presets found: {', '.join(map(shown_preset, presets)) or 'none'})"


Side = Literal["both", "A", "B"]
"""Which file(s) of `raa eval compare` a draw was chosen for: both (``--draw`` alone), or A's (``--draw``) and B's
(``--draw-b``) apart."""

DRAW_OPTION: dict[Side, str] = {
    "both": "--draw picks that draw of both files; --draw K --draw-b J compares draw K of A with draw J of B (the same "
            "clips in two draws differ by the reward's draw noise, which `raa eval draws` measures, as well as by the "
            "videos)",
    "A": "--draw picks A's draw (--draw-b B's)",
    "B": "--draw-b picks B's draw (--draw A's)",
}
"""What "no row of draw K" says of the option that chose K (`batch_problem`): with ``--draw-b`` given, ``--draw`` is
A's alone (it said "--draw picks that draw of both files" of B's missing draw too)."""


def batch_problem(path: Path, held: set[tuple[str, int]], draw: int | None, preset: str | None,
                  skipped: list[SkippedLine], side: Side = "both") -> str | None:
    """Why the rows of `path`, of batches `held` ((preset, draw) of each row), give no one batch to compare with
    `draw` / `preset` (None: any): several presets (of draw `draw`) without the option (pooled, they read as one
    figure; `evals.compare` module docstring), or a draw, preset or the two together that the file does not hold. None when they do.
    `side`: the file(s) `draw` was chosen for (`DRAW_OPTION`)."""
    presets = sorted({p for p, _ in held})
    if preset is None and len(drawn := sorted({p for p, d in held if draw in (None, d)})) > 1:
        at = "" if draw is None else f" at draw {draw}"
        return several_presets(f"{path}", drawn, f"{at}: compare", "their rewards would read as one comparison") + (
            "; --preset P --preset-b Q compares preset P of A with preset Q of B (two presets of one file: give it as "
            "both, with --pair-by path, as score-batch's own key hashes the preset)")
    if preset is not None and preset not in presets:
        return no_preset_rows(path, preset, presets)
    if draw is not None and draw not in {d for _, d in held}:
        found = ", ".join(map(str, sorted({d for _, d in held}))) or "none"
        maybe = (f"; {len(skipped)} line(s) were skipped as no usable row and may have held it:"
                 f"{skipped_listing(skipped)}") if skipped else ""
        return f"{path}: no row of draw {draw} (draws found: {found}): {DRAW_OPTION[side]}" + maybe
    if preset is not None and draw is not None and (preset, draw) not in held:
        found = ", ".join(str(d) for p, d in sorted(held) if p == preset)
        return f"{path}: no row of preset {preset!r} at draw {draw} (draws of preset {shown_preset(preset)}: {found})"
    return None
