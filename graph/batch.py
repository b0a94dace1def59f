"""Batch scoring of a manifest (`raa score-batch`): items, resume keys, output rows, the in-process runner.

A manifest is JSONL with rows `{"path", "instruction", ...}`; paths are relative to the manifest's
folder. Output rows: {"key", "line", "path", "instruction", "preset", "draw", "manifest": other manifest
fields, "result": RewardResult}, one per line, appended as runs finish. A NaN or infinite number (a manifest
field such as `"weight": NaN`, which Python's json reads) is written as null, so every row is strict JSON
(`tools.jsonl.strict_dumps`).

Decisions where the issue was silent:
- The key is sha256 of (resolved path, instruction, preset), and of the stage-cache draw when it is not
  0 (`AgentConfig.draw`; draw 0 keeps the keys of outputs written before draws existed); rows already in
  the output file are skipped, so an interrupted batch resumes where it stopped, and draws 0..N-1 of a
  manifest can share one output file (each row says its `draw`). A torn last line (crash mid-write) is
  cut off before the next append (`tools.jsonl.mend_tail`) and its item re-run; left in place, its item
  was missing from `raa eval compare` / `draws` (which skip and name damaged lines).
- A row keyed by a clip path that has moved since (its folder moved, a symlink left at the old name: its recorded
  "path" leads to the item's clip now, with the item's instruction, preset and draw) is re-keyed to the item's key,
  not scored again (`graph.batch_moved`); it scored every clip again and kept the old rows beside the new ones.
- `--retry-ineligible` first removes the rows of this run's items whose ineligibility another run could
  fix, and every run removes the rows of bad manifest lines before writing them again: which rows go is
  `graph.batch_resume`'s.
- The manifest (its lines as items, bad lines, comment lines, repeated clips, manifests refused before the batch
  starts) is `graph.batch_manifest`'s; its names are re-exported here. A bad line's row is written by
  `write_bad_lines`; a line repeating an earlier line's clip and instruction under another name or other fields
  takes that line's result in a row of its own (`write_repeats`): at once when the earlier line's row is in the
  output, else with it.
- `RowWriter` keeps, per stage and kind of the ineligible rows' first fault ("observe: transport"; "input" for a
  bad manifest line, `graph.batch_output.fault_kind`), a count and the first such reason;
  `raa score-batch` prints them after its counts, so a batch whose rows all failed for one reason
  (a misnamed manifest field, a dead endpoint) says so without opening the output.
- Each item is one `graph.api.arun_agent` call (never raises; an escaping error becomes an
  ineligible result) under a semaphore of `concurrency`; `run_batch` here runs them in this process,
  `graph.batch_procs.run_batch_processes` spreads them over worker processes.
- The output file (reading, locking, appending rows) is `graph.batch_output`'s; its names are re-exported here.
- The output is read and parsed once per run (`read_output`; it was read four times), before the lock (a file that
  is no output is refused without a lock file beside it), and again under the lock only if its `file_stamp` changed.
- Only the process that owns the output file writes to it (`RowWriter`), one `write` per row; a second
  `raa score-batch` into the same output while one runs is refused (`lock_output`, exit 2).
- Each scored item's row records its clip as its run found it ("clip": size, modification time in ns, inode and
  device, `clip_stamp`; the last two tell a moved row's file, `graph.batch_moved`), so that `--retry-ineligible` can tell a clip that changed since its video fault or its quality
  zero (it was still being written) from one that is broken for good (`graph.batch_retry`).
- Each row records its `scorer`: the model name, sampling temperature and endpoint it was scored with. A resume
  into an output whose scored or zero rows came from another scorer is refused (`other_scorer`): the skipped
  items would keep the old model's rewards beside the new model's, and one output would read as one
  scorer. The endpoint counts as the stage cache keys it (graph/cache.py: a served name says little about the
  weights, a fine-tune served under its base model's name on another server); without it a resume against
  another server under the same model name was taken as the same scorer. Fields a row lacks (written before
  they were recorded) are taken as matching (`same_scorer`). Ineligible rows and quality zeros (`quality_zero`) do not count (no model judged them: a quality zero
  refused a resume under another model, though any model gives it); rows written before `scorer` existed are
  taken as matching.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import Any

from graph.batch_manifest import (  # noqa: F401  (re-exported: the manifest is graph.batch_manifest's concern)
    FIELD_ALIASES,
    bad_line_key,
    bad_line_path,
    clip_identity,
    drop_repeats,
    is_bad_line_row,
    item_key,
    manifest_items,
    manifest_row_error,
    misplaced_paths,
    not_json_lines,
    path_identities,
    read_manifest,
    repeat_key,
    same_run,
)
from graph.batch_manifest_file import file_id
from graph.batch_output import (  # noqa: F401  (re-exported: the output file is graph.batch_output's concern)
    NOT_JSON,
    Output,
    OutputBusy,
    OutputWriteError,
    RowWriter,
    done_keys,
    file_stamp,
    kept_rows,
    lock_output,
    not_results,
    read_output,
)
from graph.clip_stamp import stamp_of
from graph.settings import BackboneSettings, TraceDurability
from tools.jsonl import strict_dumps

ROW_FIELDS = ("key", "line", "path", "instruction", "preset", "draw", "manifest")
"""Fields of a batch item copied into its output row (next to "result")."""


def scorer_of(settings: BackboneSettings) -> dict[str, Any]:
    """What a row records about who scored it (module docstring): model name, sampling temperature and endpoint
    (`graph.cache_keys.shown_endpoint` of the base URL: no credentials, one server written two ways is one)."""
    from graph.cache_keys import shown_endpoint

    endpoint = None if settings.base_url is None else shown_endpoint(settings.base_url)
    return {"model": settings.model, "temperature": settings.temperature, "endpoint": endpoint}


def same_scorer(theirs: dict[str, Any], ours: dict[str, Any]) -> bool:
    """Whether two `scorer_of` records name one scorer: equal in every field both hold (a row written before a
    field was recorded, such as "endpoint", matches on the others). Endpoints compare as `shown_endpoint` shows
    them: a row written before it recorded a key in the URL's query itself, not its digest."""
    from graph.cache_keys import shown_endpoint

    def field(record: dict[str, Any], k: str) -> Any:
        value = record[k]
        return shown_endpoint(value) if k == "endpoint" and isinstance(value, str) else value

    return all(field(theirs, k) == field(ours, k) for k in theirs.keys() & ours.keys())


def scored_by_other(row: dict[str, Any], scorer: dict[str, Any] | None) -> bool:
    """Whether `row` (an output row, or a `raa eval reward` row) records a scorer other than `scorer` (`same_scorer`);
    False for a row that records none or no `scorer` given: a refusal is then the same scorer's
    (`graph.batch_retry.fault_retryable`)."""
    theirs = row.get("scorer")
    return scorer is not None and isinstance(theirs, dict) and not same_scorer(theirs, scorer)


def _scorer_text(scorer: dict[str, Any], other: dict[str, Any]) -> str:
    """"model 'M' at temperature T", with " at endpoint URL" when the two records name different endpoints."""
    text = f"model {scorer.get('model')!r} at temperature {scorer.get('temperature')}"
    endpoints = scorer.get("endpoint"), other.get("endpoint")
    return text + (f" at endpoint {endpoints[0]}" if "endpoint" in scorer and "endpoint" in other
                   and endpoints[0] != endpoints[1] else "")


def quality_zero(result: dict[str, Any]) -> bool:
    """True for a zero the quality check gave (`graph.nodes.quality`: under 2 frames, uniform or unusable content):
    status "zero", no T, first reason "quality: ..."; no model judged the clip. `result` is a row's "result" (or a
    `raa eval reward` row, which holds the same fields)."""
    reasons = result.get("reasons")
    return (result.get("status") == "zero" and result.get("T") is None and isinstance(reasons, list)
            and bool(reasons) and str(reasons[0]).startswith("quality: "))


def scorer_conflict(source: str, rows: Iterable[tuple[str, dict[str, Any], Any]],
                    scorer: dict[str, Any]) -> str | None:
    """Why `source` cannot take rows of `scorer`: its rows (where, result fields, recorded scorer) with a reward a
    model judged (scored or zero, not a `quality_zero`) recorded by another scorer, the first named; None when
    there is none."""
    others = [(where, theirs) for where, result, theirs in rows
              if result.get("status") in ("scored", "zero") and not quality_zero(result)
              and isinstance(theirs, dict) and not same_scorer(theirs, scorer)]
    if not others:
        return None
    where, theirs = others[0]
    return (f"{source} holds {len(others)} reward row(s) scored by {_scorer_text(theirs, scorer)} (first: {where}); "
            f"this run uses {_scorer_text(scorer, theirs)}. Its skipped items would keep those rewards beside this "
            "run's: write to another output")


def other_scorer(output: Output, scorer: dict[str, Any]) -> str | None:
    """`scorer_conflict` of the score-batch output `output` (None without the file)."""
    rows = [(f"line {number}", row["result"], row.get("scorer"))
            for number, row in enumerate(output.values, start=1)
            if isinstance(row, dict) and isinstance(row.get("result"), dict)]
    return scorer_conflict(str(output.path), rows, scorer)


def clip_stamp(path: str) -> dict[str, int] | None:
    """What a row records of its clip when its run starts ("clip": size, modification time in ns as a run's state
    stamps them, `graph.clip_stamp.stamp_of`, and the file's inode and device, `file_id`), None when it cannot be
    read; `graph.batch_retry` retries a video fault once the clip's size or modification time differ from it
    (`stamp_unchanged`), `graph.batch_moved` takes a row for a clip only of the very file (`same_file`)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return {**stamp_of(st), **file_id(st)}


def stamp_unchanged(recorded: Any, now: dict[str, int]) -> bool:
    """Whether the clip stamped `now` (`clip_stamp`) has the size and modification time a row `recorded`: its content
    is taken as unchanged (a file replaced by a copy with its times kept, `cp -p`, or moved to another disk, is
    unchanged; one rewritten within one tick of the clock at the same size is not told apart)."""
    return isinstance(recorded, dict) and all(recorded.get(k) == now[k] for k in ("size", "mtime_ns"))


def same_file(recorded: Any, now: dict[str, int]) -> bool:
    """Whether the clip stamped `now` is the very file a row `recorded` (`graph.batch_moved`): `stamp_unchanged`, and
    the inode and device it recorded, where it recorded them (rows written before did not: size and modification time
    only). A copy with its times kept (`cp -p`, a folder moved to another disk) is another file, as is the same file
    once a reboot or remount renumbered its device; one made after the recorded file was deleted may reuse its inode,
    on the same device."""
    return stamp_unchanged(recorded, now) and all(recorded[k] == now[k] for k in ("ino", "dev") if k in recorded)


def result_line(item: dict[str, Any], result: Any, clip: dict[str, int] | None = None,
                fields: dict[str, Any] | None = None) -> str:
    """The output row of `item` scored as `result` (a RewardResult), as one JSON line without newline; `clip`:
    the item's `clip_stamp` taken before its run (recorded as "clip" when given); `fields`: more fields of the row
    (`manifest_fields`)."""
    row = {k: item[k] for k in ROW_FIELDS}
    if clip is not None:
        row["clip"] = clip
    row.update(fields or {})
    row["result"] = result.model_dump(mode="json")
    return strict_dumps(row)


def build_batch_agent(settings: BackboneSettings, preset: str, checkpointer: Any, chat_model: Any,
                      tools: Any = None, frame_store: Any = None, draw: int = 0) -> Any:
    """The agent a batch runs: `preset` with `settings.inspect_mode`, a Backbone from `settings` around
    `chat_model` with the on-disk stage cache (`settings.cache_path`), `tools` (None: the default lazy
    Toolbox), `frame_store` (None: its own), stage-cache `draw` (`AgentConfig.draw`). Raises ValueError for
    an unknown preset."""
    from graph import build_reward_agent  # deferred: the agent graph is heavy to import
    from graph.backbone import Backbone
    from graph.cache import StageCache

    backbone = Backbone.from_settings(settings, model=chat_model, cache=StageCache(settings.cache_path))
    return build_reward_agent(settings.agent_config(preset).with_overrides(draw=draw), backbone=backbone,
                              checkpointer=checkpointer, settings=settings, tools=tools, frame_store=frame_store)


def write_bad_lines(items: list[dict[str, Any]], writer: RowWriter) -> list[dict[str, Any]]:
    """Append the ineligible row (no run; an "input" fault of stage "manifest", reason "manifest: input: ...") of
    every bad manifest line among `items`, recording its manifest's file (`manifest_fields`); return the other items,
    the ones to score."""
    from graph.run_results import fault_result
    from graph.schemas import Fault

    for item in items:
        if item["error"] is not None:
            fault = Fault(stage="manifest", kind="input", message=item["error"])
            writer.write(result_line(item, fault_result(item["preset"], fault), fields=manifest_fields(item)),
                         "ineligible")
    return [item for item in items if item["error"] is None]


def manifest_fields(item: dict[str, Any]) -> dict[str, Any]:
    """What the row of a bad line or a repeat line records of its manifest besides its key: "manifest_file", its
    resolved path, "manifest_file_id", the file's identity (`graph.batch_manifest_file.file_id`), and
    "manifest_folder_id", its folder's, where `item` holds them (`graph.batch_manifest` docstring)."""
    return {k: item[k] for k in ("manifest_file", "manifest_file_id", "manifest_folder_id") if item.get(k) is not None}


def write_repeats(items: list[dict[str, Any]], kept: dict[str, dict[str, Any]],
                  writer: RowWriter) -> list[dict[str, Any]]:
    """Write the row of every line among `items` that repeats an earlier line's clip and instruction under other
    fields ("repeat_of", `graph.batch_manifest.drop_repeats`): the earlier line's row with this line's fields,
    "repeat_of" its key, "manifest_file" its manifest's resolved path and "manifest_file_id" its file
    (`manifest_fields`: whose row it is among manifests sharing the output, `graph.batch_repeat_rows`), at once when that row is among `kept` (the output's rows that stay, by key), else when
    `writer` writes it (`RowWriter.follow`); no run of its own. Return the other items."""
    for item in items:
        if (source := item.get("repeat_of")) is not None:
            fields = {**{k: item[k] for k in ROW_FIELDS}, "repeat_of": source,
                      "manifest_file": item["manifest_file"], **manifest_fields(item)}
            if source in kept:
                writer.write_repeat(kept[source], fields)
            else:
                writer.follow(source, fields)
    return [item for item in items if item.get("repeat_of") is None]


async def score_item(agent: Any, item: dict[str, Any], durability: TraceDurability,
                     claim_max_age_s: float) -> Any:
    """RewardResult of one batch item (a valid manifest line; never raises); `claim_max_age_s`:
    `BackboneSettings.foreign_claim_max_age_s`."""
    from graph.api import arun_agent, new_run_id

    return await arun_agent(agent, item["path"], item["instruction"], new_run_id(), item["preset"],
                            durability=durability, claim_max_age_s=claim_max_age_s)


async def run_batch(agent: Any, items: list[dict[str, Any]], writer: RowWriter, concurrency: int,
                    durability: TraceDurability, claim_max_age_s: float) -> dict[str, int]:
    """Score `items` in this process, at most `concurrency` runs at once; rows are written as runs finish. A run
    cancelled as the batch stops counts in `RowWriter.unfinished`. An error of one run (a trace database or stage cache
    that cannot be used, a row that cannot be written) cancels the others, and leaves once they ended."""
    sem = asyncio.Semaphore(concurrency)

    async def one(item: dict[str, Any]) -> None:
        async with sem:
            clip = clip_stamp(item["path"])
            result = None
            try:
                result = await score_item(agent, item, durability, claim_max_age_s)
            finally:  # cancelled, or a Ctrl-C raised inside it, as the batch stops: no result (it never raises else)
                writer.unfinished += result is None
        writer.write(result_line(item, result, clip), result.status)

    runs = [asyncio.ensure_future(one(item)) for item in write_bad_lines(items, writer)]
    try:
        await asyncio.gather(*runs)
    finally:  # a run's error (or the batch cancelled) leaves only once no other run goes on: the caller closes the
        for run in runs:  # trace database next, under which a run still going failed to write its trace
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
    return writer.counts
