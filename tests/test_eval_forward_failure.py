"""A held-out evaluation whose transformer forward raises on one rank (training/evaluate.py, module docstring).

Under ZeRO-3 each transformer forward gathers the parameters the engine partitions from every rank. `evaluate`
caught the forward's exception with the decode errors, skipped that sample and sampled the rank's other items, so
that rank's gathers paired with the other ranks' gathers of other parameters, and it then waited in the gather
of the ranks' results while they were still gathering parameters: a hang until the collective timeout, naming no
error. Now that rank stops alone at once, as a failure in the rollouts' forwards does (`Tried(exit_alone=...)`):
one line naming it and the error, the run's files closed, no forward and no collective after the failed one.
A decode error (after the sample's forwards) is still agreed by every rank (RankFailed).

These run one process as rank 1 of 2 (no torch.distributed: the gathers return this rank's part alone); the
two-rank ZeRO-3 run is tests/test_rank_failures.py ``zero3_eval_forward`` (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config import PromptSpec
from training.config_io import load_config
from training.metrics_log import MetricsLog
from training.models import build_world_model
from training.rank_failures import RankFailed

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"
HELD_OUT = [PromptSpec("push the red block to the left", image_seed=11), PromptSpec("open the drawer", image_seed=12),
            PromptSpec("stack the blocks", image_seed=13)]


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, partitioned: bool, fail_forward: int | None = None,
         fail_decode: bool = False, world: int = 2) -> tuple[list[str], int, Exception]:
    """(what happened: "close" and each transformer forward, the forwards run, the exception raised) of rank 1's
    part of a 2-rank evaluation of 3 prompts x 2 samples (3 items each, 2 steps: 6 forwards); ``world=1``: the one
    rank's evaluation of them all."""
    import training.evaluate as ev

    cfg = load_config(SMOKE, ["--eval_samples", "2", "--num_steps", "2", "--output_dir", str(tmp_path)])
    model = build_world_model(cfg, "cpu").eval()
    events: list[str] = []

    def forward(*_a: object) -> None:
        events.append("forward")
        if fail_forward is not None and events.count("forward") == fail_forward:
            raise RuntimeError("CUDA out of memory")

    model.transformer.register_forward_pre_hook(forward)
    if fail_decode:
        real = ev.decode_each

        def broken(*args: object) -> object:
            real(*args)
            raise RuntimeError("decode failed")

        monkeypatch.setattr(ev, "decode_each", broken)
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)
    try:
        with pytest.raises(Exception) as raised:
            ev.evaluate_everywhere(model, cfg, HELD_OUT, lambda videos, prompts, **meta: [0.5] * len(videos), log,
                                   tmp_path / "checkpoints", iteration=0, rank=world - 1, world=world, places=None,
                                   key=None, close=lambda code: events.append("close"), partitioned=partitioned)
    finally:
        log.close()
    return events, events.count("forward"), raised.value


def test_under_zero3_a_failed_held_out_forward_ends_its_rank_at_once(tmp_path, monkeypatch, capsys):
    events, forwards, exc = _run(tmp_path, monkeypatch, partitioned=True, fail_forward=2)  # the first sample's second step
    assert type(exc) is RuntimeError and str(exc) == "CUDA out of memory"  # not agreed: the others never could
    assert events == ["forward", "forward", "close"] and forwards == 2  # no forward after the failed one
    err = capsys.readouterr().err
    assert "rank 1: the held-out evaluation failed (RuntimeError: CUDA out of memory); this rank stops alone" in err


def test_under_zero3_a_held_out_decode_error_is_still_agreed_after_every_forward(tmp_path, monkeypatch):
    events, forwards, exc = _run(tmp_path, monkeypatch, partitioned=True, fail_decode=True)
    assert isinstance(exc, RankFailed) and "the held-out evaluation failed on rank 1 (RuntimeError: decode" in str(exc)
    assert forwards == 6 and events[-1] == "close"  # every item's forwards, in step with the other rank's


def test_without_zero3_a_failed_held_out_forward_is_agreed(tmp_path, monkeypatch):
    events, forwards, exc = _run(tmp_path, monkeypatch, partitioned=False, fail_forward=2)
    assert isinstance(exc, RankFailed) and "(RuntimeError: CUDA out of memory)" in str(exc)
    assert events[-1] == "close" and forwards == 2  # nothing waits for its other forwards


@pytest.mark.parametrize("partitioned", [False, True])
def test_one_ranks_failed_held_out_forward_names_the_iteration_and_the_resume(tmp_path, monkeypatch, partitioned):
    """With one rank the forward's exception passed through as it was: the user read "error: CUDA out of memory"
    alone, without the iteration, the last checkpoint or --resume that two ranks' RankFailed names, and the run's
    files were left open. One rank now stops as several do (under ZeRO-3 too: no other rank is in a gather)."""
    events, forwards, exc = _run(tmp_path, monkeypatch, partitioned=partitioned, fail_forward=2, world=1)
    assert isinstance(exc, RankFailed) and str(exc).startswith("iteration 0: the held-out evaluation failed")
    assert "(RuntimeError: CUDA out of memory)" in str(exc) and "Last checkpoint: none yet" in str(exc)
    assert "start the run again without --resume" in str(exc) and exc.failure.code == 1  # no checkpoint yet
    assert events[-1] == "close" and forwards == 2
