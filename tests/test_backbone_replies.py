"""Replies a real endpoint sends that the backbone must neither reject wrongly nor accept wrongly: answers
wrapped in their schema's name or misspelled, replies cut at max_tokens, malformed tool calls from a server
with a tool parser, reasoning-only replies, and a stage cache that cannot store an output."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3

import pytest

from graph.backbone import BackboneFault, Usage
from graph.cache import StageCache
from graph.schemas import Assessment, AuditReport, InspectionPlan, Observation
from tests.openai_stub import OpenAIStub, StubReply, json_reply, tool_reply
from tests.test_backbone_http import METHODS, MSGS, good, make, run

CLEAN = {"missing_requirements": [], "invented_conditions": [], "contradictions": []}
DIRTY = {**CLEAN, "missing_requirements": ["R2"]}


def _reply(method: str, obj: dict, name: str = "AuditReport") -> StubReply:
    return tool_reply(name, obj) if method == "function_calling" else json_reply(obj)


@pytest.mark.parametrize("method", METHODS)
def test_a_wrapped_or_misspelled_answer_is_reasked_not_read_as_an_empty_record(method: str) -> None:
    """Every field of AuditReport has a default and unknown keys are ignored: {"AuditReport": {...}} validated
    as a clean audit, and "judgements" as an assessment without judgments (T = 0)."""
    with OpenAIStub([_reply(method, {"AuditReport": DIRTY}), _reply(method, DIRTY)]) as stub:
        out = make(stub, method).structured("audit", AuditReport, list(MSGS), usage := Usage())
    assert out.missing_requirements == ["R2"] and len(stub.requests) == 2 and usage.calls == 2
    assert "none of the schema's fields at the top level (got ['AuditReport'])" in json.dumps(stub.requests[1]["messages"])
    judged = {"requirement_id": "R1", "status": "met", "evidence_frames": [3], "rationale": "seen", "confidence": 0.9}
    typo = {"judgements": [judged], "physical_level": 5, "visual_level": 5}
    right = {"judgments": [judged], "physical_level": 5, "visual_level": 5}  # rationales left out: defaults
    with OpenAIStub([_reply(method, typo, "Assessment"), _reply(method, right, "Assessment")]) as stub:
        out = make(stub, method).structured("assess", Assessment, list(MSGS), Usage())
    assert [j.requirement_id for j in out.judgments] == ["R1"] and len(stub.requests) == 2
    with OpenAIStub([_reply(method, {**CLEAN, "notes": "all good"})]) as stub:  # a stray key, "clean" left out
        assert make(stub, method).structured("audit", AuditReport, list(MSGS), Usage()).clean


@pytest.mark.parametrize("method", ["json_schema", "json_mode"])
def test_a_reply_cut_at_max_tokens_is_an_invalid_reply_with_the_hint(method: str) -> None:
    """openai's structured-output parse raises LengthFinishReasonError: it was reported as an unexpected
    transport error, not re-asked, and its call and tokens were not counted."""
    cut = StubReply(content='<think>Let me look at every frame in turn. Frame 0 shows', finish_reason="length",
                    completion_tokens=512)
    with OpenAIStub([cut, good(method)]) as stub:
        assert run(make(stub, method), usage := Usage()).score == 3
    assert len(stub.requests) == 2 and usage.calls == 2 and usage.output_tokens == 512 + 7
    with OpenAIStub([cut, cut]) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, method), Usage())
    assert info.value.kind == "invalid_reply" and "RAA_MAX_TOKENS" in info.value.message


VIEW = {"type": "function", "function": {"name": "view_frames", "description": "view frames",
                                         "parameters": {"type": "object", "properties": {}}}}


def test_a_malformed_tool_call_is_reasked_not_blamed_on_the_server() -> None:
    """vLLM's Hermes parser hands a call whose JSON does not parse back as content: the model's mistake."""
    bad = StubReply(content='<tool_call>\n{"name": "view_frames", "arguments": {"frames": [3, 5,]}}\n</tool_call>')
    with OpenAIStub([bad, tool_reply("view_frames", {"frames": [3, 5]})]) as stub:
        reply = asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [VIEW], Usage()))
    assert reply.tool_calls[0]["args"] == {"frames": [3, 5]} and len(stub.requests) == 2
    assert "not valid JSON" in json.dumps(stub.requests[1]["messages"])


def test_a_tool_round_reask_shows_the_rejected_call() -> None:
    """The structured re-ask shows the rejected reply; the tool round's said only "not valid JSON (... column 47)"
    about a call the model could not see. A call whose arguments do not parse is shown as the model wrote it."""
    text = '<tool_call>\n{"name": "view_frames", "arguments": {"frames": [3, 5,]}}\n</tool_call>'
    torn = {"id": "c1", "type": "function", "function": {"name": "view_frames", "arguments": '{"frames": [3,, 5]}'}}
    torn_reply = StubReply(body=json.dumps({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [torn]}}]}))
    for bad, shown_text in ((StubReply(content=text), text), (torn_reply, '{"frames": [3,, 5]}')):
        with OpenAIStub([bad, tool_reply("view_frames", {"frames": [3, 5]})]) as stub:
            asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [VIEW], Usage()))
        shown, correction = stub.requests[1]["messages"][-2:]
        assert shown == {"role": "assistant", "content": shown_text}
        assert correction["role"] == "user" and "rejected" in correction["content"]


def test_a_runaway_unparsable_tool_call_is_shown_back_bounded_and_its_fault_too() -> None:
    """The parser's error quotes the whole argument string: a 1 MB one stays within SHOWN_CHARS in the re-ask's
    shown call, ERR_CHARS in its correction and in the fault the stage records."""
    from graph.validation import ERR_CHARS, SHOWN_CHARS

    torn = {"id": "c1", "type": "function", "function": {"name": "view_frames",
                                                          "arguments": '{"frames": [3,, ' + "5, " * 350_000}}
    torn_reply = StubReply(body=json.dumps({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [torn]}}]}))
    with OpenAIStub([torn_reply] * 2) as stub, pytest.raises(BackboneFault) as fault:
        asyncio.run(make(stub, "json_schema", schema_retries=1).atool_round("inspect", list(MSGS), [VIEW], Usage()))
    shown, correction = stub.requests[1]["messages"][-2:]
    assert len(shown["content"]) < SHOWN_CHARS + 100 and "more characters not shown here" in shown["content"]
    assert "rejected" in correction["content"] and len(correction["content"]) < ERR_CHARS + 200
    assert len(str(fault.value)) < ERR_CHARS + 200


@pytest.mark.parametrize("text", ["<think>Frame 3 is unclear; I should look at", "<think>R2 looks met.</think>  "])
def test_a_final_reply_without_an_answer_after_its_reasoning_is_reasked(text: str) -> None:
    with OpenAIStub([StubReply(content=text), StubReply(content="R2 is met.")]) as stub:
        reply = asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [VIEW], Usage()))
    assert reply.text == "R2 is met." and len(stub.requests) == 2


def test_inspect_notes_keep_the_answer_not_the_reasoning(clip) -> None:
    from tests.graph_scripts import full_script, make_agent, tool_call
    from tests.graph_scripts import run as run_agent

    answer = "<think>" + "weighing every frame. " * 300 + "</think>Notes: R2 confirmed at frame 20."
    agent, model = make_agent("full", full_script(inspect=[tool_call("view_frames", {"frames": [10, 20]}), answer]))
    out = run_agent(agent, clip)
    assert out["inspect_notes"] == "Notes: R2 confirmed at frame 20."
    assert "Notes: R2 confirmed at frame 20." in model.calls_for("reflect")[0].text()


def test_an_output_the_cache_cannot_store_is_still_returned(tmp_path, monkeypatch, caplog) -> None:
    """Another process holding the SQLite cache past its busy timeout made the stage fail after the model had
    answered (an internal fault: the run was ineligible)."""
    cache = StageCache(tmp_path / "cache.sqlite")

    def locked(key, value):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(cache, "put", locked)
    with OpenAIStub([good("json_schema")]) as stub, caplog.at_level(logging.WARNING, logger="graph.cache"):
        assert run(make(stub, "json_schema", cache=cache), Usage()).score == 3
    assert "judge output not stored (OperationalError: database is locked)" in caplog.text


def test_function_call_arguments_that_are_not_json_are_named_as_such(monkeypatch) -> None:
    """They were re-asked as "empty_reply: the reply had no content", which misleads model and user alike."""
    from tests import openai_stub

    real = openai_stub._completion

    def torn(reply, model):  # the stub serialises arguments: break them on the wire
        out = real(reply, model)
        for call in out["choices"][0]["message"].get("tool_calls") or []:
            if call["function"]["arguments"] == "{}":
                call["function"]["arguments"] = '{"label": "ok", "score": '
        return out

    monkeypatch.setattr(openai_stub, "_completion", torn)
    with OpenAIStub([StubReply(content=None, tool_calls=[("Verdict", {})]), good("function_calling")]) as stub:
        assert run(make(stub, "function_calling"), Usage()).score == 3
    text = json.dumps(stub.requests[1]["messages"])
    assert "arguments are not valid JSON" in text and "had no content" not in text


def test_a_final_answer_cut_at_the_token_limit_is_returned_but_not_cached() -> None:
    """A free-text answer cut at max_tokens passes every check; it was cached, and the cap is not in the stage
    key, so a rerun with a higher RAA_MAX_TOKENS was served the cut text. A finished answer is still cached."""
    cache = StageCache(None)
    cut = StubReply(content="The frames confirm R1; R2 is", finish_reason="length", completion_tokens=64)
    with OpenAIStub([cut, StubReply(content="The frames confirm R1 and R2.")]) as stub:
        bb = make(stub, "json_schema", cache=cache)
        first = bb.tool_round("inspect", list(MSGS), [VIEW], Usage())
        assert first.text == "The frames confirm R1; R2 is" and first.response_metadata["finish_reason"] == "length"
        assert len(cache) == 0
        again = bb.tool_round("inspect", list(MSGS), [VIEW], usage := Usage())
        assert again.text == "The frames confirm R1 and R2." and usage.cache_hits == 0 and len(stub.requests) == 2
        assert len(cache) == 1 and bb.tool_round("inspect", list(MSGS), [VIEW], hit := Usage()).text == again.text
    assert hit.cache_hits == 1


@pytest.mark.parametrize("method", METHODS)
def test_a_structured_reply_cut_at_the_token_limit_fails_validation_and_is_not_cached(method: str) -> None:
    cache = StageCache(None)
    cut = StubReply(content='{"label": "ok", "sco', finish_reason="length")
    with OpenAIStub([cut, cut]) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, method, cache=cache), Usage())
    assert info.value.kind == "invalid_reply" and len(cache) == 0


def test_the_run_notes_an_inspector_answer_cut_at_the_token_limit(clip) -> None:
    from langchain_core.messages import AIMessage

    from tests.graph_scripts import full_script, make_agent, tool_call
    from tests.graph_scripts import run as run_agent

    cut = AIMessage(content="R1 is confirmed at frame 10 and R2", response_metadata={"finish_reason": "length"})
    agent, _ = make_agent("full", full_script(inspect=[tool_call("view_frames", {"frames": [10, 20]}), cut]))
    out = run_agent(agent, clip)
    assert out["inspect_notes"] == "R1 is confirmed at frame 10 and R2"
    note = next(n for n in out["notes"] if n.startswith("inspect:"))
    assert "cut at the token limit" in note and note in out["result"].reasons
    assert "answer cut at the token limit" in [s for s in out["steps"] if s["node"] == "inspect"][-1]["decision"]


@pytest.mark.parametrize("reply", [StubReply(content=None, refusal="I can't help with that."),
                                   StubReply(content=None, finish_reason="content_filter")],
                         ids=["refusal", "content_filter"])
def test_a_declined_tool_round_or_json_mode_reply_is_refused_at_once(reply: StubReply) -> None:
    """A refusal or a content-filter stop came back as an empty reply: re-asked (the same request, declined
    again) and reported as "empty_reply: the reply had no content". Structured json_schema /
    function_calling calls already say "refused"; tool rounds and json_mode now do too, without a re-ask."""
    with OpenAIStub([reply] * 3) as stub:
        with pytest.raises(BackboneFault) as tools:
            make(stub, "json_schema").tool_round("inspect", list(MSGS), [VIEW], Usage())
        assert tools.value.kind == "refused" and len(stub.requests) == 1
        with pytest.raises(BackboneFault) as structured:
            run(make(stub, "json_mode"), Usage())
        assert structured.value.kind == "refused" and len(stub.requests) == 2
    assert ("can't help" in tools.value.message) == (reply.refusal is not None)


@pytest.mark.parametrize("method", METHODS)
def test_a_structured_reply_cut_at_the_token_limit_says_to_raise_the_cap(method: str) -> None:
    """json_schema and json_mode said "raise RAA_MAX_TOKENS" (the SDK's LengthFinishReasonError); with
    function_calling the same cut reply only said "the reply's JSON object is not closed"."""
    cut = StubReply(content='{"label": "ok", "sco', finish_reason="length")
    with OpenAIStub([cut, cut]) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, method), Usage())
    assert info.value.kind == "invalid_reply" and "RAA_MAX_TOKENS" in info.value.message


def _cut_but_valid(method: str) -> StubReply:
    """A reply the server cut at the token limit whose answer still validates: a tool call complete before the
    cut (a server whose parser closed the arguments, or a second call cut), or an object the model kept writing
    after."""
    if method == "function_calling":
        return tool_reply("Verdict", {"label": "ok", "score": 3}, finish_reason="length")
    return StubReply(content='{"label": "ok", "score": 3}\nThe arm then', finish_reason="length")


@pytest.mark.parametrize("method", METHODS)
def test_a_structured_reply_cut_at_the_token_limit_is_never_taken_even_when_it_validates(method: str) -> None:
    """json_schema and json_mode refuse every reply cut at the token limit (the openai SDK's
    LengthFinishReasonError); function_calling took a cut one whose arguments still parsed, so the same cut
    reply scored with one method and was re-asked with the others."""
    with OpenAIStub([_cut_but_valid(method), good(method, score=5)]) as stub:
        assert run(make(stub, method), usage := Usage()).score == 5
    assert len(stub.requests) == 2 and usage.calls == 2
    assert "RAA_MAX_TOKENS" in json.dumps(stub.requests[1]["messages"])
    with OpenAIStub([_cut_but_valid(method)] * 2) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, method), Usage())
    assert info.value.kind == "invalid_reply" and "RAA_MAX_TOKENS" in info.value.message


@pytest.mark.parametrize("method", METHODS)
def test_an_empty_object_is_no_audit_or_observation_and_is_reasked(method: str) -> None:
    """Every field of AuditReport and Observation has a default: `{}` validated as a clean audit (no repair, straight
    to the gate) or as an observation of nothing. A reply that names any field (an explicit clean audit) passes."""
    with OpenAIStub([_reply(method, {}), _reply(method, DIRTY)]) as stub:
        out = make(stub, method).structured("audit", AuditReport, list(MSGS), usage := Usage())
    assert out.missing_requirements == ["R2"] and not out.clean and len(stub.requests) == 2 and usage.calls == 2
    assert "an empty object is no AuditReport" in json.dumps(stub.requests[1]["messages"])
    seen = {"scene": "a table", "summary": "an arm moves"}
    with OpenAIStub([_reply(method, {}, "Observation"), _reply(method, seen, "Observation")]) as stub:
        obs = make(stub, method).structured("observe", Observation, list(MSGS), Usage())
    assert obs.scene == "a table" and len(stub.requests) == 2
    with OpenAIStub([_reply(method, {"clean": True})]) as stub:  # explicit: one request
        assert make(stub, method).structured("audit", AuditReport, list(MSGS), Usage()).clean
    with OpenAIStub([_reply(method, {}, "InspectionPlan")]) as stub:  # nothing to re-inspect is a plan
        plan = make(stub, method).structured("plan", InspectionPlan, list(MSGS), Usage())
    assert plan.views == [] and plan.tracks == [] and len(stub.requests) == 1


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("rejected", ["out_of_range", "wrapped"])
def test_the_reask_shows_the_rejected_reply_before_the_correction(method: str, rejected: str) -> None:
    """The re-ask is the rejected reply (an assistant turn), then why it was rejected. json_mode did so; json_schema
    (whose reply the openai SDK rejects inside the call) and function_calling's wrapped answer sent only the error,
    so the model was told a field of a reply it could not see was wrong."""
    obj = {"label": "ok", "score": 99} if rejected == "out_of_range" else {"Verdict": {"label": "ok", "score": 3}}
    bad = (StubReply(content="Here is my verdict.", tool_calls=[("Verdict", obj)]) if method == "function_calling"
           else json_reply(obj))  # (a remark beside the call is not what is shown)
    with OpenAIStub([bad, good(method)]) as stub:
        assert run(make(stub, method), Usage()).score == 3
    shown, correction = stub.requests[1]["messages"][-2:]
    assert shown["role"] == "assistant" and json.loads(shown["content"]) == obj
    assert correction["role"] == "user" and "rejected" in correction["content"]


@pytest.mark.parametrize("method", METHODS)
def test_a_long_rejected_reply_is_shown_whole(method: str) -> None:
    """A reply rejected for a list or text over its limit is long by nature: the re-ask showed its first 1,500
    characters, cut mid-JSON, so the model was told an item it could not see was wrong, and read its own reply as
    unfinished."""
    long = {**CLEAN, "missing_requirements": [f"R{i}: " + "the block never reaches the bowl " * 4 for i in range(17)]}
    with OpenAIStub([_reply(method, long), _reply(method, DIRTY)]) as stub:
        assert make(stub, method).structured("audit", AuditReport, list(MSGS), Usage()).missing_requirements == ["R2"]
    shown = stub.requests[1]["messages"][-2]
    assert len(json.dumps(long)) > 2000 and shown["role"] == "assistant" and json.loads(shown["content"]) == long


def test_a_runaway_rejected_reply_is_shown_cut_and_says_so() -> None:
    from graph.validation import SHOWN_CHARS, InvalidReply, reask

    shown, _ = reask("Verdict", InvalidReply("invalid_reply", "too long", "ab" * SHOWN_CHARS))
    assert shown.content == "ab" * (SHOWN_CHARS // 2) + f"\n[... {SHOWN_CHARS} more characters not shown here]"
