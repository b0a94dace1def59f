"""`python -m training.export --tag best` names the held-out rows it passed over (training/best.py `passed_over`):
a higher mean without a complete checkpoint, an earlier row of an iteration a resume repeated, a row without a
mean, rows of an earlier measurement, lines that are not JSON."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from training.config_io import config_to_dict, load_config
from training.engine import mark_latest
from training.resume import StateLayout, write_layout

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def _run(tmp_path: Path, rows: list, complete: list[int], latest: int) -> Path:
    (tmp_path / "eval.jsonl").write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows))
    for it in complete:
        folder = tmp_path / "checkpoints" / f"iter_{it:06d}"
        folder.mkdir(parents=True)
        write_layout(folder, StateLayout(1, "float32"))
    mark_latest(tmp_path / "checkpoints", latest)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config_to_dict(load_config(SMOKE))))
    return tmp_path


def test_export_tag_best_names_every_row_it_passed_over(tmp_path, monkeypatch, capsys):
    """The export printed its choice (and a higher baseline) only: a trained iteration that scored higher but whose
    save crashed, was pruned by hand or lies past `latest` was passed over without a word, as were an earlier
    attempt's row of a repeated iteration and lines that are not JSON."""
    import training.export as export

    rows = [{"iteration": 1, "eval_reward_mean": 0.2, "eval_key": "k"},
            {"iteration": 2, "eval_reward_mean": 0.9, "eval_key": "k"},  # a resume repeated iteration 2 ...
            {"iteration": 3, "eval_reward_mean": 0.8, "eval_key": "k"},  # no layout.json: its save crashed
            {"iteration": 4, "eval_reward_mean": 0.7, "eval_key": "k"},  # no folder: pruned by hand
            {"iteration": 2, "eval_reward_mean": 0.3, "eval_key": "k"},  # ... its last row counts
            {"iteration": 5, "eval_reward_mean": None, "eval_key": "k"},  # every reward ineligible
            {"iteration": 6, "eval_reward_mean": 0.6, "eval_key": "k"},  # past latest
            {"iteration": 1, "eval_reward_mean": 0.99, "eval_key": "old"}, '{"iteration": 7, "eval_rew\n',
            {"iteration": 1, "eval_reward_mean": 0.2, "eval_key": "k"}]
    run = _run(tmp_path, rows, [1, 2, 5, 6], latest=5)
    (run / "checkpoints" / "iter_000003").mkdir()
    seen = {}
    monkeypatch.setattr(export, "export_policy", lambda cfg, out, checkpoint_dir, tag: seen.update(tag=tag) or out)
    assert export.main(["--run", str(run), "--tag", "best"]) == 0
    assert seen == {"tag": "iter_000002"}  # the documented choice: 0.3 (iteration 2's last row) beats 0.2
    err = capsys.readouterr().err
    assert "iteration 3 scored higher (0.8000) but iter_000003 is not a complete checkpoint (no layout.json" in err
    assert "iteration 4 scored higher (0.7000) but iter_000004 is not a complete checkpoint (no folder" in err
    assert "iteration 6 scored higher (0.6000) but iter_000006 is not a complete checkpoint (past latest" in err
    assert "iteration 2's earlier row (0.9000) was replaced by its last (0.3000)" in err
    assert "iteration 5: no eval_reward_mean" in err
    assert "1 row of another measurement" in err and "1 line of eval.jsonl is not JSON" in err


def test_nothing_is_said_when_nothing_was_passed_over(tmp_path, monkeypatch, capsys):
    import training.export as export

    rows = [{"iteration": i, "eval_reward_mean": m} for i, m in ((1, 0.2), (2, 0.6), (3, 0.5))]
    run = _run(tmp_path, rows, [1, 2, 3], latest=3)
    monkeypatch.setattr(export, "export_policy", lambda cfg, out, checkpoint_dir, tag: out)
    assert export.main(["--run", str(run), "--tag", "best"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_a_later_tie_without_a_checkpoint_is_named(tmp_path):
    """A tie goes to the later iteration (training/best.py); one without a complete checkpoint lost it unnamed."""
    from training.best import best_checkpoint, passed_over

    rows = [{"iteration": i, "eval_reward_mean": m} for i, m in ((0, 0.5), (1, 0.5), (2, 0.5))]
    run = _run(tmp_path, rows, [1], latest=1)
    found = best_checkpoint(run / "checkpoints", run / "eval.jsonl")
    assert found == ("iter_000001", 1, 0.5)
    assert passed_over(run / "checkpoints", run / "eval.jsonl", found) == [
        "iteration 2 scored as high (0.5000) but iter_000002 is not a complete checkpoint (no folder: pruned, or "
        "never saved)"]


def test_a_last_mean_of_zero_is_a_mean_for_the_earlier_row_note(tmp_path):
    """An iteration's last mean of 0.0 was read as "no mean" (``final or -inf``): with negative rewards (a sum
    with a negative weight) an earlier row lower than that last 0.0 was named as if it had been higher."""
    from training.best import best_checkpoint, passed_over

    rows = [{"iteration": 1, "eval_reward_mean": -0.5},
            {"iteration": 2, "eval_reward_mean": -0.2},  # the crashed attempt's row ...
            {"iteration": 2, "eval_reward_mean": 0.0}]  # ... lower than the last one, which counts
    run = _run(tmp_path, rows, [1], latest=1)
    found = best_checkpoint(run / "checkpoints", run / "eval.jsonl")
    assert found == ("iter_000001", 1, -0.5)
    assert passed_over(run / "checkpoints", run / "eval.jsonl", found) == [
        "iteration 2 scored higher (0.0000) but iter_000002 is not a complete checkpoint (no folder: pruned, or "
        "never saved)"]


def test_tag_best_without_eval_jsonl_says_the_run_had_no_held_out_evaluation(tmp_path, monkeypatch, capsys):
    """The smoke run has no held-out evaluation, and the README shows `--tag best` right after it: the error named
    a missing eval.jsonl as if it held rows ("no held-out evaluation in .../eval.jsonl (of its latest measurement) is
    at a complete saved checkpoint"), without saying the file is absent nor which tag to export instead."""
    import training.export as export

    run = _run(tmp_path, [], [10, 20], latest=20)
    (run / "eval.jsonl").unlink()
    monkeypatch.setattr(export, "export_policy", lambda *a, **k: (_ for _ in ()).throw(AssertionError("exported")))
    assert export.main(["--run", str(run), "--tag", "best"]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'eval.jsonl'} does not exist" in err and "no held-out evaluation" in err
    assert "eval_every" in err and "--tag iter_000020" in err  # how to get one, and what to export meanwhile


def test_tag_best_names_checkpoints_without_layout_json_when_none_is_complete(tmp_path, monkeypatch, capsys):
    """A run from before layout.json: every evaluated iteration has its checkpoint folder, none the file, so none is
    a candidate. The error blamed the schedule ("a multiple of checkpoint_every") and never said that the
    checkpoints were there but left aside, nor why."""
    import training.export as export

    rows = [{"iteration": 0, "eval_reward_mean": 0.1}, {"iteration": 10, "eval_reward_mean": 0.5},
            {"iteration": 20, "eval_reward_mean": 0.4}]
    for it in (10, 20):
        (tmp_path / "checkpoints" / f"iter_{it:06d}").mkdir(parents=True)
    run = _run(tmp_path, rows, [], latest=20)
    monkeypatch.setattr(export, "export_policy", lambda *a, **k: (_ for _ in ()).throw(AssertionError("exported")))
    assert export.main(["--run", str(run), "--tag", "best"]) == 2
    err = capsys.readouterr().err
    assert "iter_000010 (no layout.json: its save did not finish, or it predates the file)" in err
    assert "iter_000020 (no layout.json" in err and "--tag iter_000020" in err
