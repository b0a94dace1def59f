"""The rows `raa eval compare` pairs (`read_results`): a score-batch output's usable rows keyed by the pairing field,
of one draw and preset, with the rows that contradict each other refused (`CompareError`). The rules are argued in
`evals.compare`'s module docstring. Split from evals/compare.py (its size)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evals.batch_rows import (
    Side,
    batch_problem,
    read_results_file,
    row_draw,
    row_preset,
    score_batch_row,
    several_draws,
)
from evals.pair_keys import PairKey, pair_key
from evals.path_pairs import two_names
from tools.jsonl import LineError, SkippedLine, no_usable_row, usable_rows


class CompareError(ValueError):
    """A results file that cannot be paired (missing, malformed, no pairing field, duplicate keys)."""



def _parsed(where: str, row: Any, pair_by: str,
            identity: Callable[[Any], str]) -> tuple[str, dict[str, Any], PairKey | None]:
    """(where, row, pairing key) of one line, the key None for a row of a manifest line that named no clip;
    raises `LineError` for a line that is no usable row (module docstring: it is skipped and reported).
    `identity`: `graph.batch.path_identities`' (a path's key)."""
    from graph.batch import is_bad_line_row

    row = score_batch_row(where, row)
    if is_bad_line_row(row):
        return where, row, None
    manifest = row.get("manifest") or {}
    if not isinstance(manifest, dict):
        raise LineError(f"{where}: 'manifest' is not an object (the manifest line's fields)")
    key = manifest.get(pair_by, row.get(pair_by))
    if key is None:
        raise LineError(f"{where}: no {pair_by!r} field to pair by (choose one with --pair-by)")
    if pair_by == "path":  # a link and its target: one clip
        return where, row, identity(key)
    return where, row, pair_key(where, key, pair_by)


def read_results(path: Path, pair_by: str, draw: int | None = None, identity: Callable[[Any], str] | None = None,
                 preset: str | None = None, side: Side = "both") -> tuple[dict[PairKey, dict[str, Any]], list[dict[str, Any]],
                                                     list[SkippedLine]]:
    """Rows of a `raa score-batch` output keyed by `row["manifest"][pair_by]` (or a top-level field), the rows of
    manifest lines that named no clip (not keyed), and the lines skipped as no usable row; with `draw` / `preset`,
    only the rows of that draw / preset (`side`: whose draw `draw` is, `evals.batch_rows.DRAW_OPTION`). Raises
    CompareError for a missing file, one whose every line is skipped, and rows that contradict each other (module
    docstring)."""
    from graph.batch import path_identities, same_run

    path, identity = Path(path), identity or path_identities()
    problem, data = read_results_file(path)  # one look: a file read whole, or why not
    if problem:
        raise CompareError(problem)
    parsed, skipped = usable_rows(path, lambda where, row: _parsed(where, row, pair_by, identity), data=data)
    if skipped and not parsed:
        raise no_usable_row(path, skipped, CompareError)
    rows: dict[PairKey, dict[str, Any]] = {}
    lines: dict[PairKey, str] = {}  # the line of each key's row, named when the key comes again
    bad: list[dict[str, Any]] = []
    if problem := batch_problem(path, {(row_preset(row), row_draw(row, where)) for where, row, _ in parsed},
                                 draw, preset, skipped, side):
        raise CompareError(problem)
    named: set[PairKey] = set()  # files two links name as two clips (`two_names`): their rows keyed by their own path
    drawn_at: dict[tuple[str, Any], int] = {}  # the draw of each clip's rows: a clip in two draws is counted twice
    for where, row, key in parsed:
        drawn = row_draw(row, where)
        if (draw is not None and drawn != draw) or (preset is not None and row_preset(row) != preset):
            continue
        if key is None:
            bad.append(row)
            continue
        key = str(row.get("path")) if key in named and row.get("path") != key else key
        if (key in rows and pair_by == "path" and row_draw(rows[key], where) == drawn
                and not same_run(rows[key], row) and two_names(key, rows[key], row)):
            named.add(key)
            earlier = rows.pop(key)
            rows[str(earlier.get("path"))] = earlier
            lines[str(earlier.get("path"))] = lines.pop(key)
            key = str(row.get("path"))
        if key in rows:
            if same_run(rows[key], row):  # a repeated line's row and its line's: the line's own stays
                if not row.get("repeat_of"):
                    rows[key], lines[key] = row, where
                continue
            if (first := row_draw(rows[key], where)) != drawn:
                raise CompareError(several_draws(where, f"{pair_by} {key!r}", first, drawn))
            raise CompareError(f"{where}: {pair_by} {key!r} appears twice (first at {lines[key]})")
        clip = (identity(row["path"]), row.get("instruction"))  # under score-batch's own key, one per draw
        if (first := drawn_at.setdefault(clip, drawn)) != drawn:
            raise CompareError(several_draws(where, f"clip {row['path']!r} ({row.get('instruction')!r})", first, drawn))
        rows[key], lines[key] = row, where
    return rows, bad, skipped
