"""A VQA question lost to an outage of the machinery (`graph.schemas.Fault.outage`: the endpoint down or too slow,
a bug, a clip that could not be reached) is no answer of the model's: it is left out of Domain and of its task's
accuracy and counted apart (``outage``), as `evals.table` counts a reward row's ``ineligible_outage``. It counted
as answered incorrectly, so an endpoint that went down half-way halved the world model's score. A question the
model answered wrongly, refused or answered invalidly, and a clip that does not decode, still count as incorrect."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from evals.eval_views import show_vqa
from evals.vqa import QuestionResult, VQAItem, run_vqa, summarize, write_vqa_report
from graph.backbone import Backbone
from graph.testing import ScriptedChatModel
from tools.video import write_video


def _answer(messages, _n):
    tag = messages[1].content[0]["text"].split("m:")[1].split()[0]
    return RuntimeError("connection refused") if tag == "down" else {"answer": tag}


@pytest.fixture()
def items(tmp_path):
    rng = np.random.default_rng(2)
    write_video(tmp_path / "a.mp4", rng.integers(0, 255, (12, 32, 32, 3), dtype=np.uint8), fps=8)
    (tmp_path / "bad.mp4").write_bytes(b"garbage")  # the clip's own bytes: counted as incorrect
    return [VQAItem(str(tmp_path / "a.mp4"), "pick", (("Lifted? m:yes", "yes"), ("Open? m:no", "yes"),
                                                      ("Floats? m:down", "no"), ("Closed? m:down", "yes"))),
            VQAItem(str(tmp_path / "gone.mp4"), "pick", (("Moves? m:yes", "yes"),)),  # not there: an outage
            VQAItem(str(tmp_path / "bad.mp4"), "push", (("Visible? m:yes", "yes"),))]


def test_questions_lost_to_an_outage_are_left_out_of_the_accuracy(items, tmp_path):
    backbone = Backbone(ScriptedChatModel({"vqa": _answer}), max_retries=0, retry_wait=(0.0, 0.0))
    report = asyncio.run(run_vqa(items, backbone, concurrency=2))
    # answered: Lifted (right), Open (wrong); the undecodable clip: incorrect; two transport faults and the clip
    # not found: outages -> 1 of 3
    assert (report.questions, report.correct, report.failed, report.outage) == (6, 1, 4, 3)
    assert report.domain == pytest.approx(100 / 3)
    assert report.by_task["pick"] == {"questions": 5, "correct": 1, "failed": 3, "outage": 3,
                                      "accuracy": pytest.approx(50.0)}
    assert (report.by_task["push"]["failed"], report.by_task["push"]["outage"]) == (1, 0)  # in Domain, as incorrect
    assert sorted(r.question for r in report.results if r.outage) == ["Closed? m:down", "Floats? m:down",
                                                                       "Moves? m:yes"]
    saved = json.loads(write_vqa_report(report, tmp_path / "out").read_text())
    assert saved["outage"] == 3 and sum(r["outage"] for r in saved["results"]) == 3


def test_only_outages_give_no_accuracy():
    results = [QuestionResult("/v/a.mp4", "pick", "q1", "yes", None, False, "transport: refused", outage=True)]
    report = summarize(results)
    assert report.domain is None and report.by_task["pick"]["accuracy"] is None and report.outage == 1


def test_the_console_names_the_outage_and_how_to_ask_again(tmp_path):
    from io import StringIO

    from rich.console import Console

    results = [QuestionResult("/v/a.mp4", "pick", "q1", "yes", "yes", True),
               QuestionResult("/v/a.mp4", "pick", "q2", "no", None, False, "transport: refused", outage=True),
               QuestionResult("/v/b.mp4", "pick", "q3", "no", None, False, "video: VideoDecodeError: bad")]
    buf = StringIO()
    assert show_vqa(summarize(results), tmp_path / "vqa.json", Console(file=buf, width=200)) == 0
    text = " ".join(buf.getvalue().split())
    assert "1 question lost to an outage (left out of the accuracy)" in text
    assert "1 question had no answer (counted as incorrect)" in text
    assert "rerun the same command" in text
