"""Which rows of a `raa score-batch` output go before a resume runs (`graph.batch` describes rows and keys).

- `--retry-ineligible` first removes the rows of this run's items whose ineligibility another run could
  fix (`retryable`: anything but input and video faults, e.g. a dead endpoint, a wrong model name, a tool
  crash, and a clip "not found" that exists now), so a batch scored against a broken setup is redone after
  the fix without deleting the good rows, nor rows of other draws, presets or manifests in the same output
  (`stale_keys`, `drop_rows`).
- The rows of bad manifest lines are removed on every run (`stale_keys`) and written again for the lines
  still bad (`graph.batch.write_bad_lines`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graph.batch import bad_line_key
from tools.jsonl import keep_rows

FINAL_FAULTS = ("input", "video")
"""Fault kinds that fail again on a rerun: a bad manifest line or instruction, an undecodable clip."""


def retryable(result: dict[str, Any], path: str | None = None) -> bool:
    """True for an ineligible result (a row's "result") that another run could turn into a reward: some
    reason is not an input or video fault (a transport error, a timeout, a refused request, an invalid
    reply, a tool fault, a dead worker), or it is "video file not found" and the row's clip `path` is a
    file now (a manifest scored before its clips were all rendered). Reasons read "stage: kind: message"
    or "input: message"."""
    if result.get("status") != "ineligible":
        return False
    for reason in result.get("reasons") or []:
        parts = str(reason).split(": ", 2)
        if parts[0] not in FINAL_FAULTS and (len(parts) < 3 or parts[1] not in FINAL_FAULTS):
            return True
        if (len(parts) == 3 and parts[1] == "video" and parts[2].endswith("video file not found")
                and path is not None and Path(path).is_file()):
            return True
    return False


def stale_keys(manifest: Path, items: list[dict[str, Any]], *, retry_ineligible: bool) -> tuple[set[str], set[str]]:
    """(keys whose rows go in any case, keys whose rows go when retryable) before `items` of `manifest` run:
    the `bad_line_key` of every line (a line still bad gets its row back, a line fixed since is scored;
    either way one row per line), and with `retry_ineligible` the keys of `items` themselves. Rows of
    other items (other draws, presets or manifests sharing the output) are never touched."""
    bad = {bad_line_key(manifest, it["line"], it["preset"], it["draw"]) for it in items}
    return bad, ({it["key"] for it in items} if retry_ineligible else set())


def drop_rows(out: Path, always: set[str], retryable_keys: set[str]) -> int:
    """Rewrite the output file without the rows keyed in `always`, and without the retryable rows keyed in
    `retryable_keys` (`stale_keys`); returns how many retryable rows were dropped. Torn lines go too. The
    file is replaced in one rename (an interruption leaves the old file or the new one), and only when a
    line goes (`tools.jsonl.keep_rows`)."""
    retried = 0

    def keep(row: Any) -> bool:
        nonlocal retried
        key = row.get("key") if isinstance(row, dict) else None
        result = row.get("result") if isinstance(row, dict) else None
        if key in always:
            return False
        path = row.get("path") if isinstance(row, dict) and isinstance(row.get("path"), str) else None
        if key in retryable_keys and isinstance(result, dict) and retryable(result, path):
            retried += 1
            return False
        return True

    keep_rows(out, keep)
    return retried
