"""`raa score`'s checks of its own clip path and instruction, made before the endpoint check and the tool models
(graph/commands.py `score_command`).

`raa score missing.mp4 -i "..."` (a typo in the path, a folder, a blank instruction) first asked the endpoint
`GET /models` (up to RAA_ENDPOINT_WAIT_S, 60 s, against a server refusing connections) and loaded the preset's tool
models, then ran and exited 3 with the input's ineligible result; with a wrong endpoint or a tool that cannot load it
exited 2 for that instead, and the typo went unsaid.

Decisions where the issue was silent:
- The checks are the agent's own, in the order its quality node makes them: the instruction
  (`graph.nodes.quality.check_instruction`), then the clip path (`tools.video_errors.clip_file`: it exists, is a
  regular file, its stat can be read: a folder on the way that may not be searched, a name too long). Their words
  are the ones the run's reason then carries, and nothing else is judged here: a clip that is there but is no video,
  0 bytes or corrupt is the agent's to find, after the checks. A file this user may not read never gets here: the
  command's `click.Path` argument (readable by default) refuses it first, as a usage error (exit 2).
- The outcome of a bad input does not change, only its cost: still the run's ineligible result (exit 3; with
  `--json` the RewardResult, its fault of stage "quality" and its reason, which scripts read; a trace `raa trace`
  shows), not a new exit 2. Exit codes stay one per outcome, with or without `--json`, and a script that told a
  bad clip by exit 3 and its reasons still does. The agent still runs (its quality node ends at the same fault,
  before any model call or tool job): the result is the agent's, never one written here.
- What is skipped for a bad input: the endpoint check and the loading of the preset's tool models, the two
  waits before a run; the problem is said first on stderr ("error: ..."), then the result as usual.
- The settings are still read first (`settings_or_exit`): a bad or missing setting costs no wait and is the
  command's exit 2, as before.
- `raa score-batch` skips the same two waits when no clip it is to score passes these checks (`any_input_fine`:
  every clip missing, a wrong folder in the manifest), and then scores in its own process (worker processes would
  each load the tool models for runs that use none); the rows are the runs' ineligible results, as before. One clip
  that passes is enough for both waits, as ever: the checks stop at the first one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def input_problem(video: str, instruction: str, max_instruction_chars: int) -> str | None:
    """What makes the agent's run of clip `video` (the path the run gets) with `instruction` ineligible before any
    model call: the agent's instruction check's message, else the clip path's error (`clip_file`, the clip named
    `video`, as the run names it); None when both pass."""
    from graph.nodes.common import InputFault  # deferred: the agent's nodes are heavy to import
    from graph.nodes.quality import check_instruction
    from tools.video_errors import VideoError, clip_file

    try:
        check_instruction(instruction, max_instruction_chars)
        clip_file(Path(video), video)
    except (InputFault, VideoError) as exc:
        return str(exc)
    return None


def any_input_fine(items: list[dict[str, Any]], max_instruction_chars: int) -> bool:
    """Whether the run of some batch item to score (a valid manifest line, not a repeat of another) passes
    `input_problem`; False: every such run ends ineligible before any model call or tool job."""
    return any(input_problem(item["path"], item["instruction"], max_instruction_chars) is None for item in items
               if item["error"] is None and item.get("repeat_of") is None)
