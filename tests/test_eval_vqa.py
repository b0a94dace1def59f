"""World-model VQA eval: question-level accuracy equals a hand count; failures count as wrong."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from evals.vqa import (
    QuestionResult,
    VQAManifestError,
    load_vqa_manifest,
    read_vqa_manifest,
    run_vqa,
    summarize,
    write_vqa_report,
)
from graph.backbone import Backbone
from graph.testing import ScriptedChatModel
from tests.disk_faults import half_then_full_disk
from tools.video import write_video

# (video, task, question (the scripted model answers what the "m:" tag says), reference answer)
QUESTIONS = {
    "a.mp4": ("pick", [("Is the cube lifted? m:yes", "yes"), ("Is the lid open? m:no", "yes"),
                       ("Does the cube float? m:no", "no"), ("Is the gripper closed? m:err", "yes")]),
    "b.mp4": ("push", [("Does the block teleport? m:yes", "no"), ("Does the block move? m:yes", "yes")]),
    "bad.mp4": ("push", [("Is anything visible? m:yes", "no")]),
}


def _answer(messages, _n):
    text = messages[1].content[0]["text"]
    tag = text.split("m:")[1].split()[0]
    if tag == "err":
        return RuntimeError("server error")
    return {"answer": tag}


@pytest.fixture()
def manifest(tmp_path):
    rng = np.random.default_rng(1)
    write_video(tmp_path / "a.mp4", rng.integers(0, 255, (20, 32, 32, 3), dtype=np.uint8), fps=8)
    write_video(tmp_path / "b.mp4", rng.integers(0, 255, (12, 32, 32, 3), dtype=np.uint8), fps=8)
    (tmp_path / "bad.mp4").write_bytes(b"garbage")
    rows = [{"path": name, "task": task, "questions": [{"question": q, "answer": a} for q, a in qs]}
            for name, (task, qs) in QUESTIONS.items()]
    path = tmp_path / "vqa.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_vqa_accuracy_equals_hand_count(manifest, tmp_path):
    model = ScriptedChatModel({"vqa": _answer})
    backbone = Backbone(model, max_retries=0, retry_wait=(0.0, 0.0))
    report = asyncio.run(run_vqa(load_vqa_manifest(manifest), backbone, concurrency=3))
    # a.mp4: correct, wrong, correct, failed (a transport fault: an outage, left out); b.mp4: wrong, correct;
    # bad.mp4: failed (the clip's bytes: incorrect) -> 3 of 6
    assert (report.questions, report.correct, report.failed, report.outage) == (7, 3, 2, 1)
    assert report.domain == pytest.approx(100 * 3 / 6)
    assert report.by_task["pick"]["accuracy"] == pytest.approx(100 * 2 / 3)
    assert report.by_task["push"]["correct"] == 1 and report.by_task["push"]["questions"] == 3
    assert len(model.calls) == 6  # the undecodable video asks nothing
    assert all(c.images() == 8 and c.stage == "vqa" for c in model.calls)  # 8 uniformly sampled frames
    assert all("Question:" in c.text() and "8 frames" in c.text() for c in model.calls)
    failed = [r for r in report.results if r.answer is None]
    assert {r.error.split(":")[0] for r in failed} == {"video", "transport"}
    out = write_vqa_report(report, tmp_path / "out")
    saved = json.loads(out.read_text())
    assert saved["correct"] == 3 and len(saved["results"]) == 7 and saved["usage"]["calls"] == 5  # replies received


def test_summarize_pure():
    from evals.vqa import QuestionResult

    rs = [QuestionResult("p", "t", "q", "yes", "yes", True), QuestionResult("p", "u", "q", "no", "yes", False)]
    rep = summarize(rs)
    assert rep.domain == 50.0 and rep.by_task == {
        "t": {"questions": 1, "correct": 1, "failed": 0, "outage": 0, "accuracy": 100.0},
        "u": {"questions": 1, "correct": 0, "failed": 0, "outage": 0, "accuracy": 0.0}}
    assert summarize([]).domain is None  # no question, no accuracy (it read 0.0)


@pytest.mark.parametrize("row,match", [
    ({"path": "a.mp4"}, "questions"),
    ({"path": "a.mp4", "questions": [{"question": "x?", "answer": "maybe"}]}, "yes' or 'no"),
    ({"path": "a.mp4", "questions": [{"answer": "yes"}]}, "non-empty 'question'"),
    ({"questions": [{"question": "x?", "answer": "no"}]}, "string 'path'"),
])
def test_manifest_errors(tmp_path, row, match):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(VQAManifestError, match=match):
        load_vqa_manifest(path)


def test_manifest_line_that_is_not_json_is_named(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"path": "a.mp4", "questions": [{"question": "x?", "answer": "yes"}]}) + "\n\n{oops\n")
    with pytest.raises(VQAManifestError, match=r"m\.jsonl:3: not valid JSON"):
        load_vqa_manifest(path)


def _rows(path, *rows):
    path.write_text("".join(json.dumps({"path": p, "questions": [{"question": q, "answer": a} for q, a in qs]}) + "\n"
                            for p, qs in rows))
    return path


def test_manifest_refuses_a_video_question_pair_asked_twice(tmp_path):
    """A (video, question) pair in two rows (the same file by another spelling) or twice in one row is refused
    naming the lines, as reliability's manifest refuses a clip listed twice; it was counted twice."""
    path = _rows(tmp_path / "m.jsonl", ("a.mp4", [("Q1?", "yes")]), ("b.mp4", [("Q1?", "yes")]),
                 ("./a.mp4", [("Q2?", "no"), (" Q1? ", "no")]))
    with pytest.raises(VQAManifestError, match=r"m\.jsonl:3: question 'Q1\?' about video .*a\.mp4 appears twice "
                                               r"\(first at .*m\.jsonl:1\)"):
        load_vqa_manifest(path)
    _rows(path, ("a.mp4", [("Q1?", "yes")]), ("b.mp4", [("Q2?", "no"), ("Q2?", "no")]))
    with pytest.raises(VQAManifestError, match=r"m\.jsonl:2: .*appears twice in this row"):
        load_vqa_manifest(path)
    # the same video with other questions, and the same question about another video, stay allowed
    _rows(path, ("a.mp4", [("Q1?", "yes")]), ("b.mp4", [("Q1?", "yes")]), ("a.mp4", [("Q2?", "no")]))
    assert [len(item.questions) for item in load_vqa_manifest(path)] == [1, 1, 1]


def test_a_question_whose_call_raises_something_else_fails_only_itself(manifest, monkeypatch):
    """A call that raises something other than a BackboneFault (here a SQLite error; the stage cache's own
    read errors are logged misses now, `graph.cache.lookup`) escaped run_vqa, so one question's error lost
    the whole evaluation instead of counting as wrong."""
    import sqlite3

    backbone = Backbone(ScriptedChatModel({"vqa": _answer}), max_retries=0, retry_wait=(0.0, 0.0))
    real = backbone.astructured

    async def astructured(*args, **kwargs):
        astructured.calls += 1
        if astructured.calls == 2:  # the second call only
            raise sqlite3.OperationalError("database is locked")
        return await real(*args, **kwargs)

    astructured.calls = 0
    monkeypatch.setattr(backbone, "astructured", astructured)
    report = asyncio.run(run_vqa(load_vqa_manifest(manifest), backbone, concurrency=1))
    assert report.questions == 7
    locked = [r for r in report.results if r.error and "OperationalError" in r.error]
    assert len(locked) == 1 and locked[0].answer is None and not locked[0].correct
    assert report.failed == 3  # the locked lookup, the scripted server error and the undecodable video


def test_a_clip_under_eight_frames_is_described_as_the_frames_it_sends(tmp_path):
    """A 5-frame clip sends its 5 frames: the prompt said "8 frames" for it too."""
    write_video(tmp_path / "short.mp4", np.random.default_rng(2).integers(0, 255, (5, 32, 32, 3), dtype=np.uint8), fps=8)
    path = tmp_path / "vqa.jsonl"
    path.write_text(json.dumps({"path": "short.mp4", "questions": [{"question": "Moved? m:yes", "answer": "yes"}]}))
    model = ScriptedChatModel({"vqa": _answer})
    report = asyncio.run(run_vqa(load_vqa_manifest(path), Backbone(model, max_retries=0, retry_wait=(0.0, 0.0))))
    assert report.correct == 1 and len(model.calls) == 1
    assert model.calls[0].images() == 5 and "5 frames" in model.calls[0].text() and "8 frames" not in model.calls[0].text()


def test_a_cut_write_keeps_the_last_report(tmp_path, monkeypatch):
    """vqa.json was written in place: a write cut by a full disk left the last report cut too."""
    from pathlib import Path

    from evals.vqa import QuestionResult

    first = write_vqa_report(summarize([QuestionResult("p", "t", "q", "yes", "yes", True)]), tmp_path)
    before = first.read_text()
    monkeypatch.setattr(Path, "write_text", half_then_full_disk)
    with pytest.raises(OSError):
        write_vqa_report(summarize([QuestionResult("p", "t", "q2", "no", "yes", False)]), tmp_path)
    monkeypatch.undo()
    assert first.read_text() == before and json.loads(before)["correct"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["vqa.json"]  # no temporary file left behind


def test_a_folder_means_its_manifest_jsonl(manifest):
    """A generate output folder was "manifest not found", while the clip suite's loader accepts a folder."""
    (manifest.parent / "manifest.jsonl").write_text(manifest.read_text())
    assert load_vqa_manifest(manifest.parent) == load_vqa_manifest(manifest)
    (manifest.parent / "empty").mkdir()
    with pytest.raises(VQAManifestError, match="manifest not found: .*manifest.jsonl"):
        load_vqa_manifest(manifest.parent / "empty")


def test_frames_are_decoded_at_the_size_they_are_sent(tmp_path, read_sizes):
    """The 8 frames were decoded at the clip's full size, then cut to `long_side` for sending."""
    from evals.vqa import _frames

    path = write_video(tmp_path / "wide.mp4", np.full((10, 64, 96, 3), 90, np.uint8), fps=8.0)
    blocks, count = _frames(str(path), 48, 85)
    assert count == 8 and read_sizes == [(48, 32)]


def test_each_task_says_how_many_of_its_questions_had_no_answer(manifest, tmp_path):
    """A task whose questions failed (an undecodable video, a call that gave up) read as questions answered
    wrongly: by_task had no failure count, so the per-task table showed 0.00 accuracy for a task the model
    never answered, with nothing on its row saying so."""
    model = ScriptedChatModel({"vqa": _answer})
    report = asyncio.run(run_vqa(load_vqa_manifest(manifest), Backbone(model, max_retries=0, retry_wait=(0.0, 0.0))))
    # pick (a.mp4): one call fails; push: b.mp4 answered, bad.mp4 undecodable
    assert report.by_task["pick"]["failed"] == 1 and report.by_task["push"]["failed"] == 1
    saved = json.loads(write_vqa_report(report, tmp_path / "out").read_text())
    assert saved["by_task"]["push"] == {"questions": 3, "correct": 1, "failed": 1, "outage": 0,
                                        "accuracy": pytest.approx(100 / 3)}


def test_no_answer_at_all_gives_no_accuracy(tmp_path):
    """Every question failed (an endpoint down, videos that do not decode): Domain read 0.0, a figure computed
    from no answer. Now it is None overall and for each task without an answer, with the reasons counted."""
    results = [QuestionResult("/v/a.mp4", "pick", "q1", "yes", None, False, "transport: connection refused"),
               QuestionResult("/v/a.mp4", "pick", "q2", "no", None, False, "transport: connection refused"),
               QuestionResult("/v/b.mp4", "push", "q3", "yes", None, False,
                              "video: VideoDecodeError: cannot decode /v/b.mp4")]
    report = summarize(results)
    assert report.domain is None and (report.questions, report.correct, report.failed) == (3, 0, 3)
    assert [t["accuracy"] for t in report.by_task.values()] == [None, None]
    assert report.failure_reasons == [
        {"reason": "transport", "questions": 2, "first": "transport: connection refused"},
        {"reason": "video: VideoDecodeError", "questions": 1, "first": "video: VideoDecodeError: cannot decode /v/b.mp4"}]
    saved = json.loads(write_vqa_report(report, tmp_path).read_text())
    assert saved["domain"] is None and saved["by_task"]["push"]["accuracy"] is None


def test_a_partial_failure_still_counts_as_incorrect():
    """One answer is enough for an accuracy: the failed questions stay in the denominator (documented), but for
    those an outage took (`outage`, tests/test_eval_vqa_outages.py)."""
    results = [QuestionResult("/v/a.mp4", "pick", "q1", "yes", "yes", True),
               QuestionResult("/v/a.mp4", "pick", "q2", "no", None, False, "invalid_reply: not yes or no"),
               QuestionResult("/v/b.mp4", "push", "q3", "yes", None, False, "video: EmptyVideoError: no frames")]
    report = summarize(results)
    assert report.domain == pytest.approx(100 / 3) and report.by_task["pick"]["accuracy"] == 50.0
    assert report.by_task["push"]["accuracy"] is None  # a task without an answer has no accuracy either
    assert [r["reason"] for r in report.failure_reasons] == ["invalid_reply", "video: EmptyVideoError"]


@pytest.mark.parametrize("bad", ["a\0.mp4", "loop/a.mp4"])
def test_a_path_that_cannot_be_resolved_is_a_skipped_named_line(tmp_path, bad):
    """A NUL character or a symlink loop in a row's path raised ValueError / RuntimeError out of the reader: a
    traceback from `raa eval world-model`, and the manifest's other rows were not asked."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    path = _rows(tmp_path / "m.jsonl", ("b.mp4", [("Q1?", "yes")]), (bad, [("Q1?", "yes")]))
    items, skipped = read_vqa_manifest(path)
    assert [Path(item.path).name for item in items] == ["b.mp4"]
    assert [s.line for s in skipped] == [f"{path}:2"] and "'path'" in skipped[0].reason, skipped
