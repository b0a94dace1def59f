"""Which prompts a checkpoint's data position counts in: ``prompts.json`` beside each checkpoint.

The saved data position (`training.data.PromptStream.position`) indexes the seeded order of the prompts the
run had; a resume whose prompt file gained, lost or changed prompts went on from that position in another
order without a word. Each checkpoint now records the number of prompts and a SHA-256 of them, and a resume
whose prompts differ prints a warning naming the file and both counts, as a resume with changed settings
does (a warning, not a refusal: adding prompts to a run is a legitimate choice). A checkpoint saved before
this file is not checked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tools.jsonl import parsed_file, write_text_atomic
from training.config import PromptSpec

PROMPTS_FILE = "prompts.json"


def prompt_stamp(prompts: Sequence[PromptSpec], dataset_file: str | None) -> dict[str, Any]:
    """The record of ``prompts`` (config prompts, then ``dataset_file``'s) a checkpoint keeps."""
    text = json.dumps([asdict(p) for p in prompts], sort_keys=True, default=str)
    return {"dataset_file": dataset_file, "count": len(prompts),
            "sha256": hashlib.sha256(text.encode()).hexdigest()}


def write_prompt_stamp(folder: Path, stamp: dict[str, Any]) -> None:
    """Write ``stamp`` to ``folder/prompts.json`` (atomically: `tools.jsonl.write_text_atomic`)."""
    write_text_atomic(folder / PROMPTS_FILE, json.dumps(stamp) + "\n")


def prompt_change_warning(folder: Path, stamp: dict[str, Any]) -> str | None:
    """A warning when the prompts of checkpoint ``folder`` differ from ``stamp`` (this launch's); None when they
    are the same or the checkpoint has no readable record."""
    try:
        saved = parsed_file(folder / PROMPTS_FILE)
        count, digest = int(saved["count"]), str(saved["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if (count, digest) == (stamp["count"], stamp["sha256"]):
        return None
    file = stamp["dataset_file"] or "the config's dataset"
    what = (f"had {count} prompts and has {stamp['count']} now" if count != stamp["count"]
            else f"has the same {count} prompts in number but their content changed")
    return (f"warning: resuming {folder.name}: the training prompts ({file}) {what}; the saved data position "
            "counts positions of the old prompts' order, so the run goes on in a new order (restore the old "
            "prompt file to continue the same stream)")
