"""Two links to one file under `raa eval compare --pair-by path` (`evals.compare`, which pairs rows by the path they
resolve to, `graph.batch.clip_identity`, so that a row naming a clip through a link pairs with one written before rows
named links, naming the file itself).

Two clips of the same bytes are one file in a Hugging Face cache (two names in `snapshots/`, one `blobs/<sha>`): the
two rows of such clips with their own instructions resolved to one path, and the comparison stopped at "path ...
appears twice". Decisions where the issue was silent:
- Two rows of one draw whose paths are two links to one file, neither the file itself, are two clips, keyed by their
  own paths (`two_names`; `evals.compare_rows.read_results` keys every later row resolving there by its own path too).
- A row of the other side keyed by the file (it alone names it there) pairs with the row of this side naming its own
  path, when there is one (`by_name`); a row naming the file itself (written before rows named links) pairs with
  neither link's row: which of the two clips it was, the file does not say.
- Each folder is resolved once per comparison (`graph.batch.path_identities`), not every row's path in full.
"""

from __future__ import annotations

from typing import Any

from evals.pair_keys import PairKey


def two_names(key: PairKey, first: dict[str, Any], row: dict[str, Any]) -> bool:
    """True when two rows whose paths resolve to `key` name it by two links (two clips of one file's bytes, a Hugging
    Face cache's two names of one blob), neither by the file itself (a row written before rows named links)."""
    return first.get("path") != row.get("path") and key not in (first.get("path"), row.get("path"))


def by_name(rows: dict[PairKey, dict[str, Any]], other: dict[PairKey, dict[str, Any]]
            ) -> dict[PairKey, dict[str, Any]]:
    """`rows` (`read_results`' of one side, `--pair-by path`), each row the other side keys by the row's own path
    (one of two links to one file there, `two_names`) but `rows` does not keyed so too: the same clip."""
    moved = {k: str(row.get("path")) for k, row in rows.items()
             if k not in other and str(row.get("path")) in other and str(row.get("path")) not in rows}
    return {moved.get(k, k): row for k, row in rows.items()}
