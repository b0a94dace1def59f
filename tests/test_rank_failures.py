"""A failure on one rank in a per-rank part of an iteration (training/rank_failures.py): the held-out evaluation,
rank 0's eval.jsonl write, the checkpoint's markers, rank 0's metrics.jsonl write, an iteration's rollouts and rewards (a reward returning the wrong number of rewards on one rank). It ended that rank alone and left the other waiting in
its next collective until the launcher killed it (a hang, then a timeout naming no error). Now every rank stops
with the same RankFailed naming the failing rank and the error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.launches import release_after, spawn_ranks
from training.config_io import load_config
from training.rank_failures import RankFailed, RankFailure, Tried, attempt, first_failure, stop_on

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def test_the_lowest_failing_rank_is_the_one_named():
    two, one = RankFailure(2, "x", "OSError: disk full", 1), RankFailure(1, "x", "RuntimeError: decode", 1)
    assert first_failure([None, two, one]) == one and first_failure([None, None]) is None


def test_attempt_keeps_the_exit_code_of_a_known_failure_and_prints_the_traceback(capsys):
    from training.reward_outcome import RewardLengthError

    def broken() -> None:
        raise RewardLengthError("reward 'x' returned 3 rewards for 4 videos")

    assert attempt(0, "x", max, 7, 3) == (7, None)
    value, failure = attempt(1, "the held-out evaluation", broken)
    assert value is None and failure is not None and failure.rank == 1 and failure.code == 2
    assert failure.what == "the held-out evaluation"
    assert failure.error == "RewardLengthError: reward 'x' returned 3 rewards for 4 videos"
    err = capsys.readouterr().err
    assert err.startswith("rank 1: the held-out evaluation failed:\nTraceback") and "in broken" in err


def test_tried_keeps_a_failure_of_several_ranks_and_of_one(capsys):
    from training.reward_outcome import RewardLengthError

    with Tried(1, 2, "sampling and scoring the iteration's rollouts") as tried:
        raise RewardLengthError("reward 'x' returned 3 rewards for 4 videos")
    assert tried.failure == RankFailure(1, "sampling and scoring the iteration's rollouts",
                                        "RewardLengthError: reward 'x' returned 3 rewards for 4 videos", 2)
    assert capsys.readouterr().err.startswith("rank 1: sampling and scoring the iteration's rollouts failed:\n")
    with Tried(0, 2, "x") as fine:
        pass
    assert fine.failure is None
    # one rank: kept too, so that it stops as RankFailed naming the iteration, the last checkpoint and --resume
    # (it passed through as it was: "error: <text>" alone, the run's files left open); under ZeRO-3 too, as no
    # other rank waits in a parameter gather
    closed = []
    for alone in (None, lambda code: closed.append(1)):
        with Tried(0, 1, "x", exit_alone=alone) as one:
            raise RewardLengthError("reward 'x' returned 3 rewards for 4 videos")
        assert one.failure == RankFailure(0, "x", "RewardLengthError: reward 'x' returned 3 rewards for 4 videos", 2)
        assert capsys.readouterr().err.startswith("rank 0: x failed:\nTraceback")  # once: main prints no other
    assert closed == []
    with pytest.raises(KeyboardInterrupt), Tried(0, 2, "x"):
        raise KeyboardInterrupt


def test_under_zero3_a_rollout_failure_ends_its_rank_at_once_after_closing(capsys):
    """Under ZeRO-3 every transformer forward of the rollouts gathers parameters from all ranks (the VAE and the
    encoders are outside the partitioned module): a rank whose failure was kept for the update's all_reduce left the others in their next gather, each
    rank in another collective, until the collective timeout (gloo: 30 minutes) ended the run naming no error. The
    failure now passes through on that rank after the run's files are closed, so its process ends and the others
    stop at once (gloo's closed connections, the launcher)."""
    from training.reward_outcome import RewardLengthError

    closed = []
    with pytest.raises(RewardLengthError), Tried(1, 2, "x", exit_alone=closed.append):  # closed with its exit code
        raise RewardLengthError("reward 'x' returned 3 rewards for 4 videos")
    assert closed == [2] and capsys.readouterr().err.startswith("rank 1: x failed (RewardLengthError: reward 'x'")
    with Tried(1, 2, "x", exit_alone=lambda code: closed.append(2)) as fine:
        pass
    assert fine.failure is None and closed == [2]  # nothing closed without a failure


def test_under_zero3_a_failure_after_the_last_forward_is_still_agreed(capsys):
    """Past the block's last ZeRO-3 forward (``tried.forwards_done``: the rewards' answers, the advantages) every
    rank has run all its parameter gathers, so the ranks meet in the update's all_reduce: a failure there (a reward
    that answers with too few rewards on one rank) is kept for `agreed_count`, named as what was being done then,
    and RankFailed stops every rank, instead of ending its rank alone while the others stop on gloo's closed
    connection naming no error."""
    from training.reward_outcome import RewardLengthError

    closed = []
    with Tried(1, 2, "sampling the iteration's rollouts", exit_alone=lambda code: closed.append(1)) as tried:
        tried.forwards_done("scoring the iteration's rollouts")
        raise RewardLengthError("reward 'x' returned 3 rewards for 4 videos")
    assert closed == [] and tried.failure is not None
    assert (tried.failure.rank, tried.failure.what) == (1, "scoring the iteration's rollouts")
    assert tried.failure.error.startswith("RewardLengthError: reward 'x' returned 3")
    assert capsys.readouterr().err.startswith("rank 1: scoring the iteration's rollouts failed:\nTraceback")


def test_every_rank_exits_with_the_failing_ranks_code(tmp_path):
    from training.train import exit_status

    failure = RankFailure(1, "the held-out evaluation", "StoreError: trace db locked", 2)
    exc = RankFailed(3, failure, tmp_path / "checkpoints", world=2)
    assert exit_status(exc) == (2, True)
    assert str(exc).startswith("iteration 3: the held-out evaluation failed on rank 1 (StoreError: trace db "
                               "locked); every rank stopped")
    assert "Last checkpoint: none yet" in str(exc)


def test_a_stop_before_any_checkpoint_says_to_start_again_not_to_resume(tmp_path):
    """A failure before the first checkpoint (the baseline evaluation of a fresh run, an iteration before
    checkpoint_every) said "Last checkpoint: none yet; fix the cause, then continue with --resume", and --resume
    then refused: no checkpoint to continue from (training/resume.py). With a checkpoint it still says --resume."""
    from training.preemption import TrainingDiverged
    from training.prompt_failures import PromptFailure, PromptImagesFailed

    failure = RankFailure(0, "the held-out evaluation", "RuntimeError: CUDA out of memory", 1)
    ckpt_dir = tmp_path / "checkpoints"
    images = [PromptFailure("open the drawer", "prompts.jsonl:1", "a.png", "prompts.jsonl:1: a.png: FileNotFoundError")]
    stops = [RankFailed(0, failure, ckpt_dir, world=1), TrainingDiverged(3, 1, ckpt_dir),
             PromptImagesFailed(2, images, ckpt_dir, tmp_path / "failed_prompts.jsonl")]
    for text in map(str, stops):
        assert "none yet" in text and "start the run again without --resume" in text, text
        assert "continue with --resume" not in text and "(--resume)" not in text, text
        # --overwrite_output_dir deletes the attempt's logs (a divergence's record): the message says so, and the
        # way that keeps them (training/run_dir.py's refusal offers both)
        assert "which deletes its logs" in text and "or set another output_dir" in text, text
    ckpt_dir.mkdir()
    (ckpt_dir / "latest").write_text("iter_000002")
    again = [RankFailed(4, failure, ckpt_dir, world=1), TrainingDiverged(3, 1, ckpt_dir),
             PromptImagesFailed(4, images, ckpt_dir, tmp_path / "failed_prompts.jsonl")]
    for text in map(str, again):
        assert str(ckpt_dir / "iter_000002") in text and "--resume" in text and "without --resume" not in text, text


def test_a_first_checkpoint_saved_before_latest_moved_is_not_to_be_overwritten(tmp_path):
    """The first checkpoint saved in full (its layout.json written), then its prompt stamp or ``latest`` failed (a
    quota): no ``latest``, so the stop said "none yet; start the run again without --resume (... add
    --overwrite_output_dir ...)", and following it deleted a checkpoint that resumes once ``latest`` names it
    (training/resume.py says so). The message names it and that way on."""
    from training.preemption import TrainingDiverged
    from training.run_dir import LAYOUT_FILE

    ckpt_dir = tmp_path / "checkpoints"
    (ckpt_dir / "iter_000010").mkdir(parents=True)
    (ckpt_dir / "iter_000010" / LAYOUT_FILE).write_text("{}")
    (ckpt_dir / "iter_000020").mkdir()  # a later save killed part-way (no layout.json): not a checkpoint
    failure = RankFailure(0, "finishing checkpoint iter_000010", "OSError: [Errno 122] Disk quota exceeded", 1)
    for text in map(str, [RankFailed(10, failure, ckpt_dir, world=1), TrainingDiverged(13, 1, ckpt_dir)]):
        assert "none yet" not in text and "without --resume" not in text and "--overwrite_output_dir" not in text, text
        assert f"write iter_000010 into {ckpt_dir / 'latest'}, then continue with --resume" in text, text


def test_one_ranks_stop_does_not_say_every_rank_stopped(tmp_path):
    """A single-GPU run's RankFailed said "every rank stopped (rank 0's stderr has the traceback)": there is no
    other rank, and the traceback is the one printed just above it."""
    failure = RankFailure(0, "updating the policy", "RuntimeError: CUDA out of memory", 1)
    text = str(RankFailed(2, failure, tmp_path, world=1))
    assert text.startswith("iteration 2: updating the policy failed on rank 0 (RuntimeError: CUDA out of memory); "
                           "the run stopped (its traceback is printed above). Last checkpoint: none yet"), text
    assert "every rank" not in text
    with pytest.raises(RankFailed, match=r"\); the run stopped \(its traceback"):  # no process group: one process
        stop_on([None, failure], 2, tmp_path)


def _patch(case: str, rank: int) -> None:
    """Make ``case`` fail on its rank, in this spawned rank's process."""
    if case in ("eval_decode", "zero3_eval_decode") and rank == 1:  # after the transformer forwards, as a VAE
        import training.evaluate as ev  # decode error would

        decode = ev.decode_each

        def broken(*args, **kwargs):
            decode(*args, **kwargs)
            raise RuntimeError("decode failed")

        ev.decode_each = broken
    if case == "zero3_eval_forward" and rank == 1:  # the held-out evaluation's first sample's second forward
        import training.evaluate as ev

        latents = ev.ode_latents

        def failing(model, *args, **kwargs):
            calls = []

            def forward(*_a):
                calls.append(1)
                if len(calls) == 2:
                    raise RuntimeError("CUDA out of memory")

            hook = model.transformer.register_forward_pre_hook(forward)
            try:
                return latents(model, *args, **kwargs)
            finally:
                hook.remove()

        ev.ode_latents = failing
    if case in ("zero3_eval_encode", "zero3_encode") and rank == 1:  # a prompt's encode, before any forward
        import training.models as md

        def broken_encode(*args, **kwargs):
            raise RuntimeError("encode failed")

        md.encode_frame = broken_encode
    if case == "eval_write" and rank == 0:
        from training.metrics_log import MetricsLog

        def full(self, row, items):
            raise OSError(28, "No space left on device", str(self.eval_path))

        MetricsLog.write_evaluation = full
    if case.startswith("metrics_write") and rank == 0:
        from training.metrics_log import MetricsLog

        def no_space(self, row, parts):
            raise OSError(28, "No space left on device", str(self.path))

        MetricsLog.write_iteration = no_space
    if case in ("reward_length", "zero3_reward_length") and rank == 1:  # a reward that answers with one reward too few, on this rank alone
        import training.rewards as rw

        def short_reward(*args, **kwargs):
            def short(videos, prompts, **meta):
                return [0.5] * (len(videos) - 1)

            return short

        rw.build_reward = short_reward
    if case == "zero3_decode" and rank == 1:  # its first group's decode; the second group's rollouts still owed
        import training.trainer as tr

        def broken_decode(*args, **kwargs):
            raise RuntimeError("decode failed")

        tr.decode_group = broken_decode
    if case == "zero3_update" and rank == 1:  # the update's backward, with the other rank in its collectives
        import training.trainer as tr

        def out_of_memory(*args, **kwargs):
            raise RuntimeError("CUDA out of memory in backward")

        tr.update_policy = out_of_memory
    if case == "checkpoint_marker" and rank == 0:
        import training.checkpointing as ck

        def full(folder, *args, **kwargs):
            raise OSError(28, "No space left on device", str(folder / "layout.json"))

        ck.write_layout = full


def _rank_run(rank: int, tmp: str, case: str, flags: list[str]) -> None:
    _patch(case, rank)
    train_and_record(rank, tmp, flags)


def train_and_record(rank: int, tmp: str, flags: list[str]) -> None:
    """A spawned rank's smoke run with `flags` (tests/launches.py set its environment), its outcome ("finished", or
    the error's type and text) written to `tmp`/rank{rank}.txt for the test to compare."""
    from training.trainer import train

    try:
        train(load_config(SMOKE, flags))
        outcome = "finished"
    except Exception as exc:  # the test compares them
        outcome = f"{type(exc).__name__}: {exc}"
        release_after(exc)
    Path(tmp, f"rank{rank}.txt").write_text(outcome)
    Path(tmp, f"rank{rank}.done").write_text("ok")


NO_SPACE = "OSError: [Errno 28] No space left on device"
EVAL = ["--eval_every", "1", "--eval_samples", "1", "--eval_dataset", "[{text: 'open the drawer', image_seed: 3}]"]
CASES = {  # case: (what failed, failing rank, its error, the iteration, flags, metrics.jsonl's iterations)
    "eval_decode": ("the held-out evaluation", 1, "RuntimeError: decode failed", 0, EVAL, []),
    "eval_write": ("writing the held-out evaluation's logs", 0, NO_SPACE, 0, EVAL, []),
    # under ZeRO-3 a decode error comes after the sample's forwards: the rank samples on and it is agreed
    "zero3_eval_decode": ("the held-out evaluation", 1, "RuntimeError: decode failed", 0,
                          [*EVAL, "--ds_config", "ds_zero3.json"], []),
    # agreed before the evaluation's first transformer forward: under ZeRO-3 the other rank was in its parameter
    # gather while the failing rank waited in the gather of the ranks' results
    "zero3_eval_encode": ("encoding the held-out prompts", 1, "RuntimeError: encode failed", 0,
                          [*EVAL, "--ds_config", "ds_zero3.json"], []),
    # phases 1-3 of an iteration (rollouts, decode, reward, advantages): agreed in the update's first all_reduce
    "reward_length": ("scoring the iteration's rollouts", 1, "RewardLengthError: reward", 1, [], []),
    # under ZeRO-3 too (every parameter partitioned): the reward's answers come after the last forward
    "zero3_reward_length": ("scoring the iteration's rollouts", 1, "RewardLengthError: reward", 1,
                            ["--ds_config", "ds_zero3.json"], []),
    # agreed in the iteration's first gather, before its first forward (ZeRO-3: it used to end rank 1 alone)
    "zero3_encode": ("encoding the iteration's prompts", 1, "RuntimeError: encode failed", 1,
                     ["--ds_config", "ds_zero3.json"], []),
    "checkpoint_marker": ("finishing checkpoint iter_000001", 0, NO_SPACE, 1, [], [1]),
    # agreed at the next iteration's first gather, or after the last iteration (where a barrier was)
    "metrics_write": ("writing the iteration's logs", 0, NO_SPACE, 1, ["--max_iterations", "2"], []),
    "metrics_write_last": ("writing the iteration's logs", 0, NO_SPACE, 1, [], []),
}


@pytest.mark.slow  # two training processes (~30 s each here)
@pytest.mark.distributed
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_failure_on_one_rank_stops_every_rank_naming_it(tmp_path, case):
    what, failing, error, iteration, extra, logged = CASES[case]
    flags = ["--output_dir", str(tmp_path / "run"), "--progress", "false", "--tensorboard", "false",
             "--max_iterations", "1", "--num_steps", "2", "--sde_window", "[0, 1]", "--export", "none",
             "--num_frames", "5", *extra]
    spawn_ranks(_rank_run, (str(tmp_path), case, flags), tmp_path, deadline_s=150)
    outcomes = [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert outcomes[0] == outcomes[1], outcomes  # the same stop on every rank
    assert outcomes[0].startswith(f"RankFailed: iteration {iteration}: {what} failed on rank {failing} ({error}"), \
        outcomes
    metrics = tmp_path / "run" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    assert [r["iteration"] for r in rows] == logged


ALONE = {  # case: (rank 1's error, flags)
    # two groups per rank: rank 1's first decode fails, so it never runs its second group's forwards
    "zero3_decode": ("RuntimeError: decode failed", ["--prompts_per_iteration", "4"]),
    # the held-out evaluation's first sample's second forward fails on rank 1: it sampled on, out of step
    "zero3_eval_forward": ("RuntimeError: CUDA out of memory", EVAL),
    # the update: its backward and step are collectives (any ZeRO stage), rank 0 waits in one of them
    "zero3_update": ("RuntimeError: CUDA out of memory in backward", []),
}


@pytest.mark.slow  # two training processes
@pytest.mark.distributed
@pytest.mark.parametrize("case", sorted(ALONE))
def test_under_zero3_a_forward_failure_on_one_rank_stops_both_at_once(tmp_path, case):
    """ZeRO-3 with every parameter partitioned (ds_zero3.json): a failure on rank 1 leaves forwards the other rank
    runs (each gathers parameters from every rank) that it will not run. It waited in the update's all_reduce (the
    rollouts) or the gather of the evaluation's results, rank 0 in a parameter gather, both until gloo's 30-minute
    timeout. Now rank 1 raises its error and ends, and rank 0 stops at once on the closed connection."""
    error, extra = ALONE[case]
    flags = ["--output_dir", str(tmp_path / "run"), "--progress", "false", "--tensorboard", "false",
             "--max_iterations", "1", "--num_steps", "2", "--sde_window", "[0, 1]", "--export", "none",
             "--num_frames", "5", "--ds_config", "ds_zero3.json", *extra]
    spawn_ranks(_rank_run, (str(tmp_path), case, flags), tmp_path, deadline_s=150)
    outcomes = [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert outcomes[1] == error, outcomes
    assert outcomes[0] != "finished", outcomes  # stopped by the closed connection, not after a timeout


def test_under_zero3_a_rank_exiting_alone_prints_its_traceback_once(tmp_path, capsys, monkeypatch, followed_launchers):
    """Tried's exit-alone path printed the traceback, then let the exception pass through, and training.train's main
    re-raised an exception it does not know, whose traceback the interpreter printed again: two identical stacks
    per failure on that rank. It now says which rank failed doing what in one line, and the traceback comes once,
    from the exception passing through (a known failure: main's one "error:" line, as with one rank)."""
    import training.trainer
    from training.reward_outcome import RewardLengthError
    from training.train import main

    def failing(error: Exception):  # noqa: ANN202
        def train(*_a, **_k):  # noqa: ANN202
            with Tried(1, 2, "sampling the iteration's rollouts", exit_alone=lambda code: None):
                raise error
        return train

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = ["--config", str(SMOKE), "--output_dir", str(tmp_path / "run")]
    monkeypatch.setattr(training.trainer, "train", failing(RuntimeError("decode failed")))
    with pytest.raises(RuntimeError, match="decode failed"):  # its traceback: the interpreter's, once
        main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert "rank 1: sampling the iteration's rollouts failed (RuntimeError: decode failed)" in err
    monkeypatch.setattr(training.trainer, "train", failing(RewardLengthError("reward 'x' returned 3 rewards")))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "error: reward 'x' returned 3 rewards", err
