"""`raa eval compare` and `raa eval draws`: statistics over `raa score-batch` outputs (registered on
`evals.eval_cli.eval_app` by `register`). Split from evals/eval_cli.py (its size); exit codes as that module says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from evals.eval_cli_common import console as console_
from evals.eval_cli_common import fail, report_skipped, write_json

COMPARE_HELP = "Pair two score-batch outputs (e.g. trained vs base policy) and compare rewards."


def compare_command(
    a: Annotated[Path, typer.Argument(help="Results of side A (raa score-batch output), e.g. the trained policy's.")],
    b: Annotated[Path, typer.Argument(help="Results of side B, e.g. the base model's from the same noise.")],
    pair_by: Annotated[str, typer.Option(help="Manifest field pairing the rows (training.generate writes 'key').")] = "key",
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap interval.")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the comparison as JSON.")] = None,
    instructions: Annotated[int, typer.Option(min=0, help="Show the N instructions whose mean reward changed "
                                              "most (0: none; --json has all).")] = 10,
    draw: Annotated[int | None, typer.Option(min=0, help="Compare only draw K of files holding several draws "
                                             "(score-batch --draw K into one output).")] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="Compare only this preset's rows (needed when a file "
                                               "holds several: score-batch --preset P into one output).")] = None,
    draw_b: Annotated[int | None, typer.Option("--draw-b", min=0, help="B's draw, when it differs from --draw's "
                                               "(e.g. two draws of one file: draw noise).")] = None,
    preset_b: Annotated[str | None, typer.Option("--preset-b", help="B's preset, when it differs from --preset's "
                                                 "(e.g. two presets of one file, with --pair-by path).")] = None,
) -> None:
    from evals.batch_rows import shown_preset
    from evals.compare import CompareError, compare, most_changed
    from evals.eval_views import changed_table, empty_sides, mean_text, refill_lines, sides_table

    try:
        result = compare(a, b, pair_by=pair_by, seed=seed, draw=draw, preset=preset, draw_b=draw_b, preset_b=preset_b)
    except CompareError as exc:
        raise fail(str(exc)) from exc
    skipped = [*result.a.skipped_lines, *result.b.skipped_lines]
    report_skipped(skipped)
    console = console_()
    if empty := empty_sides(result):  # exit 0 as `raa eval draws`: a table of zeros said nothing of why
        for line in empty:
            console.print(line, highlight=False)
        return write_json(json_out, result.as_dict(), console)
    console.print(sides_table(result))
    if result.pairs_scored_differently:
        console.print(f"warning: {result.pairs_scored_differently} of the {result.n} compared pairs were "
                      "scored by another preset, model or temperature on each side: their difference measures the "
                      "scorers as well as the videos (re-score one side to compare like with like)", style="yellow")
    if result.pairs_instruction_differs:
        console.print(f"warning: {result.pairs_instruction_differs} of the {result.n} compared pairs name different "
                      f"instructions on each side (first: {pair_by} {result.first_instruction_mismatch!r}): they "
                      "are not the same task, so the sides were not generated from the same prompt list or "
                      "order; pair them by another field (--pair-by)", style="yellow")
    if result.pairs_scorer_unrecorded:
        console.print(f"note: {result.pairs_scorer_unrecorded} of the {result.n} compared pairs have a row "
                      "whose scoring model is not recorded (written before score-batch recorded it)", style="yellow")
    for name, side in (("A", result.a), ("B", result.b)):
        if side.bad_lines:
            console.print(f"note: {side.bad_lines} row(s) of {name} are manifest lines that named no clip "
                          "(ineligible, not paired)", style="yellow")
    draws = tuple(None if d is None else str(d) for d in (result.draw, result.draw_b))
    presets = tuple(None if p is None else shown_preset(p) for p in (result.preset, result.preset_b))
    for what, (on_a, on_b) in (("draw", draws), ("preset", presets)):
        if on_a is not None and on_a == on_b:
            console.print(f"{what} {on_a} of each file")
        elif on_a is not None or on_b is not None:
            console.print(f"{what} {on_a or 'any'} of A, {what} {on_b or 'any'} of B")
    if result.pairs_draw_differs:
        console.print(f"note: {result.pairs_draw_differs} of the {result.n} compared pairs are of different draws "
                      "on each side: their difference holds the reward's draw noise (`raa eval draws` measures it) "
                      "as well as the videos'", style="yellow")
    outages = f", {result.pairs_outage} of them for an outage of the reward machinery" if result.pairs_outage else ""
    console.print(f"pairs by {pair_by!r}: {result.pairs} ({result.pairs_ineligible} left out: an ineligible "
                  f"reward{outages}; unpaired: {result.unpaired_a} in A, {result.unpaired_b} in B)")
    for line in refill_lines([("A", result.a.path, result.a.outage_batches),
                              ("B", result.b.path, result.b.outage_batches)]):
        console.print(line, highlight=False)
    if result.n:
        ci = "-" if result.ci95 is None else f"[{result.ci95[0]:+.4f}, {result.ci95[1]:+.4f}]"
        p = "-" if result.p_sign is None else f"{result.p_sign:.3g}"
        console.print(f"n = {result.n}: mean A {mean_text(result.mean_a)}, mean B {mean_text(result.mean_b)}, "
                      f"A - B {result.mean_diff:+.4f}, 95% bootstrap CI {ci}; "
                      f"wins/ties/losses {result.wins}/{result.ties}/{result.losses}, sign test p = {p}")
        shown = most_changed(result.by_instruction, instructions) if len(result.by_instruction) > 1 else []
        if shown:
            console.print(changed_table(shown, len(result.by_instruction)))
    else:
        console.print("no pair with two eligible rewards: nothing to compare")
        if result.hint:
            console.print(result.hint, style="yellow")
    write_json(json_out, result.as_dict(), console)
    if skipped and not result.n:  # the skipped lines may have held the pairs: no "nothing to compare" exit 0
        raise fail(f"no pair to compare, and {len(skipped)} line(s) were skipped as no usable row (listed above)")


DRAWS_HELP = "How much rewards move across draws (score-batch --draw k into one output)."


def draws_command(
    results: Annotated[Path, typer.Argument(help="A raa score-batch output holding draws 0..N-1 of a manifest.")],
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the summary as JSON.")] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="The preset to summarise (needed when the file "
                                               "holds several).")] = None,
) -> None:
    from evals.draws import DrawsError, clip_labels, shown_preset, summarize_draws
    from evals.eval_views import draw_rewards, plural, refill_lines

    try:
        s = summarize_draws(results, preset)
    except DrawsError as exc:
        raise fail(str(exc)) from exc
    report_skipped(s.skipped_lines)
    console = console_()
    if not s.rows:  # exit 0, as `raa eval compare` and `raa eval report` on empty results
        console.print(f"no rows in {results}: nothing to measure")
        write_json(json_out, s.as_dict(), console)
        return
    outages = f" ({s.outage_rows} for an outage of the reward machinery)" if s.outage_rows else ""
    console.print(f"preset {shown_preset(s.preset)}: {plural(s.rows, 'row')}, {plural(s.clips, 'clip')}, "
                  f"{s.draws_min}-{s.draws_max} draws per clip; {plural(s.ineligible_rows, 'ineligible row')} left "
                  f"out{outages}; {plural(s.clips_single, 'clip')} with < 2 eligible draws")
    for line in refill_lines([("", str(results), [{"preset": s.preset, "draw": d} for d in s.outage_draws])]):
        console.print(line, highlight=False)
    if s.bad_lines:
        console.print(f"note: {s.bad_lines} of those rows are manifest lines that named no clip (no clip of theirs "
                      "is counted)", style="yellow")
    if s.n:
        share = "-" if s.noise_share is None else f"{s.noise_share:.3f}"
        between = "- (one clip)" if s.between_std is None else f"{s.between_std:.4f}"
        console.print(f"n = {plural(s.n, 'clip')}: within-clip std {s.within_std:.4f}, between-clip std {between}, "
                      f"noise share {share}; range mean {s.mean_range:.4f}, max {s.max_range:.4f}; "
                      f"status flips (scored vs zero) {s.status_flips}")
        t = Table(title="Most variable clips")
        for col in ("Clip", "Rewards by draw", "Range"):
            t.add_column(col)
        for c, label in zip(s.most_variable, clip_labels(s.most_variable), strict=True):
            t.add_row(label, draw_rewards(c["rewards"], c["statuses"], c["draws"], c["ineligible_draws"],
                                          c["outage_draws"]), f"{c['range']:.4f}")
        console.print(t)
    else:
        console.print("no clip with two eligible draws: nothing to measure")
    write_json(json_out, s.as_dict(), console)
    if s.skipped_lines and not s.n:  # the skipped lines may have held the draws that were missing
        raise fail(f"no clip with two eligible draws, and {len(s.skipped_lines)} line(s) were skipped as no "
                    "usable row (listed above)")


def register(app: typer.Typer) -> None:
    """Add `compare` and `draws` to `app` (the `raa eval` group)."""
    app.command("compare", help=COMPARE_HELP)(compare_command)
    app.command("draws", help=DRAWS_HELP)(draws_command)
