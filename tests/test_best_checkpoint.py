"""The best held-out checkpoint (training/best.py): chosen from eval.jsonl, kept by keep_checkpoints,
exported with `python -m training.export --run DIR --tag best`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.launches import run_to_end
from training.best import best_checkpoint, eval_means, evals_since_best, is_new_best
from training.config_io import config_to_dict, load_config
from training.engine import mark_latest, stale_checkpoints
from training.resume import StateLayout, write_layout

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"


def _run(tmp_path: Path, rows: list, tags: list[int]) -> Path:
    """A run folder with eval.jsonl ``rows`` and complete checkpoints ``tags`` (layout.json, `latest` the last)."""
    (tmp_path / "eval.jsonl").write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows))
    for it in tags:
        _checkpoint(tmp_path / "checkpoints", it)
    return tmp_path


def _checkpoint(ckpt_dir: Path, iteration: int, *, latest: bool = True) -> None:
    """A complete checkpoint folder as the trainer leaves it: saved, layout.json, then `latest`."""
    write_layout(_mkdir(ckpt_dir / f"iter_{iteration:06d}"), StateLayout(2, "float32"))
    if latest:
        mark_latest(ckpt_dir, iteration)


def _mkdir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_eval_means_take_each_iteration_s_last_finite_row(tmp_path):
    run = _run(tmp_path, [{"iteration": 0, "eval_reward_mean": 0.1}, {"iteration": 2, "eval_reward_mean": 0.9},
                          "not json\n", {"iteration": 4, "eval_reward_mean": None},
                          {"iteration": 2, "eval_reward_mean": 0.3},  # a resume repeated iteration 2
                          {"iteration": 6, "eval_reward_mean": 0.5}, {"iteration": 6, "eval_reward_mean": None}], [])
    assert eval_means(run / "eval.jsonl") == {0: 0.1, 2: 0.3}
    assert eval_means(tmp_path / "missing.jsonl") == {}


def test_the_best_is_the_highest_mean_that_has_a_checkpoint(tmp_path):
    rows = [{"iteration": i, "eval_reward_mean": m} for i, m in ((0, 0.9), (2, 0.4), (3, 0.8), (4, 0.4), (5, 0.7))]
    run = _run(tmp_path, rows, [2, 4, 5])  # iteration 0 (the baseline) and 3 have no checkpoint
    assert best_checkpoint(run / "checkpoints", run / "eval.jsonl") == ("iter_000005", 5, 0.7)
    (run / "checkpoints" / "iter_000005" / "layout.json").unlink()  # a save that crashed: not a candidate
    assert best_checkpoint(run / "checkpoints", run / "eval.jsonl") == ("iter_000004", 4, 0.4)  # tie: the later
    assert best_checkpoint(run / "checkpoints", run / "missing.jsonl") is None


def test_pruning_keeps_the_best_besides_the_newest():
    tags = [f"iter_{i:06d}" for i in (1, 2, 3, 4)]
    assert stale_checkpoints(tags, "iter_000004", 1, best="iter_000002") == ["iter_000001", "iter_000003"]
    assert stale_checkpoints(tags, "iter_000004", 1) == ["iter_000001", "iter_000002", "iter_000003"]


def test_check_notes_evaluations_that_can_never_be_kept():
    from training.best import best_needs_aligned_evals

    held_out = ["--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]"]
    assert best_needs_aligned_evals(load_config(SMOKE, [*held_out, "--eval_every", "20"])) is None
    note = best_needs_aligned_evals(load_config(SMOKE, [*held_out, "--eval_every", "5"]))
    assert note is not None and "eval_every 5 is not a multiple of checkpoint_every 10" in note
    assert "raises the best mean is checkpointed too" in note
    assert best_needs_aligned_evals(load_config(SMOKE, ["--eval_every", "0", "--keep_checkpoints", "2"])) is None


def test_an_evaluation_that_raises_the_best_is_a_new_best():
    means = {0: 0.9, 5: 0.3, 10: 0.5, 15: 0.5, 20: 0.4, 25: 0.6}
    assert [it for it in means if is_new_best(means, it)] == [5, 10, 25]  # the baseline (0) is not a checkpoint
    assert not is_new_best(means, 30) and not is_new_best({}, 5)  # no mean there (none, or all ineligible)


def test_export_tag_best_resolves_the_checkpoint(tmp_path, monkeypatch, capsys):
    import training.export as export

    rows = [{"iteration": i, "eval_reward_mean": m} for i, m in ((1, 0.2), (2, 0.6), (3, 0.5))]
    run = _run(tmp_path, rows, [1, 2, 3])
    (run / "config.yaml").write_text(yaml.safe_dump(config_to_dict(load_config(SMOKE))))
    seen = {}
    monkeypatch.setattr(export, "export_policy", lambda cfg, out, checkpoint_dir, tag: seen.update(out=out, tag=tag) or out)
    assert export.main(["--run", str(run), "--tag", "best"]) == 0
    assert seen == {"out": run / "export-iter_000002", "tag": "iter_000002"}
    assert "best held-out checkpoint: iter_000002 (eval_reward_mean 0.6000)" in capsys.readouterr().out
    # the base model (iteration 0, no checkpoint) beat every checkpoint: said, not hidden
    with (run / "eval.jsonl").open("a") as fh:
        fh.write(json.dumps({"iteration": 0, "eval_reward_mean": 0.7}) + "\n")
    assert export.main(["--run", str(run), "--tag", "best"]) == 0
    assert "the base model scored higher before training (iteration 0: 0.7000)" in capsys.readouterr().err
    with pytest.raises(export.ExportError, match="no checkpoint 'iter_000009' .*; saved: iter_000001, iter_000002"):
        export.checkpoint_tag(run / "checkpoints", "iter_000009")
    (run / "eval.jsonl").unlink()
    assert export.main(["--run", str(run), "--tag", "best"]) == 2
    assert "no held-out evaluation" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_keeps_its_best_held_out_checkpoint(tmp_path):
    """keep_checkpoints: 1 with a held-out evaluation at every checkpoint: the newest checkpoint and the best
    held-out one (by eval.jsonl, the baseline at iteration 0 aside) remain."""
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--export", "none", "--max_iterations", "4", "--checkpoint_every", "1",
           "--keep_checkpoints", "1", "--eval_every", "1", "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]"]
    run_to_end(cmd, timeout=600, what="training", env=env)
    means = {i: m for i, m in eval_means(out / "eval.jsonl").items() if i > 0}
    assert sorted(means) == [1, 2, 3, 4]
    best = max((m, i) for i, m in means.items())[1]
    assert best != 4, "the seeded run's best is older than its newest checkpoint, else this test checks nothing"
    kept = sorted(p.name for p in (out / "checkpoints").iterdir() if p.is_dir())
    assert kept == sorted({"iter_000004", f"iter_{best:06d}"})


def test_evals_since_best_counts_evaluations_without_strict_progress():
    assert evals_since_best({}) == 0
    assert evals_since_best({0: 0.2, 10: 0.5, 20: 0.4, 30: 0.45}) == 2
    assert evals_since_best({0: 0.5, 10: 0.5, 20: 0.5}) == 2  # a tie is no progress
    assert evals_since_best({0: 0.5, 10: 0.4, 20: 0.6}) == 0


def test_eval_patience_needs_held_out_evaluation():
    from training.config import ConfigError

    with pytest.raises(ConfigError, match="eval_patience needs eval_every > 0"):
        load_config(SMOKE, ["--eval_patience", "2"])
    with pytest.raises(ConfigError, match="must be >= 1"):
        load_config(SMOKE, ["--eval_patience", "0", "--eval_every", "1", "--eval_dataset", "[{text: a}]"])


@pytest.mark.slow
def test_a_plateau_stops_the_run_and_a_resume_counts_on(tmp_path):
    """A policy that cannot move (a learning rate far below fp32 resolution): the held-out mean is the same
    at every evaluation, so with eval_patience 2 the run ends after iteration 2, checkpointed and exported;
    a resume that allows more iterations counts on from eval.jsonl and stops at once. The resume starts as
    the one after a stop signal during that evaluation (or its save) did, which ended the run before its early
    stop: it trained on to iteration 3, past where the run without the signal ended."""
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    base = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress",
            "false", "--tensorboard", "false", "--checkpoint_every", "5", "--learning_rate", "1e-30",
            "--eval_every", "1", "--eval_patience", "2", "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]"]
    output = run_to_end([*base, "--max_iterations", "5"], timeout=600, what="training", env=env)
    assert "stopping early at iteration 2: 2 held-out evaluations without a higher eval_reward_mean" in output
    assert "best held-out checkpoint iter_000002" in output  # ties go to the later: what --tag best exports
    assert (out / "checkpoints" / "iter_000001").is_dir()  # the first evaluation, a new best between checkpoints
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    assert sorted(eval_means(out / "eval.jsonl")) == [0, 1, 2]
    assert (out / "checkpoints" / "iter_000002").is_dir() and (out / "final" / "export.json").is_file()
    with (out / "eval.jsonl").open("a") as fh:  # a crashed attempt got further than the checkpoint: redone, not counted
        fh.write(json.dumps({"iteration": 4, "eval_reward_mean": 0.99}) + "\n")
    output = run_to_end([*base, "--max_iterations", "8", "--resume"], timeout=600, what="the resume", env=env)
    assert "stopping early at iteration 2" in output, output[-2000:]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    assert not (out / "checkpoints" / "iter_000003").exists() and sorted(eval_means(out / "eval.jsonl")) == [0, 1, 2]


def test_a_resumed_run_owes_the_evaluation_a_stop_skipped(tmp_path):
    """A stop signal at an evaluation iteration saves without evaluating; the resumed launch started past it,
    and only a fresh run evaluated before its first iteration, so that evaluation was lost for good."""
    from training.best import on_eval_schedule, pending_eval
    from training.config import PromptSpec, TrainConfig

    cfg = TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")], eval_every=2, max_iterations=5)
    assert [i for i in range(7) if on_eval_schedule(cfg, i)] == [0, 2, 4, 5, 6]
    assert not on_eval_schedule(TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")]), 4)
    log = tmp_path / "eval.jsonl"
    log.write_text('{"iteration": 0, "eval_reward_mean": 0.5}\n{"iteration": 2, "eval_reward_mean": null}\n')
    assert [s for s in range(6) if pending_eval(cfg, s, log)] == [4, 5]  # 2 has a row (a null mean counts)
    assert not pending_eval(cfg, 0, log)  # a fresh run's baseline is the trainer's own step



def test_a_save_that_crashed_is_never_the_best(tmp_path):
    """eval at 4 was a new best, its save crashed: iter_000004 exists without layout.json and `latest` still
    names iter_000002. It was picked (pruning kept an empty folder, --tag best tried to export it)."""
    rows = [{"iteration": i, "eval_reward_mean": m} for i, m in ((0, 0.1), (2, 0.3), (4, 0.5), (6, 0.6))]
    run = _run(tmp_path, rows, [2])
    ckpt = run / "checkpoints"
    (ckpt / "iter_000004").mkdir()  # torn: no layout.json
    _checkpoint(ckpt, 6, latest=False)  # complete folder, but `latest` never moved to it
    assert best_checkpoint(ckpt, run / "eval.jsonl") == ("iter_000002", 2, 0.3)
    mark_latest(ckpt, 6)  # once `latest` names 6 (or later), 6 counts; 4 never does
    assert best_checkpoint(ckpt, run / "eval.jsonl") == ("iter_000006", 6, 0.6)
    (ckpt / "latest").unlink()
    assert best_checkpoint(ckpt, run / "eval.jsonl") is None  # nothing marked complete


def test_means_are_compared_only_within_one_measurement(tmp_path):
    """A resume at 5 changed the reward and held-out prompts: the old 0.62 must not stay the best forever
    (best_checkpoint, evals_since_best -> early stop) while the new measurement improves."""
    from training.best import agreed_best_tag

    old = [{"iteration": i, "eval_reward_mean": m, "eval_key": "aaaa"} for i, m in ((0, 0.40), (5, 0.62))]
    new = [{"iteration": i, "eval_reward_mean": m, "eval_key": "bbbb"} for i, m in ((5, 0.30), (10, 0.31),
                                                                                     (15, 0.35), (20, 0.38))]
    run = _run(tmp_path, old + new, [5, 10, 15, 20])
    ckpt, log = run / "checkpoints", run / "eval.jsonl"
    assert eval_means(log) == {5: 0.30, 10: 0.31, 15: 0.35, 20: 0.38}  # the latest measurement's rows
    assert eval_means(log, "aaaa") == {0: 0.40, 5: 0.62}
    assert best_checkpoint(ckpt, log) == ("iter_000020", 20, 0.38) == best_checkpoint(ckpt, log, "bbbb")
    assert agreed_best_tag(ckpt, log) == "iter_000020" and evals_since_best(eval_means(log)) == 0
    assert is_new_best(eval_means(log), 20)
    # rows from before eval_key (legacy) compare among themselves only
    legacy = [{"iteration": i, "eval_reward_mean": m} for i, m in ((0, 0.9), (5, 0.8))]
    (log).write_text("".join(json.dumps(r) + "\n" for r in legacy))
    assert best_checkpoint(ckpt, log) == ("iter_000005", 5, 0.8) and eval_means(log, "bbbb") == {}
    log.write_text("".join(json.dumps(r) + "\n" for r in legacy + new[:1]))
    assert best_checkpoint(ckpt, log) == ("iter_000005", 5, 0.30)


def test_a_resume_with_another_measurement_evaluates_its_start_first(tmp_path):
    from training.best import pending_eval
    from training.config import PromptSpec, TrainConfig

    cfg = TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")], eval_every=5, max_iterations=20)
    log = tmp_path / "eval.jsonl"
    log.write_text("".join(json.dumps({"iteration": i, "eval_reward_mean": 0.5, "eval_key": "aaaa"}) + "\n"
                           for i in (0, 5)))
    assert not pending_eval(cfg, 5, log, "aaaa") and not pending_eval(cfg, 7, log, "aaaa")
    assert pending_eval(cfg, 5, log, "bbbb") and pending_eval(cfg, 7, log, "bbbb")  # a baseline, off schedule too
    with log.open("a") as fh:
        fh.write(json.dumps({"iteration": 7, "eval_reward_mean": 0.1, "eval_key": "bbbb"}) + "\n")
    assert not pending_eval(cfg, 7, log, "bbbb") and pending_eval(cfg, 7, log, "aaaa")


def test_the_eval_key_changes_with_what_the_evaluation_measures():
    from dataclasses import replace

    from training.config import PromptSpec, TrainConfig
    from training.evaluate import eval_key

    cfg = TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")], eval_every=5)
    prompts = [PromptSpec(text="pick the cup", image_seed=1)]
    key = eval_key(cfg, prompts)
    assert len(key) == 12 and key == eval_key(replace(cfg, learning_rate=1.0, resume=True), list(prompts))
    changed = [replace(cfg, reward="motion"), replace(cfg, reward_options={"region": [0, 0, 1, 1]}),
               replace(cfg, eval_samples=4), replace(cfg, seed=1), replace(cfg, num_steps=20),
               replace(cfg, guidance_scale=2.0), replace(cfg, shift=1.0), replace(cfg, height=240)]
    assert len({key, *(eval_key(c, prompts) for c in changed)}) == len(changed) + 1
    assert eval_key(cfg, [PromptSpec(text="pick the cup", image_seed=2)]) != key  # the prompts' content
    assert eval_key(cfg, prompts * 2) != key
    assert eval_key(replace(cfg, negative_prompt="blurry"), prompts) == key  # no guidance: not used
    assert eval_key(replace(cfg, negative_prompt="blurry", guidance_scale=2.0), prompts) \
        != eval_key(replace(cfg, guidance_scale=2.0), prompts)


@pytest.mark.slow
def test_an_owed_evaluation_that_ends_the_patience_stops_the_resumed_run_there(tmp_path):
    """A stop signal at iteration 2 saved it without its evaluation (removed here from a run that evaluated);
    the resumed launch evaluates 2 first. With a policy that cannot move that evaluation is the second without
    progress, so eval_patience 2 ends the run at 2, as it would have without the stop; the resumed run trained
    on to its next evaluation (iteration 3) and exported that instead."""
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    base = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress",
            "false", "--tensorboard", "false", "--checkpoint_every", "1", "--learning_rate", "1e-30",
            "--eval_every", "1", "--eval_patience", "2", "--export", "none",
            "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]"]

    def train(*extra: str) -> str:
        return run_to_end([*base, *extra], timeout=600, what="training", env=env)

    train("--max_iterations", "2")
    for name in ("eval.jsonl", "eval_rewards.jsonl"):  # as the stop left them: no evaluation of iteration 2
        path = out / name
        path.write_text("".join(line + "\n" for line in path.read_text().splitlines()
                                if json.loads(line)["iteration"] != 2))
    output = train("--max_iterations", "5", "--resume")
    assert "stopping early at iteration 2" in output, output[-2000:]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    assert sorted(eval_means(out / "eval.jsonl")) == [0, 1, 2]
    assert (out / "checkpoints" / "latest").read_text().strip() == "iter_000002"
