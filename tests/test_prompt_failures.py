"""A prompt image that goes missing after the launch check (training/prompt_failures.py): its group is skipped
for the iteration with a reason naming the prompt file line and the image, the other prompts train on, and only
an iteration whose every prompt failed stops the run (exit 2). Tiny random models, in process, no hub."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from tests.launches import release_after, spawn_ranks
from training.config import PromptSpec
from training.config_io import load_config

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def _prompt_file(tmp_path: Path) -> Path:
    """Two prompts with images, on lines 1 and 3 (a blank line between: line numbers are the file's)."""
    from PIL import Image

    for name, level in (("a.png", 60), ("b.png", 200)):
        Image.fromarray(np.full((32, 32, 3), level, np.uint8)).save(tmp_path / name)
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"text": "push the block", "image": "a.png"}\n\n{"text": "pick up the cup", "image": "b.png"}\n')
    return path


def test_prompts_know_the_line_or_config_entry_they_came_from(tmp_path):
    from training.data import load_placed_prompts, load_prompts

    path = _prompt_file(tmp_path)
    prompts, places = load_placed_prompts([PromptSpec("open the drawer")], str(path))
    assert places == ["dataset[0]", f"{path}:1", f"{path}:3"]
    assert prompts == load_prompts([PromptSpec("open the drawer")], str(path))  # the digests' fields unchanged
    assert load_placed_prompts([PromptSpec("x")], None, "held-out")[1] == ["eval_dataset[0]"]


def test_launch_check_names_the_prompt_line_of_a_bad_image(tmp_path):
    """check_prompts said "prompt image not found: .../b.png", not which line of which file to fix."""
    from training.config import ConfigError
    from training.train import check_prompts

    path = _prompt_file(tmp_path)
    (tmp_path / "b.png").write_bytes(b"not a png")
    cfg = dataclasses.replace(load_config(SMOKE, []), dataset=[], dataset_file=str(path))
    with pytest.raises(ConfigError, match=rf"- {path}:3: prompt image {tmp_path / 'b.png'} cannot be read"):
        check_prompts(cfg)


def test_an_image_gone_mid_run_gives_a_stand_in_frame_and_a_reason_naming_its_line(tmp_path):
    from training.data import load_placed_prompts, synthetic_frame
    from training.prompt_failures import first_frames

    path = _prompt_file(tmp_path)
    prompts, places = load_placed_prompts([], str(path))
    (tmp_path / "b.png").unlink()
    cfg = load_config(SMOKE, [])
    frames, failed = first_frames(prompts, places, cfg, iteration=3, rank=0)
    assert failed[0] is None and frames[0].shape == (32, 32, 3) and (frames[0] == 60).all()
    failure = failed[1]
    assert failure is not None and failure.place == f"{path}:3" and failure.image == str(tmp_path / "b.png")
    assert failure.reason.startswith(f"prompt {path}:3 (image {tmp_path / 'b.png'}) skipped: its image cannot be "
                                     "read (FileNotFoundError: prompt image not found")
    assert np.array_equal(frames[1], synthetic_frame(0, 32, 32))  # the stand-in: never scored (module docstring)
    assert failure.record(3) == {"iteration": 3, "prompt": "pick up the cup", "place": f"{path}:3",
                                 "image": str(tmp_path / "b.png"), "reason": failure.reason}


def test_a_refused_clip_is_never_shown_to_the_reward():
    from training.reward_runner import RewardRunner

    calls = []

    def reward(videos, prompts, **meta):
        calls.append((list(prompts), meta["first_index"], meta["group_ids"]))
        return [1.0] * len(videos)

    videos = [np.zeros((2, 4, 4, 3), np.uint8)] * 4
    with RewardRunner(reward, "ones") as runner:
        out = runner.submit(videos, ["a", "a", "b", "b"], first_index=0, group_ids=[0, 0, 1, 1],
                            unscored=[None, "nan", None, None],
                            refused=[None, None, "prompt p:3 skipped", "prompt p:3 skipped"]).result(timeout=60)
    assert calls == [(["a"], 0, [0])]
    assert out.rewards == [1.0, None, None, None] and out.kinds == [None, "nan", "error", "error"]
    assert out.reasons[2:] == ["prompt p:3 skipped"] * 2 and out.counts["error"] == 2


def test_the_metrics_row_counts_failed_prompts():
    from tests.test_train_parts import _part
    from training.metrics import summarize

    row = summarize(1, [_part([1.0, 0.0], failed_prompts=1), _part([None, None], failed_prompts=0)])
    assert row["failed_prompts"] == 1


@pytest.mark.slow
def test_a_held_out_prompt_whose_image_is_gone_is_ineligible_and_the_others_are_scored(tmp_path):
    """The held-out evaluation encoded every prompt first, so one image gone since the launch check stopped
    the run there (a bare FileNotFoundError). Now its samples are ineligible naming the line; the others count."""
    import training.evaluate as ev
    from training.data import load_placed_prompts
    from training.models import build_world_model

    path = _prompt_file(tmp_path)
    prompts, places = load_placed_prompts([], str(path), "held-out")
    (tmp_path / "b.png").unlink()
    cfg = load_config(SMOKE, ["--eval_samples", "1", "--num_steps", "2", "--num_frames", "5"])
    model = build_world_model(cfg, "cpu").eval()
    seen = []
    part = ev.evaluate(model, cfg, prompts, lambda videos, texts, **meta: seen.append(list(texts)) or [0.5] * len(videos),
                       iteration=1, rank=0, world=1, places=places)
    assert seen == [["push the block"]]
    bad = [it for it in part["items"] if it["prompt"] == 1]
    assert len(bad) == 1 and all(it["reward"] is None and it["ineligible_kind"] == "error" and it["video"] is None
                                 and it["reason"].startswith(f"prompt {path}:3 (image ") for it in bad)
    row = ev.summarize_eval(1, [part])
    assert row["eval_ineligible_error"] == 1 and row["eval_reward_mean"] == 0.5 and row["eval_videos"] == 2


def _run_cfg(tmp_path: Path, path: Path, overlap: str = "groups"):
    cfg = load_config(SMOKE, ["--output_dir", str(tmp_path / "run"), "--progress", "false", "--tensorboard", "false",
                              "--max_iterations", "1", "--num_steps", "2", "--sde_window", "[0, 1]", "--export",
                              "none", "--num_frames", "5", "--rollout_videos_every", "1", "--reward_overlap", overlap])
    return dataclasses.replace(cfg, dataset=[], dataset_file=str(path))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow  # a whole training iteration in process (~15 s here)
@pytest.mark.parametrize("overlap", ["groups", "off"])  # rewards per group as sampled, or the rank's batch at once
def test_a_run_skips_the_group_whose_image_went_missing_and_trains_on(tmp_path, one_rank_env, capsys, overlap):
    """Two prompts, one image deleted after the launch check: the run stopped with a bare FileNotFoundError
    naming no prompt line. Now that group is skipped (its rollouts ineligible with the reason, no video) and
    the other is scored and trained on."""
    from training.train import check_prompts
    from training.trainer import train

    path = _prompt_file(tmp_path)
    cfg = dataclasses.replace(_run_cfg(tmp_path, path, overlap), eval_every=1, eval_dataset_file=str(path))
    check_prompts(cfg)  # the launch check passes
    (tmp_path / "b.png").unlink()
    out = train(cfg)
    row = _jsonl(out / "metrics.jsonl")[0]
    assert row["failed_prompts"] == 1 and row["update_skipped"] == 0 and row["skipped_groups"] == 1
    assert row["ineligible_error"] == 4 and row["ineligible_count"] == 4 and row["eligible_fraction"] == 0.5
    [failed] = _jsonl(out / "failed_prompts.jsonl")
    assert failed["iteration"] == 1 and failed["place"] == f"{path}:3" and failed["prompt"] == "pick up the cup"
    assert f"prompt {path}:3 (image {tmp_path / 'b.png'}) skipped" in failed["reason"]
    assert f"{path}:3" in capsys.readouterr().err
    items = _jsonl(out / "rewards.jsonl")
    skipped = [it for it in items if it["prompt"] == "pick up the cup"]
    assert len(skipped) == 4 and all(it["reward"] is None and it["reason"] == failed["reason"] for it in skipped)
    assert all(it["video"] is None and it["video_skipped"].endswith("; no video written") for it in skipped)
    scored = [it for it in items if it["prompt"] == "push the block"]
    assert len(scored) == 4 and all(it["reward"] is not None and it["advantage"] is not None for it in scored)
    assert len(list((out / "rollout_videos" / "iter_000001").iterdir())) == 4  # the stand-ins get none
    held_out = _jsonl(out / "eval_rewards.jsonl")  # the evaluations before and after the iteration go on too
    assert [(r["iteration"], r["prompt"], r["reward"] is None) for r in held_out] == [
        (0, 0, False), (0, 1, True), (1, 0, False), (1, 1, True)]
    assert all(r["reason"] == failed["reason"] for r in held_out if r["prompt"] == 1)


@pytest.mark.slow  # a training launch in process (~12 s here)
def test_a_run_whose_every_prompt_image_is_gone_stops_naming_them(tmp_path, one_rank_env):
    from training.prompt_failures import PromptImagesFailed
    from training.train import exit_status
    from training.trainer import train

    path = _prompt_file(tmp_path)
    cfg = _run_cfg(tmp_path, path)
    (tmp_path / "a.png").unlink()
    (tmp_path / "b.png").write_bytes(b"cut short")
    with pytest.raises(PromptImagesFailed, match=rf"iteration 1: the image of every prompt of the iteration \(2\) "
                                                 rf"could not be read.*{path}:[13]") as info:
        train(cfg)
    assert exit_status(info.value) == (2, True)
    assert sorted(f["place"] for f in _jsonl(tmp_path / "run" / "failed_prompts.jsonl")) == [f"{path}:1", f"{path}:3"]
    assert not (tmp_path / "run" / "metrics.jsonl").exists() or not _jsonl(tmp_path / "run" / "metrics.jsonl")


def test_every_prompt_failed_names_failed_prompts_jsonl_only_when_it_was_written(tmp_path):
    """PromptImagesFailed sent the user to failed_prompts.jsonl for every failure, also when writing it had just
    failed (a full disk): the file held none of them. It then names where they are, the ranks' warning lines."""
    from training.prompt_failures import PromptFailure, PromptImagesFailed

    failures = [PromptFailure("push the block", "p.jsonl:1", "a.png", "prompt p.jsonl:1 (image a.png) skipped")]
    record = tmp_path / "failed_prompts.jsonl"
    assert f"(all: {record})" in str(PromptImagesFailed(3, failures, tmp_path, record))
    unwritten = str(PromptImagesFailed(3, failures, tmp_path, record, recorded=False))
    assert f"(all: {record})" not in unwritten
    assert (f"(all: the ranks' stderr, their 'warning: iteration 3' lines; writing {record} failed, its error is "
            "printed above)") in unwritten


@pytest.mark.slow  # a training launch in process (~12 s here)
def test_a_run_that_cannot_write_failed_prompts_jsonl_does_not_send_the_user_there(tmp_path, one_rank_env,
                                                                                     monkeypatch):
    from training.metrics_log import MetricsLog
    from training.prompt_failures import PromptImagesFailed
    from training.trainer import train

    def full_disk(self, iteration, failures):  # noqa: ANN001, ANN202
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(MetricsLog, "write_failed_prompts", full_disk)
    path = _prompt_file(tmp_path)
    (tmp_path / "a.png").unlink()
    (tmp_path / "b.png").unlink()
    with pytest.raises(PromptImagesFailed, match=r"\(all: the ranks' stderr, their 'warning: iteration 1' lines; "
                                                 r"writing \S+failed_prompts.jsonl failed"):
        train(_run_cfg(tmp_path, path))


def _rank_run(rank: int, tmp: str, flags: list[str]) -> None:
    from training.trainer import train  # tests/launches.py set the rank's environment

    cfg = load_config(SMOKE, flags)
    try:
        train(dataclasses.replace(cfg, dataset=[], dataset_file=str(Path(tmp) / "prompts.jsonl")))
        Path(tmp, f"rank{rank}.done").write_text("ok")
    except Exception as exc:  # the test names it
        release_after(exc)
        Path(tmp, f"rank{rank}.done").write_text(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow  # two training processes (~40 s here)
@pytest.mark.distributed
def test_two_ranks_stay_in_step_when_one_ranks_only_prompt_fails(tmp_path):
    """Two ranks, one prompt each, ZeRO-3 (every forward gathers parameters from both ranks): the rank whose
    prompt image is gone samples a stand-in that is never scored, so both run the same encodes, rollouts and
    update micro-batches and finish the iteration; the other rank's group trains."""


    path = _prompt_file(tmp_path)
    (tmp_path / "b.png").unlink()
    flags = ["--output_dir", str(tmp_path / "run"), "--progress", "false", "--tensorboard", "false",
             "--max_iterations", "1", "--num_steps", "2", "--sde_window", "[0, 1]", "--export", "none",
             "--num_frames", "5", "--ds_config", "ds_zero3.json"]  # partitioned: forwards gather
    # out of step, a rank waits in a collective the other never runs: a hang
    spawn_ranks(_rank_run, (str(tmp_path), flags), tmp_path, deadline_s=180)
    row = _jsonl(tmp_path / "run" / "metrics.jsonl")[0]
    assert row["failed_prompts"] == 1 and row["ineligible_error"] == 4 and row["update_skipped"] == 0
    [failed] = _jsonl(tmp_path / "run" / "failed_prompts.jsonl")
    assert failed["place"] == f"{path}:3"
    assert {it["prompt"] for it in _jsonl(tmp_path / "run" / "rewards.jsonl") if it["advantage"] is not None} == {
        "push the block"}
