"""Reward variation across draws: how much does the agent's reward for one clip move when its stages are
sampled again (a temperature above 0 and `AgentConfig.draw`)?

``raa eval draws RESULTS.jsonl`` reads a ``raa score-batch`` output that holds draws 0..N-1 of a manifest
(``raa score-batch M --out RESULTS.jsonl --draw k`` for each k), groups its rows by clip (path, instruction,
preset) and reports, over the clips with at least two eligible draws:

    clip i, eligible rewards r_i1 .. r_ik (k >= 2)
    m_i = (1/k) sum_j r_ij                      the clip's mean reward
    w_i = (1/k) sum_j (r_ij - m_i)^2            its variance over draws (population)
    W = mean_i w_i                              draw noise (within_std = sqrt(W))
    B = population variance of m_i over clips   clip-to-clip signal (between_std = sqrt(B))
    noise_share = W / (W + B)                   share of the reward variance that is draw noise
    range_i = max_j r_ij - min_j r_ij           (mean_range, max_range)

With the same number of draws per clip, W + B is the variance of all those rewards together, so
``noise_share`` is the part of it a GRPO group would see as noise; 0 means the draws agree, 1 means the
clips cannot be told apart by their reward.

Decisions where the issue was silent:

* An ineligible draw (reward None) is never a number: it is left out and counted (``ineligible_rows``). A
  clip with fewer than two eligible draws is left out of the statistics and counted (``clips_single``).
* A line that is no usable row is skipped and reported (``skipped_lines``: ``PATH:N`` and the reason;
  `tools.jsonl.usable_rows`), and the other rows are summarised: not UTF-8 or not JSON, no ``result``
  object, a draw that is not an integer, no string path or instruction (it was a clip called "None"), or a status
  and reward that disagree (a "scored" row whose reward is a string or missing, an ineligible row with a reward, a
  "zero" row with a positive reward, another status, a reward outside 0..1: ``evals.batch_rows.checked_reward``;
  such a row was once silently one more ineligible draw, then refused the whole file). A file whose every line is
  skipped is an error listing them, and `raa eval draws` exits 2 when lines were skipped and no clip with two
  eligible draws is left.
* ``outage_rows`` counts the ineligible draws an outage of the reward machinery caused (their ``faults``,
  `graph.schemas.Fault.outage`: ``--retry-ineligible`` fills them), and ``outage_draws`` the draws holding them
  (`raa eval draws` prints a `raa score-batch ... --preset P --draw K --retry-ineligible` command per draw,
  `evals.eval_views.refill_lines`, as `raa eval compare` does: the count was said without the command, then with
  one naming no preset); the others are the agent's own (a reply it could not use), which vary from draw to draw as
  rewards do. Both were one count.
* ``most_variable`` names the draw of each eligible reward (``draws``) and the draws without one
  (``ineligible_draws``; ``outage_draws`` those an outage took), and `raa eval draws` shows an ineligible draw in its
  place ("0.200 ⊥ 0.900", "⊥(outage)" for an outage's, which `--retry-ineligible` fills: both read "⊥"): the
  "Rewards by draw" column left it out, so the rewards of draws 0 and 2 read as those of draws 0 and 1.
* ``status_flips``: clips whose eligible draws do not share one status (``scored`` against ``zero``: the gate
  or the quality check decided differently), the draw-to-draw change that moves a reward most.
* Rows of manifest lines that named no clip (score-batch's "<line N>" rows, ``graph.batch.is_bad_line_row``)
  are counted (``bad_lines``, also in ``rows`` and ``ineligible_rows``) and are no clip: they were summarised
  as one more clip with < 2 eligible draws, and two manifests' bad line 2 in one output were "draw 0 appears
  twice" (as in ``evals.compare``).
* A clip is told apart by its resolved path (`graph.batch.clip_identity`, as score-batch's key): rows naming it
  through a link (as the manifest gave it) and rows written before rows did so (its target) are one clip, shown
  under the name its last row gives (they were two clips of fewer draws each).
* A row written before rows recorded their draw counts as draw 0 (such outputs hold draw 0 only). Two rows
  of one clip and draw (two files concatenated) are an error naming the line, as in ``evals.compare``; the row of a
  line repeating an earlier line's clip under another id (``repeat_of``, `graph.batch.same_run`) holds that line's
  result again and is left out (it was "draw 0 appears twice"); one whose result differs is of another run (an error).
* One summary covers one preset: pooled over presets, the presets' differences would count as clip-to-clip
  signal. A file holding several presets needs ``preset`` (``--preset``); the error names the ones found.
  Rows that record no preset are the preset "" (``--preset ''``), shown as "(none)" (`shown_preset`): they
  were the preset "None", the text of the missing value.
* ``noise_share`` is None when no clip has two eligible draws or W + B is at most 1e-12 (every reward
  equal: rewards equal in print differ in their last bits when summed, and 1e-32 / 1e-32 is no share).
  With one such clip, B and ``noise_share`` are None: there is no clip-to-clip spread to compare the noise
  with (B was 0 and the share always 1.0, read as "the clips cannot be told apart").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evals.batch_rows import (
    eligible_reward,
    no_preset_rows,
    read_results_file,
    row_preset,
    score_batch_row,
    several_presets,
    shown_preset,  # noqa: F401  (re-exported: evals.eval_stats_cli)
)
from evals.table_rows import outage
from tools.jsonl import SkippedLine, no_usable_row, usable_rows

NO_SPREAD = 1e-12
"""W + B at or below this (a reward standard deviation of 1e-6) is rounding, not spread: no noise share."""


class DrawsError(ValueError):
    """A results file that cannot be read as draws (missing, malformed, a clip's draw twice)."""


@dataclass
class ClipDraws:
    """One clip's draws."""

    path: str
    instruction: str
    preset: str
    draws: int
    """Rows of this clip (every draw, eligible or not)."""
    rewards: list[float]
    """Eligible rewards in draw order."""
    statuses: list[str]
    """Statuses of the eligible draws in draw order."""
    draw_ids: list[int] = field(default_factory=list)
    """The draw number of each eligible reward (same order as `rewards`)."""
    ineligible_draws: list[int] = field(default_factory=list)
    """The draw numbers without a reward (shown in their place as "⊥")."""
    outage_draws: list[int] = field(default_factory=list)
    """Of those, the draws an outage of the reward machinery made ineligible (`evals.table_rows.outage`)."""

    @property
    def range(self) -> float | None:
        return max(self.rewards) - min(self.rewards) if len(self.rewards) >= 2 else None


@dataclass
class DrawsSummary:
    """Reward variation across draws of one results file (module docstring)."""

    path: str
    preset: str
    """The preset summarised (the file's only one, or the one asked for); "" for rows that record none, and
    for a file without rows."""
    rows: int
    """Rows of that preset."""
    clips: int
    """Distinct (path, instruction, preset)."""
    draws_min: int
    """Fewest rows of one clip."""
    draws_max: int
    """Most rows of one clip."""
    ineligible_rows: int
    """Rows without a reward (left out)."""
    outage_rows: int
    """Of those, rows an outage of the reward machinery made ineligible (module docstring)."""
    clips_single: int
    """Clips with fewer than two eligible draws (left out of the statistics)."""
    n: int
    """Clips in the statistics."""
    within_std: float | None
    """sqrt(W): pooled draw-to-draw standard deviation."""
    between_std: float | None
    """sqrt(B): standard deviation of the clips' mean rewards."""
    noise_share: float | None
    """W / (W + B)."""
    mean_range: float | None
    """Mean over clips of max - min reward over draws."""
    max_range: float | None
    """Largest such range."""
    status_flips: int
    """Clips whose eligible draws are not all scored or all zero."""
    bad_lines: int = 0
    """Rows of manifest lines that named no clip (ineligible, in no clip)."""
    outage_draws: list[int] = field(default_factory=list)
    """The draws holding the `outage_rows`: a `--retry-ineligible` run of the batch of each (this preset, draw K:
    `raa score-batch MANIFEST --out FILE --preset P --draw K`, `evals.eval_views.refill_lines`) fills it."""
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    """Lines of the file left out as no usable row, of any preset (``PATH:N`` and the reason)."""
    most_variable: list[dict[str, Any]] = field(default_factory=list)
    """Up to 10 clips with the widest range (ties by path, then instruction): path, instruction, preset,
    rewards, statuses, draws (the draw number of each reward), ineligible_draws, outage_draws (those of them an
    outage took), range."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _parsed(where: str, row: Any) -> tuple[str, dict[str, Any]]:
    """(where, row) of a line that is a usable score-batch row (`evals.batch_rows.score_batch_row`: one naming its clip
    by a string path and instruction, unless it is a bad manifest line's row); `LineError` otherwise (the line is
    skipped, as `evals.compare` skips it; it was a clip called "None")."""
    return where, score_batch_row(where, row)


def read_draws(path: Path) -> tuple[list[ClipDraws], dict[str, int], list[SkippedLine]]:
    """The clips of a score-batch output with their draws, in first-seen order, the rows of manifest lines
    that named no clip per preset, and the lines skipped as no usable row (module docstring)."""
    from graph.batch import is_bad_line_row, path_identities, same_run

    path = Path(path)
    problem, data = read_results_file(path)  # one look: a file read whole, or why not
    if problem:
        raise DrawsError(problem)
    parsed, skipped = usable_rows(path, _parsed, data=data)
    if skipped and not parsed:
        raise no_usable_row(path, skipped, DrawsError)
    identity = path_identities()  # each folder resolved once, not each row's path in full
    seen: dict[tuple[str, str, str], dict[int, dict[str, Any]]] = {}
    shown: dict[tuple[str, str, str], str] = {}  # per clip: the path its last row names it by
    lines: dict[tuple[tuple[str, str, str], Any], str] = {}  # per clip and draw: its row's line
    bad: dict[str, int] = {}
    for where, row in parsed:
        if is_bad_line_row(row):
            bad[row_preset(row)] = bad.get(row_preset(row), 0) + 1
            continue
        clip = (identity(row.get("path")), str(row.get("instruction")), row_preset(row))  # a link and its target: one
        draw = row.get("draw", 0)
        if (earlier := seen.setdefault(clip, {}).get(draw)) is not None:
            if same_run(earlier, row):  # a repeated line's row: its line's result again, not another draw
                continue
            raise DrawsError(f"{where}: draw {draw} of {row.get('path')} ({clip[2]}) appears twice (first at "
                             f"{lines[clip, draw]})")
        seen[clip][draw], shown[clip], lines[clip, draw] = row, str(row.get("path")), where
    clips = []
    for (resolved, instruction, preset), rows in seen.items():
        video = shown[(resolved, instruction, preset)]
        by_draw = {d: row["result"] for d, row in rows.items()}
        eligible = [(r, str(by_draw[d].get("status")), d) for d in sorted(by_draw)
                    if (r := eligible_reward(by_draw[d])) is not None]
        clips.append(ClipDraws(path=video, instruction=instruction, preset=preset, draws=len(by_draw),
                               rewards=[r for r, _, _ in eligible], statuses=[s for _, s, _ in eligible],
                               draw_ids=[d for _, _, d in eligible],
                               ineligible_draws=sorted(set(by_draw) - {d for _, _, d in eligible}),
                               outage_draws=[d for d in sorted(by_draw) if outage(by_draw[d])]))
    return clips, bad, skipped


def spread(values: list[float]) -> float:
    """Population variance, exactly 0 for equal values (np.var of three 0.1s is 1.9e-34: a within_std of 1.4e-17
    for a clip whose draws all agreed)."""
    return 0.0 if all(v == values[0] for v in values) else float(np.var(values))


def draw_statistics(rewards: list[list[float]]) -> tuple[float, float | None, float | None]:
    """(W, B, noise_share) of per-clip reward lists, each of length >= 2 (module docstring); at least one
    list. B and noise_share are None for one list; noise_share is None when W + B is at most `NO_SPREAD`."""
    spreads = [spread(r) for r in rewards]
    means = [r[0] if v == 0.0 else float(np.mean(r)) for r, v in zip(rewards, spreads, strict=True)]  # 0.1 x 3: 0.1
    within = float(np.mean(spreads))
    if len(rewards) < 2:
        return within, None, None
    between = spread(means)
    total = within + between
    return within, between, (within / total if total > NO_SPREAD else None)


def clip_labels(clips: list[dict[str, Any]]) -> list[str]:
    """Short labels that tell the listed clips apart: each ``path``'s shortest trailing part (file name, then
    its folder, ...) that no other listed path ends with, plus the instruction's start (in quotes) when one
    path is listed under several instructions. The table shows these; the JSON keeps full paths."""
    paths = sorted({c["path"] for c in clips})
    parts = {p: Path(p).parts for p in paths}

    def suffix(p: str) -> str:
        for k in range(1, len(parts[p]) + 1):
            tail = parts[p][-k:]
            if all(q == p or parts[q][-k:] != tail for q in paths):
                return str(Path(*tail))
        return p

    short = {p: suffix(p) for p in paths}
    instructions: dict[str, set[str]] = {}
    for c in clips:
        instructions.setdefault(c["path"], set()).add(c["instruction"])
    def start(text: str) -> str:
        return text if len(text) <= 24 else text[:24].rstrip() + "…"

    return [short[c["path"]] + (f' "{start(c["instruction"])}"' if len(instructions[c["path"]]) > 1 else "")
            for c in clips]


def summarize_draws(path: Path, preset: str | None = None) -> DrawsSummary:
    """Read `path` and summarise the draws of `preset` (needed when the file holds several; module docstring)."""
    clips, bad, skipped = read_draws(path)
    found = sorted({c.preset for c in clips} | set(bad))
    if preset is None and len(found) > 1:
        raise DrawsError(several_presets(f"{path}", found, ": summarise",
                                         "their differences would count as clip-to-clip signal"))
    if preset is not None and preset not in found:
        raise DrawsError(no_preset_rows(path, preset, found))
    preset = preset if preset is not None else (found[0] if found else "")
    clips = [c for c in clips if c.preset == preset]
    multi = [c for c in clips if len(c.rewards) >= 2]
    counts = [c.draws for c in clips] or [0]
    summary = DrawsSummary(
        path=str(path), preset=preset, rows=sum(c.draws for c in clips) + bad.get(preset, 0), clips=len(clips),
        draws_min=min(counts), draws_max=max(counts),
        ineligible_rows=sum(c.draws - len(c.rewards) for c in clips) + bad.get(preset, 0),
        outage_rows=sum(len(c.outage_draws) for c in clips),
        outage_draws=sorted({d for c in clips for d in c.outage_draws}),
        clips_single=len(clips) - len(multi), n=len(multi), within_std=None, between_std=None, noise_share=None,
        mean_range=None, max_range=None, status_flips=sum(len(set(c.statuses)) > 1 for c in multi),
        bad_lines=bad.get(preset, 0), skipped_lines=skipped)
    if multi:
        within, between, summary.noise_share = draw_statistics([c.rewards for c in multi])
        summary.within_std = math.sqrt(within)
        summary.between_std = None if between is None else math.sqrt(between)
        spread = [(r, c) for c in multi if (r := c.range) is not None]  # each of them: two rewards or more
        ranges = [r for r, _ in spread]
        summary.mean_range, summary.max_range = float(np.mean(ranges)), max(ranges)
        # ties: not the file's order
        widest = [c for _, c in sorted(spread, key=lambda rc: (-rc[0], rc[1].path, rc[1].instruction))[:10]]
        summary.most_variable = [{"path": c.path, "instruction": c.instruction, "preset": c.preset,
                                  "rewards": c.rewards, "statuses": c.statuses, "draws": c.draw_ids,
                                  "ineligible_draws": c.ineligible_draws, "outage_draws": c.outage_draws,
                                  "range": c.range} for c in widest]
    return summary
