"""What a run opened, closed when it ends (training/run_end.py ``Opened``, training/metrics_log.py
``MetricsLog.close``). Each stopped at the first close that raised: a reward runner that could not close left the
rollout-video writer, the metrics log (TensorBoard, W&B) and the signal handlers open, and a TensorBoard writer
that could not close left the W&B run unfinished. Every close is now attempted, and the first error raised with
the later ones as notes."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import pytest

from training.closing import close_each
from training.run_end import Opened


class Closing:
    """A stand-in for one thing the run opened: records its close, raising ``error`` there when given."""

    def __init__(self, calls: list[str], name: str, error: Exception | None = None) -> None:
        self.calls, self.name, self.error = calls, name, error

    def close(self, exit_code: int = 0) -> None:  # MetricsLog.close's and WandbRun.finish's exit code: unused
        self.calls.append(self.name)
        if self.error is not None:
            raise self.error

    finish = uninstall = destroy = close


def test_every_close_runs_and_the_first_error_is_raised_with_the_later_ones_noted():
    calls: list[str] = []
    first, later = OSError("reward runner: loop gone"), RuntimeError("wandb finish: connection refused")
    with pytest.raises(OSError) as info:
        close_each([Closing(calls, "a", first).close, Closing(calls, "b").close, Closing(calls, "c", later).close])
    assert calls == ["a", "b", "c"] and info.value is first
    assert info.value.__notes__ == ["closing also failed: RuntimeError: wandb finish: connection refused"]
    close_each([Closing(calls, "d").close])  # nothing raised: nothing to raise
    assert calls[-1] == "d"
    with pytest.raises(KeyboardInterrupt):  # a Ctrl-C is not held back for the other closes
        close_each([Closing(calls, "e", KeyboardInterrupt()).close, Closing(calls, "f").close])
    assert calls[-1] == "e"


def test_opened_closes_the_logs_and_the_signal_handlers_after_a_close_that_raised(tmp_path):
    calls: list[str] = []
    video_writer = ThreadPoolExecutor(1)
    opened = Opened(log=Closing(calls, "log"), rewards=Closing(calls, "rewards", OSError("loop gone")),  # type: ignore[arg-type]
                    video_writer=video_writer, bar=Closing(calls, "bar"),
                    stops=Closing(calls, "stops"), engine=Closing(calls, "engine"))  # type: ignore[arg-type]
    with pytest.raises(OSError, match="loop gone"):
        opened.close()
    assert calls == ["rewards", "bar", "log", "stops", "engine"]  # the engine last
    with pytest.raises(RuntimeError, match="after shutdown"):
        video_writer.submit(print)
    opened.close()  # a second close (the run's end after a stop closed them) closes nothing again
    assert calls == ["rewards", "bar", "log", "stops", "engine"]


def test_opened_closes_what_is_open_on_any_way_out_and_raises_the_runs_own_error(capsys):
    """training/run_start.py opens the logs before the model loads; a failure before the engine was built (or one
    raised in the loop outside the agreed stops) left them open. Closing what was opened so far; an error that
    closing raises is printed, the run's own raised."""
    calls: list[str] = []
    with pytest.raises(ValueError, match="latent shape"), Opened() as opened:
        opened.log = Closing(calls, "log", RuntimeError("wandb finish: connection refused"))  # type: ignore[assignment]
        raise ValueError("latent shape")
    assert calls == ["log"] and "wandb finish: connection refused" in capsys.readouterr().err
    with Opened() as opened:  # a run that ends without an exception: what is still open is closed too
        opened.bar = Closing(calls, "bar")
    assert calls == ["log", "bar"]


def test_a_tensorboard_writer_that_cannot_close_leaves_no_wandb_run_open(tmp_path):
    from training.metrics_log import MetricsLog

    calls: list[str] = []
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False)
    log.writer = Closing(calls, "tensorboard", OSError("No space left on device"))  # type: ignore[assignment]
    log.wandb = Closing(calls, "wandb")  # type: ignore[assignment]
    with pytest.raises(OSError, match="No space left"):
        log.close()
    assert calls == ["tensorboard", "wandb"] and log.wandb is None


def test_a_run_whose_last_logs_failed_still_closes_them_before_it_stops(tmp_path):
    """training/run_end.py ``finish`` skipped ``close()`` on the rank whose logs of an iteration could not be written
    (``unlogged or attempt(close)``): the stop was raised with TensorBoard unflushed, the W&B run unfinished, the
    reward runner and the signal handlers left as they were."""
    from training.config import TrainConfig
    from training.rank_failures import RankFailed, RankFailure
    from training.run_end import finish

    calls: list[str] = []
    exit_codes: list[int] = []
    log = Closing(calls, "log")
    log.close = lambda exit_code=0: (exit_codes.append(exit_code), calls.append("log"))  # type: ignore[method-assign]
    opened = Opened(log=log, rewards=Closing(calls, "rewards"), stops=Closing(calls, "stops"))  # type: ignore[arg-type]
    unlogged = RankFailure(0, "writing the iteration's logs", "OSError: [Errno 28] No space left on device", 1)
    with pytest.raises(RankFailed, match="writing the iteration's logs failed on rank 0"):
        finish(TrainConfig(), rank=0, start=0, done=3, unlogged=unlogged, opened=opened, ckpt_dir=tmp_path)
    # the logs last, with the stop's exit code, and the signal handlers with them (a SIGTERM in W&B's finish: a flag)
    assert calls == ["rewards", "log", "stops"] and exit_codes == [1]


def test_a_finished_runs_logs_that_cannot_close_stop_it_after_the_agreement(tmp_path, monkeypatch):
    """The logs close after the ranks agreed on the rest (W&B's finish with the agreed exit code); a log that
    cannot close then (W&B's finish failed) is still agreed, and every rank stops on it. With ``export: final``
    rank 0's logs close after its export (tests below), alone: a log that cannot close stops rank 0 alone."""
    import deepspeed.comm

    import training.run_end
    from training.config import TrainConfig
    from training.rank_failures import RankFailed
    from training.run_end import finish

    monkeypatch.setattr(deepspeed.comm, "destroy_process_group", lambda: None)  # none here
    monkeypatch.setattr(training.run_end, "export_policy", lambda cfg, out, *, checkpoint_dir: out)
    for export in ("none", "final"):
        calls: list[str] = []
        opened = Opened(log=Closing(calls, "log", OSError("wandb finish: connection refused")),  # type: ignore[arg-type]
                        rewards=Closing(calls, "rewards"))  # type: ignore[arg-type]
        cfg = TrainConfig(export=export, output_dir=str(tmp_path / "run"))
        with pytest.raises(RankFailed, match="closing the run's logs failed on rank 0") as info:
            finish(cfg, rank=0, start=0, done=3, unlogged=None, opened=opened, ckpt_dir=tmp_path)
        assert calls == ["rewards", "log"]
        # the run had ended (and exported): "continue with --resume" sent the user to resume a finished run
        exported = f" and the policy was exported to {tmp_path / 'run' / 'final'}" if export == "final" else ""
        assert str(info.value).endswith(f"training had finished{exported}: nothing is left to resume "
                                        "(metrics.jsonl has every iteration)")


@pytest.mark.parametrize(("raised", "code"), [(None, None), (ValueError("latent shape"), 1),
                                              (KeyboardInterrupt(), 130)])
def test_a_run_that_leaves_with_an_exception_marks_its_wandb_run_failed(tmp_path, monkeypatch, raised, code):
    """``Opened`` closes the logs on every way out, W&B's run too; finished with no exit code, W&B records a run
    that crashed (a model that could not load, a bug in the loop, a Ctrl-C) as "Finished", where wandb's own exit
    hook, which the open run was left to before, marked it failed. The run's exit code goes to W&B's finish."""
    calls = _fake_wandb(monkeypatch)
    with pytest.raises(type(raised)) if raised is not None else contextlib.nullcontext(), Opened() as opened:
        opened.log = _wandb_log(tmp_path)
        if raised is not None:
            raise raised
    assert calls[-1] == (("finish",) if code is None else ("finish", code))


def _fake_wandb(monkeypatch) -> list:  # noqa: ANN001
    """The calls the fake W&B run of tests/test_wandb_log.py records, with ``wandb.init`` handing it out."""
    import sys

    from tests.test_wandb_log import _Run

    calls: list = []
    monkeypatch.setitem(sys.modules, "wandb", type(sys)("wandb"))
    sys.modules["wandb"].init = lambda **kwargs: _Run(calls)  # type: ignore[attr-defined]
    return calls


def _wandb_log(tmp_path):  # noqa: ANN001, ANN202
    from training.metrics_log import MetricsLog

    return MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False, wandb_project="grpo")


def test_an_agreed_stop_ends_its_wandb_run_failed_with_the_stops_exit_code(tmp_path, monkeypatch):
    """The agreed stops (RankFailed, TrainingDiverged, RewardsStalled, PromptImagesFailed, TrainingStopped) close
    what the run opened before they are raised, and that close finished the W&B run with exit code 0: W&B read
    "Finished" for a run that stopped on a broken reward or a diverged policy. The close before a stop now
    passes the stop's exit code (training/train.py ``exit_status``), and Opened's own close after it closes
    nothing again."""
    from training.preemption import TrainingDiverged, TrainingStopped
    from training.rank_failures import RankFailed, RankFailure, Tried, closed_before_stop, stop_on

    calls = _fake_wandb(monkeypatch)
    broken = RankFailure(1, "scoring the iteration's rollouts", "RewardLengthError: 3 rewards for 4 clips", 2)
    with pytest.raises(RankFailed), Opened() as opened:
        opened.log = _wandb_log(tmp_path)
        stop_on([None, broken], 3, tmp_path, opened.close)
    assert calls[-1] == ("finish", 2) and calls.count(("finish", 2)) == 1

    for stop, code in [(TrainingDiverged(4, 1, tmp_path), 1), (TrainingStopped(4, 15, "ckpt"), 128 + 15)]:
        with pytest.raises(type(stop)), Opened() as opened:
            opened.log = _wandb_log(tmp_path)
            closed_before_stop(opened.close, stop)
            raise stop
        assert calls[-1] == ("finish", code)

    with pytest.raises(OSError), Opened() as opened:  # a rank that stops alone (ZeRO-3's forwards): its exception's
        opened.log = _wandb_log(tmp_path)  # code, 1 for one exit_status does not know
        with Tried(0, 2, "updating the policy", exit_alone=opened.close):
            raise OSError("CUDA out of memory")
    assert calls[-1] == ("finish", 1)


def test_a_finished_runs_wandb_run_ends_with_the_exit_code_of_another_ranks_failure(tmp_path, monkeypatch):
    """``finish`` closed what the run opened, the W&B run too, before the ranks agreed on how the run ended: when
    the failure the run stops on was another rank's (rank 1 could not close its reward runner, say), rank 0's W&B
    run had already finished with exit code 0, "Finished" for a run that exits 1. The W&B run now ends after the
    agreement, with its exit code."""
    import training.metrics
    from training.config import TrainConfig
    from training.rank_failures import RankFailed, RankFailure
    from training.run_end import finish

    calls = _fake_wandb(monkeypatch)
    other = RankFailure(1, "closing what the run opened", "OSError: reward runner: loop gone", 3)
    real_gather = training.metrics.gather
    # rank 1's part of the agreement (one process here: rank 0's own part, then rank 1's)
    monkeypatch.setattr(training.metrics, "gather", lambda local: [*real_gather(local), {"failure": other}])
    opened = Opened(log=_wandb_log(tmp_path))
    with pytest.raises(RankFailed, match="closing what the run opened failed on rank 1"):
        finish(TrainConfig(), rank=0, start=0, done=3, unlogged=None, opened=opened, ckpt_dir=tmp_path)
    assert [c for c in calls if c[0] == "finish"] == [("finish", 3)]


def test_a_ctrl_c_during_a_later_close_keeps_an_earlier_closes_error():
    """``close_each`` let a KeyboardInterrupt raised by a later close pass at once, and the error an earlier close
    had raised (the reward runner's, say) was lost: the user, who pressed Ctrl-C while W&B finished, never saw that
    something had failed to close. The earlier error is the Ctrl-C's context now (its traceback printed first)."""
    calls: list[str] = []
    earlier = OSError("reward runner: loop gone")
    with pytest.raises(KeyboardInterrupt) as info:
        close_each([Closing(calls, "rewards", earlier).close, Closing(calls, "log", KeyboardInterrupt()).close,
                    Closing(calls, "stops").close])
    assert calls == ["rewards", "log"] and info.value.__context__ is earlier

    def interrupted_while_handling() -> None:  # a Ctrl-C with a context of its own keeps it; the earlier error noted
        try:
            raise TimeoutError("wandb: still uploading")
        except TimeoutError:
            raise KeyboardInterrupt from None

    with pytest.raises(KeyboardInterrupt) as info:
        close_each([Closing(calls, "rewards", earlier).close, interrupted_while_handling])
    assert isinstance(info.value.__context__, TimeoutError)
    assert info.value.__notes__ == ["closing had already failed: OSError: reward runner: loop gone"]


def test_a_ctrl_c_while_closing_before_a_stop_keeps_the_stop(tmp_path):
    """``closed_before_stop`` let a KeyboardInterrupt raised by the close (Ctrl-C while W&B finished) pass alone:
    the stop the run was closing for (RankFailed, TrainingDiverged, ...; its iteration, its checkpoint, --resume)
    was never shown. It is the interrupt's context now (printed first), or a note where the interrupt has a
    context of its own (as ``close_each`` keeps an earlier close's error)."""
    from training.preemption import TrainingDiverged
    from training.rank_failures import RankFailed, RankFailure, closed_before_stop, stop_on

    calls: list[str] = []
    stop = TrainingDiverged(4, 1, tmp_path)
    with pytest.raises(KeyboardInterrupt) as info:
        closed_before_stop(Opened(log=Closing(calls, "log", KeyboardInterrupt())).close, stop)  # type: ignore[arg-type]
    assert calls == ["log"] and info.value.__context__ is stop

    earlier = OSError("reward runner: loop gone")  # the interrupt's context is the earlier close's error: noted
    broken = RankFailure(1, "scoring the iteration's rollouts", "RewardLengthError: 3 rewards for 4 clips", 2)
    opened = Opened(log=Closing(calls, "log", KeyboardInterrupt()),  # type: ignore[arg-type]
                    rewards=Closing(calls, "rewards", earlier))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt) as info:
        stop_on([None, broken], 3, tmp_path, opened.close)
    assert info.value.__context__ is earlier
    [note] = info.value.__notes__
    assert note.startswith(f"the run was stopping: {RankFailed.__name__}: iteration 3: scoring the iteration's")
    assert "RewardLengthError: 3 rewards for 4 clips" in note

    with pytest.raises(KeyboardInterrupt) as info:  # the stop already its context (a Ctrl-C in __exit__): as it is
        try:
            raise stop
        except TrainingDiverged:
            closed_before_stop(Opened(log=Closing(calls, "log", KeyboardInterrupt())).close, stop)  # type: ignore[arg-type]
    assert info.value.__context__ is stop and not getattr(info.value, "__notes__", [])


@pytest.mark.parametrize("exported", [True, False])
def test_a_final_export_that_fails_ends_the_wandb_run_failed(tmp_path, monkeypatch, exported):
    """``finish`` ended rank 0's W&B run (exit code 0, "Finished") before rank 0 exported the policy alone
    (``export: final``): an export that failed exited 1 with W&B showing a success. Rank 0's logs close after its
    export now, with the ExportError's exit code; an export that worked still ends the run with 0."""
    import deepspeed.comm

    import training.run_end
    from training.config import TrainConfig
    from training.export import ExportError
    from training.run_end import finish

    calls = _fake_wandb(monkeypatch)

    def export(cfg, out, *, checkpoint_dir):  # noqa: ANN001, ANN202
        calls.append(("export",))
        if not exported:
            raise OSError("No space left on device")
        return out

    monkeypatch.setattr(training.run_end, "export_policy", export)
    monkeypatch.setattr(deepspeed.comm, "destroy_process_group", lambda: calls.append(("destroyed",)))  # none here
    cfg = TrainConfig(output_dir=str(tmp_path), export="final")
    with pytest.raises(ExportError) if not exported else contextlib.nullcontext(), Opened() as opened:
        opened.log = _wandb_log(tmp_path)
        finish(cfg, rank=0, start=0, done=3, unlogged=None, opened=opened, ckpt_dir=tmp_path / "checkpoints")
    assert [c for c in calls if c[0] in ("destroyed", "export", "finish")] == [
        ("destroyed",), ("export",), ("finish",) if exported else ("finish", 1)]


@pytest.mark.parametrize("when", ["during", "before"])
def test_a_stop_signal_and_the_final_export(tmp_path, monkeypatch, when, capfd):
    """``close_but_logs`` put back the signal handlers before rank 0 exported alone, so a scheduler's SIGTERM during a
    long export took the default action: the process died, the W&B run left open (shown crashed), the export's work
    folder beside ``final``. The handlers stay until the export ends: a stop signal that came after the last
    iteration's agreement stops before the export (a TrainingStopped, exit 128 + 15, the W&B run with its code); one
    during the export only sets the flag, the export runs to its end and the run ends as without it (a note says)."""
    import os
    import signal

    import deepspeed.comm

    import training.run_end
    from training.config import TrainConfig
    from training.preemption import StopRequest, TrainingStopped
    from training.run_end import finish
    from training.train import exit_status

    def killed(signum, frame):  # noqa: ANN001, ANN202  # the default action (kills pytest): the test fails instead
        raise AssertionError("the stop signal took its default action: rank 0 killed mid-export")

    calls = _fake_wandb(monkeypatch)

    def export(cfg, out, *, checkpoint_dir):  # noqa: ANN001, ANN202
        calls.append(("export",))
        os.kill(os.getpid(), signal.SIGTERM)  # handled before kill returns (the main thread)
        calls.append(("exported",))
        return out

    monkeypatch.setattr(training.run_end, "export_policy", export)
    monkeypatch.setattr(deepspeed.comm, "destroy_process_group", lambda: None)  # none here
    previous = signal.signal(signal.SIGTERM, killed)
    try:
        cfg = TrainConfig(output_dir=str(tmp_path), export="final")
        stopped = None
        with Opened() as opened:
            opened.log = _wandb_log(tmp_path)
            opened.stops = StopRequest().install()
            if when == "before":  # after the loop's last agreement, before the export: no export begins
                os.kill(os.getpid(), signal.SIGTERM)
            try:
                finish(cfg, rank=0, start=0, done=3, unlogged=None, opened=opened, ckpt_dir=tmp_path / "checkpoints")
            except TrainingStopped as exc:
                stopped = exc
        assert signal.getsignal(signal.SIGTERM) is killed  # put back once the run closed
    finally:
        signal.signal(signal.SIGTERM, previous)
    shown = [c for c in calls if c[0] in ("export", "exported", "finish")]
    if when == "before":
        assert stopped is not None
        assert exit_status(stopped) == (128 + signal.SIGTERM, True)
        assert "stopped by SIGTERM after iteration 3" in str(stopped)
        assert f"python -m training.export --run {tmp_path}" in str(stopped)
        assert shown == [("finish", 128 + signal.SIGTERM)]
    else:
        assert stopped is None
        assert shown == [("export",), ("exported",), ("finish",)]  # exit code 0
        assert "SIGTERM came during the final export, which finished" in capfd.readouterr().err


def test_a_stop_before_the_export_of_a_launch_that_trained_nothing_names_the_checkpoint_it_resumed_from(
        tmp_path, monkeypatch):
    """A resume of a run at its last iteration trains nothing; a stop signal before its final export said
    "checkpoint iter_000003 saved", though this launch saved none: it names the checkpoint --resume continues from."""
    import os
    import signal

    import deepspeed.comm

    from training.config import TrainConfig
    from training.preemption import StopRequest, TrainingStopped
    from training.run_end import finish

    _fake_wandb(monkeypatch)
    monkeypatch.setattr(deepspeed.comm, "destroy_process_group", lambda: None)  # none here
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(TrainingStopped) as info, Opened() as opened:
            opened.log = _wandb_log(tmp_path)
            opened.stops = StopRequest().install()
            os.kill(os.getpid(), signal.SIGTERM)  # after the loop's last agreement: no export begins
            finish(TrainConfig(output_dir=str(tmp_path), export="final"), rank=0, start=3, done=3, unlogged=None,
                   opened=opened, ckpt_dir=tmp_path / "checkpoints")
    finally:
        signal.signal(signal.SIGTERM, previous)
    text = str(info.value)
    assert "saved." not in text and "this launch saved no checkpoint" in text, text
    assert f"--resume continues from {tmp_path / 'checkpoints' / 'iter_000003'}" in text
