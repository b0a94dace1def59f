"""Paired comparison of two scored sets of videos: did post-training raise the agent's reward?

``raa eval compare A.jsonl B.jsonl`` reads two ``raa score-batch`` outputs, typically the videos of a
trained policy and of its base model generated from the same noise (``python -m training.generate``
with ``--weights trained`` and ``--weights base``), and pairs their rows by a manifest field (default
``key``: prompt and sample, which generate writes). It reports, per side, the status counts and the
mean reward over eligible rows, and over the pairs in which both rewards are eligible:

    d_i = r_A,i - r_B,i                       paired difference
    mean_diff = (1/n) sum_i d_i
    CI_95 = percentiles 2.5 / 97.5 of the mean of n draws of d with replacement (bootstrap, seeded)
    wins / ties / losses = #{d_i > 0} / #{d_i = 0} / #{d_i < 0}
    p_sign = min(1, 2 * sum_{k <= min(w, l)} C(w + l, k) / 2^(w + l))    exact two-sided sign test, ties dropped

Decisions where the issue was silent:

* An ineligible reward (status ``ineligible``, reward None) never counts as a number: its pair is left
  out of the paired statistics and counted as ``pairs_ineligible``; a zero (status ``zero``) is a
  reward of 0 and stays in.
* A line that is no usable row is skipped and reported, never counted (``skipped_lines`` of its side:
  ``PATH:N`` and the reason; `tools.jsonl.usable_rows`), and the other rows are compared: a line that is
  not UTF-8 or not JSON, not a score-batch row (no ``result`` object), a ``manifest`` that is not an object,
  no field to pair by, a draw that is not an integer, a path or instruction that is not a string (a hand edit's
  null or 5: it was a pair under the instruction "None", and 5 paired with "5"), a preset that is neither a string
  nor null (5 read as the preset "5"), or a status and reward that disagree
  (``checked_reward``: a ``scored`` or ``zero`` row needs a finite number in 0..1, not a bool, not a string
  such as "0.9", not missing; a ``zero`` row 0; an ``ineligible`` row no reward; any other status is
  refused, as `evals.result_rows.damaged` refuses such rows). One such line used to refuse the whole file;
  before that, a disagreeing row was counted as ineligible (a side could count one row as both scored and
  ineligible). A file whose every line is skipped is an error listing them, and `raa eval compare` exits 2
  when lines were skipped and no pair was left to compare (the skipped lines may have held them). So is a
  `draw` none of whose rows is left (its error lists the skipped lines: they may have held it; it said
  "draws found: 0" and nothing of them). A side without any row is honestly empty: "no rows in FILE:
  nothing to compare", exit 0, as `raa eval draws`, even when the other side had lines skipped (none of
  them could have paired with it).
  Rows that contradict each other (a key twice, in one draw or in two) stay errors: no line is damaged,
  and which one is right is the user's call; a repeated line's row (``repeat_of``, `graph.batch.same_run`) under
  the key of its line's (``--pair-by path``) is that row again, not a contradiction (it was "appears twice"), when
  its result is that row's (a copy; one that differs is of another run, two outputs concatenated: an error).
  ``--pair-by path`` pairs by the resolved path (`graph.batch.clip_identity`, as score-batch's key): a row naming a
  clip through a link, as its manifest gave it, pairs with one written before rows did (naming the link's target).
  Two links to one file are two clips (`evals.path_pairs`).
* Each side counts its ineligible rows an outage of the reward machinery caused (``outage``, `Fault.outage`), the
  comparison its left-out pairs with one (``pairs_outage``): the others are the videos' own (an undecodable clip),
  never seen by the paired statistics. Both read as one count. A side's outage rows, paired or not (its table counts
  them all, and its mean leaves them all out; only the paired ones were named), are scored again by a
  ``--retry-ineligible`` run of the batch that wrote them: ``outage_batches`` names each batch by the preset and draw
  its rows record, and the CLI prints its command (`evals.eval_views.refill_lines`) with the side's own file as
  ``--out``. The draws alone (``outage_draws``, ``_a``, ``_b``) named neither the file (both files' draws in one
  list sent a retry of A's draw to B) nor the preset (score-batch's default, "full", scored every clip of the
  manifest again for a batch of another preset).
* Rows of manifest lines that named no clip (score-batch's "<line N>" rows, ``graph.batch.is_bad_line_row``)
  are counted on their side (``bad_lines``, also in its rows and ineligible counts) and never paired: two
  unrelated manifests' bad line 2 shared the placeholder path, so ``--pair-by path`` paired them and the
  no-pair hint counted them as shared videos.
* Rows of one file without a partner in the other are counted (``unpaired_a``, ``unpaired_b``), never
  silently dropped; a duplicate key is an error naming the file and line.
* Each side names who scored it: ``scorers`` counts its rows by "preset · model @ T=temperature", from
  the row's ``preset`` and the ``scorer`` record score-batch writes ({model, temperature, endpoint}); rows written
  before that record existed say "model unrecorded". A difference in reward between two sides scored by
  different presets or backbones measures the scorers as much as the policies, so the comparison counts
  the pairs in its statistics whose two rows were scored differently (``pairs_scored_differently``: the
  presets differ, or both scorers are recorded and differ in a field both hold, `graph.batch.same_scorer`) and those where a side's scorer is unknown
  (``pairs_scorer_unrecorded``). The CLI warns about both and still reports: re-scoring is the user's
  call, and an intentional cross-scorer comparison is legitimate.
* A pair whose two rows name different instructions (the sides were generated from different or reordered
  prompt lists, and ``key`` is a prompt index) is not a paired sample of one task: it is counted
  (``pairs_instruction_differs``, with the first such key) and the CLI warns; the statistics still include
  it, and the per-instruction table groups by A's instruction.
* A file holding several draws of a manifest (``raa score-batch --draw k`` into one output) has one row per
  draw of each clip: ``draw`` (``--draw K``) compares the rows of draw K of both files (the side summaries count
  only those; a row without a draw is draw 0, as in ``evals.draws``), and without it a clip (its resolved path and
  instruction) or a key in two draws is an error naming the two draws and the option (by score-batch's own key,
  which hashes the draw, the draws were pooled: each clip counted once per draw). Clips each in one draw, whichever,
  are compared. A draw that a file does not hold is an error naming the draws it holds.
* A file may hold several presets' rows of one manifest (score-batch into one ``--out`` with another ``--preset``):
  ``preset`` (``--preset NAME``, "" for rows that record none) compares that preset's rows of both files, as
  ``draw`` does a draw's; without it such a file (at the draw compared) is an error naming its presets and the
  option, whatever the pairing (as `raa eval draws`): by score-batch's own key, which hashes the preset, one
  difference pooled every preset, unsaid (each pair scored alike: no scorer warning). A preset it does not hold is an
  error naming its presets; so is a preset and draw it holds only apart, naming the preset's draws (no row was left:
  "no rows in FILE"). Two files of one preset each need no option, whatever their presets (a preset ablation).
* ``preset_b`` / ``draw_b`` (``--preset-b``, ``--draw-b``) choose B's preset and draw apart from A's (default: the same
  as ``preset`` / ``draw``): two presets or two draws of one file, given as both sides, or files scored in other
  draws. Both options once chose one batch for both files, so preset full against preset direct of one output could
  not be compared at all, and the refusals (several presets; "no row of draw K") now name them. Presets asked apart
  are the comparison, not a confound: ``pairs_scored_differently`` then counts other models or temperatures only.
  Pairs whose rows are of different draws (asked, or two one-draw files) are counted (``pairs_draw_differs``) and the
  CLI says their difference holds the reward's draw noise: a legitimate comparison, but not of the videos alone.
* One file given as both sides, its rows of one preset and draw on both (no ``--preset-b`` / ``--draw-b`` choosing other
  rows of it), is refused (`CompareError`, naming the file and those options): each row paired with itself, every pair
  a tie, the interval [0, 0], which a script reading ``--json`` takes for "no difference" between two policies. A note
  beside such numbers is easy to miss, and they answer no question a researcher asks: giving one file twice is a slip
  (the base model's output not yet written, or a pasted path). The file is the same by its resolved identity
  (`os.path.samefile`: a link or another spelling of the path is the same file).
* With no pair at all, the comparison says why when it can: score-batch's own ``key`` hashes the preset
  (and draw), so two presets' outputs of one manifest share no key; when their rows share video paths,
  ``hint`` suggests ``--pair-by path``.
* Rows pair by the JSON value of their field, a string or a finite number (`evals.pair_keys`: 1 and "1" are two keys,
  1 and 1.0 one; a line whose key is neither is skipped and named).
* The bootstrap interval and sign test are `evals.paired_stats`'s; the pairs are taken in the order of their keys
  (`evals.pair_keys.key_order`), not in A's row order: score-batch writes rows as runs finish, and the same videos
  in another order gave another interval for the same seed.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evals.batch_rows import Side, eligible_reward, row_draw, row_preset, scored_differently, scorer_label
from evals.compare_rows import CompareError, read_results
from evals.pair_keys import PairKey, key_order, text_twins
from evals.paired_stats import BOOTSTRAP_DRAWS, bootstrap_ci, sign_test  # noqa: F401  (re-exported)
from evals.path_pairs import by_name
from evals.table_rows import outage
from tools.jsonl import SkippedLine

__all__ = ["CompareError", "Comparison", "SideSummary", "compare", "most_changed", "read_results"]


@dataclass
class SideSummary:
    """One results file."""

    path: str
    """The results file."""
    rows: int
    """Rows read."""
    scored: int
    """Rows with status scored."""
    zero: int
    """Rows with status zero (quality pre-check or gate)."""
    ineligible: int
    """Rows with no reward (a tool, the model or the input failed)."""
    outage: int
    """Of those, rows whose faults say the reward machinery failed (`graph.schemas.Fault.outage`), not the video."""
    mean_reward: float | None
    """Mean reward over eligible rows (None when there are none)."""
    scorers: dict[str, int] = field(default_factory=dict)
    """Rows per scorer label, "preset · model @ T=temperature" (`scorer_label`), most rows first."""
    bad_lines: int = 0
    """Rows of manifest lines that named no clip (ineligible, never paired)."""
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    """Lines of the file left out as no usable row (``PATH:N`` and the reason; module docstring)."""
    outage_batches: list[dict[str, Any]] = field(default_factory=list)
    """The batches holding the `outage` rows, paired or not, as {"preset", "draw"} (sorted): `raa score-batch MANIFEST
    --out PATH --preset P --draw D --retry-ineligible` scores each one's again (module docstring)."""


@dataclass
class Comparison:
    """The paired comparison of side A against side B."""

    a: SideSummary
    b: SideSummary
    pair_by: str
    """Manifest field the rows are paired by."""
    pairs: int
    """Keys present in both files."""
    pairs_ineligible: int
    """Pairs left out because at least one reward is ineligible."""
    pairs_outage: int
    """Of those, pairs with a row made ineligible by an outage of the reward machinery (module docstring)."""
    unpaired_a: int
    """Rows of A with no partner in B."""
    unpaired_b: int
    """Rows of B with no partner in A."""
    n: int
    """Pairs in the statistics (both rewards eligible)."""
    mean_a: float | None
    """Mean reward of A over those pairs."""
    mean_b: float | None
    """Mean reward of B over those pairs."""
    mean_diff: float | None
    """Mean of r_A - r_B over those pairs."""
    ci95: tuple[float, float] | None
    """Bootstrap 95% interval of mean_diff (None with fewer than 2 pairs)."""
    wins: int
    """Pairs with r_A > r_B."""
    ties: int
    """Pairs with r_A = r_B."""
    losses: int
    """Pairs with r_A < r_B."""
    p_sign: float | None
    """Exact two-sided sign-test p-value of wins vs losses (None without untied pairs)."""
    pairs_scored_differently: int = 0
    """Pairs in the statistics whose rows were scored by another preset or another recorded model or
    temperature."""
    pairs_scorer_unrecorded: int = 0
    """Pairs in the statistics with a row whose scorer (model, temperature) is not recorded."""
    pairs_instruction_differs: int = 0
    """Pairs in the statistics whose two rows name different instructions."""
    first_instruction_mismatch: PairKey | None = None
    """The pairing key of the first such pair (None when there is none)."""
    by_instruction: list[dict[str, Any]] = field(default_factory=list)
    """Per instruction: n, mean_a, mean_b, mean_diff over its eligible pairs."""
    hint: str | None = None
    """Why nothing paired and what would pair the rows (None when some rows paired)."""
    draw: int | None = None
    """The draw compared (None: every row of both files)."""
    preset: str | None = None
    """The preset compared (None: every row of both files; module docstring); of A alone when `preset_b` differs."""
    draw_b: int | None = None
    """B's draw compared (`--draw-b`; the same as `draw` unless asked apart)."""
    preset_b: str | None = None
    """B's preset compared (`--preset-b`; the same as `preset` unless asked apart)."""
    pairs_draw_differs: int = 0
    """Pairs in the statistics whose two rows are of different draws (draw noise is part of their difference)."""
    outage_draws: list[int] = field(default_factory=list)
    """The draws of the outage rows of both sides, paired or not (`SideSummary.outage_batches`): wider than
    `pairs_outage`, which counts only the pairs left out; it once held the draws of those pairs alone, so a reader of
    that meaning sees more draws. It names neither the side nor the preset: the batches do."""
    outage_draws_a: list[int] = field(default_factory=list)
    """Of those, the draws of A's outage rows (each file is retried on its own: `--out A --preset P --draw K`)."""
    outage_draws_b: list[int] = field(default_factory=list)
    """Of those, the draws of B's outage rows."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)



def _reward(row: dict[str, Any]) -> float | None:
    return eligible_reward(row["result"])


def _side(path: Path, keyed: dict[PairKey, dict[str, Any]], bad: list[dict[str, Any]],
          skipped: list[SkippedLine]) -> SideSummary:
    rows = [*keyed.values(), *bad]
    statuses = [r["result"].get("status") for r in rows]
    eligible = [x for x in (_reward(r) for r in rows) if x is not None]
    scorers = Counter(scorer_label(r) for r in rows)
    batches = sorted({(row_preset(r), row_draw(r, "")) for r in rows if outage(r["result"])})
    return SideSummary(path=str(path), rows=len(rows), scored=statuses.count("scored"), zero=statuses.count("zero"),
                       ineligible=len(rows) - len(eligible), outage=sum(outage(r["result"]) for r in rows),
                       mean_reward=float(np.mean(eligible)) if eligible else None,
                       scorers=dict(sorted(scorers.items(), key=lambda kv: (-kv[1], kv[0]))), bad_lines=len(bad),
                       skipped_lines=list(skipped),
                       outage_batches=[{"preset": preset, "draw": draw} for preset, draw in batches])


def _same_rows(path_a: Path, path_b: Path) -> str:
    """The refusal of one file's same rows as both sides (module docstring)."""
    named = f"A and B ({path_a})" if str(path_a) == str(path_b) else f"A ({path_a}) and B ({path_b})"
    return (f"{named} are the same file, and the same rows of it on both sides: each row would pair with itself, "
            "every difference 0; give B's own results file, or compare two batches of this one with --preset-b P "
            "or --draw-b K")


def most_changed(by_instruction: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The `k` instructions whose mean paired difference is largest in size (ties: more pairs first, then
    the text), ordered from the largest gain of A to the largest loss."""
    ranked = sorted(by_instruction, key=lambda r: (-abs(r["mean_diff"]), -r["n"], r["instruction"]))[:max(k, 0)]
    return sorted(ranked, key=lambda r: (-r["mean_diff"], r["instruction"]))


def compare(path_a: Path, path_b: Path, *, pair_by: str = "key", seed: int = 0, draw: int | None = None,
            preset: str | None = None, draw_b: int | None = None, preset_b: str | None = None) -> Comparison:
    """Pair the rows of two score-batch outputs (of draw `draw` and preset `preset` only, when given; B's of `draw_b`
    and `preset_b` when given apart) and compare their rewards (see module docstring)."""
    from graph.batch import path_identities

    identity = path_identities()
    sides: tuple[Side, Side] = ("both", "both") if draw_b is None else ("A", "B")  # whose draw each option chose
    draw_b, preset_b = (draw if draw_b is None else draw_b), (preset if preset_b is None else preset_b)
    (rows_a, bad_a, skip_a), (rows_b, bad_b, skip_b) = (read_results(path_a, pair_by, draw, identity, preset, sides[0]),
                                                        read_results(path_b, pair_by, draw_b, identity, preset_b, sides[1]))
    if (rows_a or bad_a) and (rows_a, bad_a) == (rows_b, bad_b) and os.path.samefile(path_a, path_b):
        raise CompareError(_same_rows(path_a, path_b))
    asked = preset is not None and preset_b is not None and preset != preset_b  # the presets are the comparison
    if pair_by == "path":  # one of two links to one file on one side, keyed by its link's name there
        rows_b = by_name(rows_b, rows_a)
        rows_a = by_name(rows_a, rows_b)
    # not A's row order: the bootstrap's draws index the pairs
    shared = sorted((k for k in rows_a if k in rows_b), key=key_order)
    kept = [(k, _reward(rows_a[k]), _reward(rows_b[k])) for k in shared]
    kept = [(k, ra, rb) for k, ra, rb in kept if ra is not None and rb is not None]
    ra = np.array([x[1] for x in kept], dtype=np.float64)
    rb = np.array([x[2] for x in kept], dtype=np.float64)
    d = ra - rb
    groups: dict[str, list[int]] = {}
    for i, (k, _, _) in enumerate(kept):
        groups.setdefault(str(rows_a[k].get("instruction", "")), []).append(i)
    by_instruction = [{"instruction": text, "n": len(ix), "mean_a": float(ra[ix].mean()),
                       "mean_b": float(rb[ix].mean()), "mean_diff": float(d[ix].mean())}
                      for text, ix in groups.items()]
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    mismatched = [k for k, _, _ in kept if rows_a[k].get("instruction") != rows_b[k].get("instruction")]
    hint = None
    if not shared and pair_by != "path" and (twins := text_twins(rows_a, rows_b)):
        hint = (f"no row of A shares a {pair_by!r} with a row of B, but {twins} key(s) are the same as text: a number "
                "on one side, a string on the other (a hand edit, or another tool's manifest?); rows pair by the "
                "field's JSON value, so write the keys alike on both sides")
    elif not shared and pair_by != "path":
        paths = {identity(r["path"]) for r in rows_a.values() if r.get("path") is not None} & \
            {identity(r["path"]) for r in rows_b.values() if r.get("path") is not None}
        if paths:
            hint = (f"no row of A shares a {pair_by!r} with a row of B, but {len(paths)} video path(s) appear in "
                    "both (score-batch's own key includes the preset and draw): pair them with --pair-by path")
    side_a, side_b = _side(path_a, rows_a, bad_a, skip_a), _side(path_b, rows_b, bad_b, skip_b)
    draws_a, draws_b = (sorted({b["draw"] for b in side.outage_batches}) for side in (side_a, side_b))
    return Comparison(
        a=side_a, b=side_b, pair_by=pair_by, pairs=len(shared),
        pairs_ineligible=len(shared) - len(kept),
        pairs_outage=sum(outage(rows_a[k]["result"]) or outage(rows_b[k]["result"]) for k in shared),
        unpaired_a=len(rows_a) - len(shared),
        unpaired_b=len(rows_b) - len(shared), n=len(kept),
        mean_a=float(ra.mean()) if len(kept) else None, mean_b=float(rb.mean()) if len(kept) else None,
        mean_diff=float(d.mean()) if len(kept) else None, ci95=bootstrap_ci(d, seed),
        wins=wins, ties=len(kept) - wins - losses, losses=losses, p_sign=sign_test(wins, losses),
        pairs_scored_differently=sum(scored_differently(rows_a[k], {**rows_b[k], "preset": rows_a[k].get("preset")}
                                                        if asked else rows_b[k]) for k, _, _ in kept),
        pairs_draw_differs=sum(row_draw(rows_a[k], "") != row_draw(rows_b[k], "") for k, _, _ in kept),
        pairs_scorer_unrecorded=sum(not isinstance(rows_a[k].get("scorer"), dict)
                                    or not isinstance(rows_b[k].get("scorer"), dict) for k, _, _ in kept),
        pairs_instruction_differs=len(mismatched), first_instruction_mismatch=mismatched[0] if mismatched else None,
        by_instruction=by_instruction, hint=hint, draw=draw, preset=preset, draw_b=draw_b, preset_b=preset_b,
        outage_draws=sorted({*draws_a, *draws_b}), outage_draws_a=draws_a, outage_draws_b=draws_b)
