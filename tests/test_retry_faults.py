"""`raa score-batch --retry-ineligible` decides from a row's structured faults (`RewardResult.faults`: stage, kind,
message) when the row has them, and reads its reason text only for rows that carry none (written before results had
faults, or by a writer that records none: a bad manifest line, a dead worker). Read from the text, a process note
at the end of a row written before "notes" existed ("inspect: the inspector's final answer was cut ...") read as a
fault a rerun could fix, so a clip whose bytes cannot be decoded was scored again, failing the same way, by every
--retry-ineligible."""

from __future__ import annotations

from graph.batch_retry import retryable

DECODE = "inspect: video: VideoDecodeError: c.mp4: frame 40 cannot be decoded"
CUT_NOTE = "inspect: the inspector's final answer was cut at the token limit (finish_reason 'length')"


def _fault(stage: str, kind: str, message: str) -> dict[str, str]:
    return {"stage": stage, "kind": kind, "message": message}


def test_the_faults_decide_not_the_reason_text():
    decode = _fault("inspect", "video", "VideoDecodeError: c.mp4: frame 40 cannot be decoded")
    row = {"status": "ineligible", "reasons": [DECODE, CUT_NOTE], "faults": [decode]}  # the note is no fault
    assert not retryable(row, "c.mp4", readable=lambda p: True)
    assert retryable(row, "c.mp4", clip_changed=lambda p: True)  # a video fault of a clip changed since
    timeout = {"status": "ineligible", "reasons": ["some wording of a timeout"],
               "faults": [_fault("assess", "timeout", "no reply in 120 s")]}
    assert retryable(timeout)  # the kind decides, whatever the reason's words


def test_an_unreached_clip_fault_is_retried_once_readable_from_the_faults():
    gone = {"status": "ineligible", "reasons": ["quality: video: VideoNotFoundError: c.mp4: video file not found"],
            "faults": [_fault("quality", "video", "VideoNotFoundError: c.mp4: video file not found")]}
    assert retryable(gone, "c.mp4", readable=lambda p: True)
    assert not retryable(gone, "c.mp4", readable=lambda p: False)
    assert not retryable(gone, None, readable=lambda p: True)  # no clip path to look at


def test_a_row_without_faults_or_notes_does_not_read_a_note_as_a_fault():
    """A row written before results carried "notes" or "faults": its reasons are its faults then its notes; the
    first reason is a fault, a later one only when it reads "stage: kind: message" with a fault kind."""
    assert not retryable({"status": "ineligible", "reasons": [DECODE, CUT_NOTE]}, "c.mp4")
    assert not retryable({"status": "ineligible", "reasons": [DECODE, CUT_NOTE], "faults": []}, "c.mp4")
    later = {"status": "ineligible", "reasons": [DECODE, "assess: transport: connection refused", CUT_NOTE]}
    assert retryable(later, "c.mp4")  # a second fault a rerun can fix
    assert retryable({"status": "ineligible", "reasons": ["batch: the worker process scoring this clip died "
                                                          "(signal 11) on each of 2 attempts"]})  # as before
    assert retryable({"status": "ineligible", "reasons": ["batch: this clip's run did not finish within 3 s (its worker "
                                                          "process was killed) on each of 2 attempts, the last with no "
                                                          "other run in flight"]})  # a hang: the machine's or the clip's
    assert retryable({"status": "ineligible", "reasons": ["agent: ValueError: boom"]})
    assert not retryable({"status": "ineligible", "reasons": ["input: manifest line 3: not valid JSON"]})
