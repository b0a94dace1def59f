"""World-model VQA evaluation, PAI-Bench style (paper Sec. 5.1, the Domain column of Table 1).

Manifest format (JSONL, one video per line; `path` relative to the manifest's folder or absolute):

    {"path": "videos/0001.mp4", "task": "pick_place",
     "questions": [{"question": "Does the gripper close on the red block?", "answer": "yes"},
                   {"question": "Does the block pass through the table?", "answer": "no"}]}

`task` is optional (rows without it are grouped under "-"); every question has a fixed binary reference
answer "yes" or "no". For each video 8 frames are sampled uniformly (`round(linspace(0, n-1, 8))`); each
question is one backbone call (prompt `prompts/vqa.md`, stage `vqa`) with the question and the 8 labelled
frames (all of a clip under 8 frames; the prompt says how many), the backbone's temperature (`raa eval
world-model` sets it to 0, greedy, whatever RAA_TEMPERATURE says) and a one-field answer schema.
Domain = 100 * correct / (questions - outage) (question-level accuracy; `outage`: the questions an outage of the
machinery took, below); the per-task breakdown uses the same ratio. With no answer at all (every question failed),
there is no accuracy: Domain is None (null in vqa.json), and so is the accuracy of each task none of whose
questions was answered.

Decisions where the issue was silent:
- A question whose call fails after the backbone's retries, or whose video cannot be decoded, is counted
  as answered incorrectly (the denominator never shrinks, so failures cannot raise the score) and listed
  with its error; `failed` reports how many, overall and per task (`by_task`), so a task whose video could
  not be decoded does not read as one the model answered wrongly. `failure_reasons` counts them by reason.
- *Except* a question lost to an outage of the machinery (`graph.schemas.Fault.outage` of the failure's fault,
  `graph.nodes.common.to_fault`: the endpoint down or too slow, a setting it refuses, a bug, a clip that could
  not be reached or whose read the machine failed): no answer of the model's, so it is left out of Domain and of
  its task's accuracy (their denominators) and counted apart (``outage``, overall, per task and per question),
  as `evals.table` counts a reward row's ``ineligible_outage``. It counted as incorrect, so an endpoint that went
  down half-way read as a world model that answered half its questions wrongly. It is still one of ``failed``.
  There is no `--retry-ineligible` here: a rerun of the same command asks again every question without an
  answer, and takes the answered ones from the stage cache unless RAA_CACHE_PATH is off (`raa eval world-model`
  says so).
- No answer at all (an endpoint down, no video decodable): Domain is None, not 0.0, since a score computed
  from no answer is no measurement; `raa eval world-model` then prints the reasons instead of a table and
  exits 3. A task none of whose questions was answered has accuracy None for the same reason (it read 0.00
  beside its "No answer" count); its questions still count as incorrect in a Domain that has answers.
- The backbone's stage cache (settings) is used, so rerunning an interrupted evaluation repeats no call.
- Any other exception of one question's call (an unexpected error inside the backbone; the stage cache's
  unreadable entries are misses, `graph.cache.lookup`) also fails only that question, named with its type,
  as the judge's failures do: it escaped `run_vqa`, so one question's error lost the whole evaluation's
  report.
- A manifest line that is no usable row (not UTF-8, not JSON, no path, no questions, a question without
  text, an answer other than yes / no) is skipped and reported (`read_vqa_manifest`, ``skipped_lines`` in
  vqa.json, each ``PATH:N`` with its reason on stderr), and the other rows are evaluated: one such line
  refused the whole manifest. Its questions are not asked, so Domain covers the rows that were read; the
  report says how many lines were left out. A manifest with no usable row is an error listing them.
  `load_vqa_manifest` stays strict (the first skipped line is an error) for callers that cannot report.
- A (video, question) pair asked twice, in one row or in two rows naming the same file (paths compared
  resolved, questions compared after stripping surrounding whitespace), is a `VQAManifestError` naming both
  lines, as `evals.reward_scorer.load_eval_manifest` refuses a clip listed twice: it was counted twice in
  Domain (and could carry two contradicting reference answers). The same video with other questions in
  another row stays allowed.
- Frames are decoded straight to the size they are sent at (`long_side`), as `evals.judge.FrameSampler`
  does: decoded at the clip's size, 8 frames of a 4K clip took 200 MB per video in flight.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from tools.file_kinds import read_or_problem
from tools.jsonl import LineError, SkippedLine, no_usable_row, usable_rows, write_text_atomic

if TYPE_CHECKING:  # pragma: no cover
    from graph.backbone import Backbone
    from graph.transport import EndpointNames

VQA_STAGE = "vqa"
VQA_FRAMES = 8


def vqa_setting_names() -> EndpointNames:
    """The settings `raa eval world-model` reads, named in its faults' fix hints: the backbone's endpoint, images
    and tokens, but no temperature (it decodes at 0 whatever RAA_TEMPERATURE says), no tool round, and no agent
    setting for how many frames a question sends (always `VQA_FRAMES`): the backbone's names sent a researcher to
    AgentConfig.max_images_per_call, observe_frames and frame_budget, which change nothing here."""
    from dataclasses import replace

    from graph.transport import BACKBONE_NAMES

    return replace(BACKBONE_NAMES, images=f"none to set here: each question sends {VQA_FRAMES} frames",
                   request_size="smaller images (RAA_IMAGE_LONG_SIDE) or a lower RAA_MAX_TOKENS",
                   body_size="smaller images (RAA_IMAGE_LONG_SIDE, RAA_JPEG_QUALITY)", no_tools="", temperature="")


class VQAManifestError(ValueError):
    """A VQA manifest file or row that cannot be evaluated."""


class VQAAnswer(BaseModel):
    """The model's answer to one binary question."""

    answer: Literal["yes", "no"] = Field(description='Exactly "yes" or "no".')


@dataclass(frozen=True)
class VQAItem:
    """One video with its fixed binary questions."""

    path: str
    """Absolute path of the video."""
    task: str
    """Task name for the per-task breakdown."""
    questions: tuple[tuple[str, str], ...]
    """(question, reference answer "yes"/"no") pairs."""


@dataclass
class QuestionResult:
    """The outcome of one question."""

    path: str
    """Video path."""
    task: str
    """Task name."""
    question: str
    """Question text."""
    expected: str
    """Reference answer."""
    answer: str | None
    """Model answer (None when the call or the decode failed)."""
    correct: bool
    """answer == expected."""
    error: str | None = None
    """Why there is no answer."""
    outage: bool = False
    """No answer because of an outage of the machinery (module docstring): left out of the accuracy."""


@dataclass
class VQAReport:
    """Question-level accuracy overall and per task."""

    domain: float | None
    """100 * correct / questions; None when no question was answered (module docstring)."""
    questions: int
    """Questions asked."""
    correct: int
    """Questions answered correctly."""
    failed: int
    """Questions without an answer (counted as incorrect, but for `outage`)."""
    outage: int = 0
    """Of those, questions an outage of the machinery took (module docstring): not in Domain's denominator."""
    by_task: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """task -> {questions, correct, failed, outage, accuracy} (failed: without an answer, counted as incorrect
    but for the outage ones, left out; accuracy None when none of the task's questions was answered)."""
    failure_reasons: list[dict[str, Any]] = field(default_factory=list)
    """Questions without an answer by reason (`failure_reasons`): {reason, questions, first}, most first."""
    results: list[QuestionResult] = field(default_factory=list)
    """Every question's outcome."""
    usage: dict[str, int] = field(default_factory=dict)
    """Backbone calls, images and tokens over the evaluation."""
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    """Manifest lines left out as no usable row (``PATH:N`` and the reason; their questions were not asked)."""


def _parsed(where: str, row: Any, folder: Path) -> tuple[str, VQAItem]:
    """(where, item) of one manifest line; `LineError` (the line is skipped) for a line that is no usable row."""
    if not isinstance(row, dict) or not isinstance(row.get("path"), str) or not row["path"].strip():
        raise LineError(f"{where}: a row needs a string 'path'")
    questions = row.get("questions")
    if not isinstance(questions, list) or not questions:
        raise LineError(f"{where}: 'questions' must be a non-empty list")
    pairs = []
    for q in questions:
        if not isinstance(q, dict) or not isinstance(q.get("question"), str) or not q["question"].strip():
            raise LineError(f"{where}: each question needs a non-empty 'question' string")
        answer = str(q.get("answer", "")).strip().lower()
        if answer not in ("yes", "no"):
            raise LineError(f"{where}: answer must be 'yes' or 'no', got {q.get('answer')!r}")
        pairs.append((q["question"].strip(), answer))
    video = Path(row["path"])
    try:
        video = (video if video.is_absolute() else folder / video).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL character: it was a traceback
        raise LineError(f"{where}: 'path' {row['path']!r} cannot be resolved ({exc})") from None
    return where, VQAItem(str(video), str(row.get("task") or "-"), tuple(pairs))


def read_vqa_manifest(path: str | Path) -> tuple[list[VQAItem], list[SkippedLine]]:
    """The items of a VQA manifest (see the module docstring; a folder means its ``manifest.jsonl``, as
    `training.generate` writes it and `evals.clipsuite.load_manifest` reads it) and the lines skipped as no
    usable row (``PATH:N`` and the reason). Raises VQAManifestError for a missing manifest, one without a
    usable row, and a (video, question) pair asked twice."""
    path = Path(path)
    if path.is_dir():
        path = path / "manifest.jsonl"
    problem, data = read_or_problem(path, "manifest")  # one look: read whole, or what is there (a FIFO, a folder)
    if problem:
        raise VQAManifestError(problem)
    parsed, skipped = usable_rows(path, lambda where, row: _parsed(where, row, path.parent), data=data)
    if skipped and not parsed:
        raise no_usable_row(path, skipped, VQAManifestError)
    if not parsed:
        raise VQAManifestError(f"manifest {path} has no rows")
    seen: dict[tuple[str, str], str] = {}  # (video, question) -> the line that first asked it
    for where, item in parsed:
        for question, _ in item.questions:
            if (first := seen.get((item.path, question))) is not None:
                again = "twice in this row" if first == where else f"twice (first at {first})"
                raise VQAManifestError(f"{where}: question {question!r} about video {item.path} appears {again}; "
                                       "each (video, question) pair is asked and counted once")
            seen[(item.path, question)] = where
    return [item for _, item in parsed], skipped


def load_vqa_manifest(path: str | Path) -> list[VQAItem]:
    """`read_vqa_manifest`'s items, strictly: a line that is no usable row is a VQAManifestError naming it
    (for callers that cannot report skipped lines; `raa eval world-model` reads leniently)."""
    items, skipped = read_vqa_manifest(path)
    if skipped:
        raise VQAManifestError(str(skipped[0]))
    return items


def vqa_messages(system_prompt: str, question: str, image_blocks: Sequence[dict]) -> list[BaseMessage]:
    """System prompt, then the question followed by the labelled frames."""
    content: list[str | dict] = [{"type": "text", "text": f"Question: {question}\nAnswer yes or no."}, *image_blocks]
    return [SystemMessage(content=system_prompt), HumanMessage(content=content)]


def accuracy(questions: int, correct: int, failed: int, outage: int = 0) -> float | None:
    """100 * correct / (questions - outage), or None when none of the questions was answered (module docstring;
    `outage` of the `failed` questions were lost to an outage)."""
    return 100.0 * correct / (questions - outage) if questions > failed else None


def _reason(error: str | None) -> str:
    """The kind of a failure: the backbone fault's kind ("transport"), or "video: <exception type>"."""
    parts = (error or "no reason recorded").split(": ")
    return ": ".join(parts[:2]) if parts[0] == "video" and len(parts) > 2 else parts[0]


def failure_reasons(results: Sequence[QuestionResult]) -> list[dict[str, Any]]:
    """Questions without an answer grouped by `_reason`: {reason, questions, first error}, most questions first
    (ties by reason); pure."""
    groups: dict[str, list[str]] = {}
    for r in results:
        if r.answer is None:
            groups.setdefault(_reason(r.error), []).append(r.error or "no reason recorded")
    return [{"reason": k, "questions": len(v), "first": v[0]}
            for k, v in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


def summarize(results: Sequence[QuestionResult]) -> VQAReport:
    """Domain accuracy and the per-task breakdown from question results (pure)."""
    counts: dict[str, list[int]] = {}  # task -> [questions, correct, failed, outage]
    for r in results:
        c = counts.setdefault(r.task, [0, 0, 0, 0])
        for i, n in enumerate((1, r.correct, r.answer is None, r.answer is None and r.outage)):
            c[i] += int(n)
    by_task: dict[str, dict[str, float | None]] = {
        task: {"questions": q, "correct": k, "failed": f, "outage": o, "accuracy": accuracy(q, k, f, o)}
        for task, (q, k, f, o) in sorted(counts.items())}
    n, correct = len(results), sum(int(r.correct) for r in results)
    failed = sum(1 for r in results if r.answer is None)
    outage = sum(1 for r in results if r.answer is None and r.outage)
    return VQAReport(domain=accuracy(n, correct, failed, outage), questions=n, correct=correct, failed=failed,
                     outage=outage, by_task=by_task, failure_reasons=failure_reasons(results),
                     results=list(results))


def _frames(path: str, long_side: int, quality: int) -> tuple[list[dict], int]:
    """The labelled image blocks of a clip's VQA frames and how many frames they hold (fewer than
    `VQA_FRAMES` for a shorter clip: `uniform_indices` never repeats a frame)."""
    from evals.judge import sampled_blocks

    return sampled_blocks(path, VQA_FRAMES, long_side, quality)


async def run_vqa(items: Sequence[VQAItem], backbone: Backbone, *, concurrency: int = 8, long_side: int = 512,
                  quality: int = 85) -> VQAReport:
    """Ask every question of every item; a failing video or call only fails its own questions."""
    from graph.backbone import BackboneFault, Usage
    from graph.nodes.common import to_fault
    from prompts import render

    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    systems: dict[int, str] = {}  # the prompt says how many frames follow: VQA_FRAMES, or all of a shorter clip
    sem = asyncio.Semaphore(concurrency)
    usage = Usage()

    async def ask(item: VQAItem, system: str, blocks: list[dict], question: str, expected: str) -> QuestionResult:
        async with sem:
            try:
                reply = await backbone.astructured(VQA_STAGE, VQAAnswer, vqa_messages(system, question, blocks),
                                                   usage)
                answer = VQAAnswer.model_validate(reply.model_dump()).answer
            except BackboneFault as exc:
                return QuestionResult(item.path, item.task, question, expected, None, False,
                                      f"{exc.kind}: {exc.message}", to_fault(VQA_STAGE, exc).outage)
            except Exception as exc:  # noqa: BLE001 - any other failure: this question only
                return QuestionResult(item.path, item.task, question, expected, None, False,
                                      f"{type(exc).__name__}: {exc}", to_fault(VQA_STAGE, exc).outage)
        return QuestionResult(item.path, item.task, question, expected, answer, answer == expected)

    async def video(item: VQAItem) -> list[QuestionResult]:
        try:
            async with sem:
                blocks, count = await asyncio.to_thread(_frames, item.path, long_side, quality)
        except Exception as exc:  # noqa: BLE001 - a bad video fails only its own questions
            error, lost = f"video: {type(exc).__name__}: {exc}", to_fault(VQA_STAGE, exc).outage  # not reached
            return [QuestionResult(item.path, item.task, q, a, None, False, error, lost) for q, a in item.questions]
        system = systems.setdefault(count, render(VQA_STAGE, n_frames=count))
        return list(await asyncio.gather(*(ask(item, system, blocks, q, a) for q, a in item.questions)))

    per_video = await asyncio.gather(*(video(item) for item in items))
    report = summarize([r for rs in per_video for r in rs])
    report.usage = usage.as_dict()
    return report


def write_vqa_report(report: VQAReport, out_dir: str | Path) -> Path:
    """DIR/vqa.json with the summary, the per-task breakdown and every question's outcome."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "vqa.json"
    write_text_atomic(path, json.dumps(asdict(report), indent=2))  # a cut write keeps the last report whole
    return path
