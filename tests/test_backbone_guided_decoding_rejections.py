"""A server whose guided decoding is off, or cannot compile the stage schema, rejects every clip's request alike.

TGI started with --disable-grammar-support and SGLang with --grammar-backend none constrain no output: they reject
`response_format` and tools alike (TGI turns every tool call into a grammar, SGLang a forced one), so a structured
call or tool round was "refused" for every clip (or "settings" naming another method, which the server rejects
the same way). vLLM constrains a forced tool call (function_calling) with the same grammar compiler as a json_schema
`response_format`: its xgrammar rejection was "refused" under function_calling, and under json_schema named
function_calling, which the same compiler rejects. The servers' words are quoted from their sources in
graph/setup_rejections.py. Through the real ChatOpenAI path against the local stub server.
"""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from graph.backbone import BackboneFault, Usage
from graph.setup_rejections import unsupported_part
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import MSGS, Verdict, good, make
from tests.test_backbone_unsupported_requests import VIEW, XGRAMMAR, _settings

pytestmark = pytest.mark.filterwarnings("ignore:This model does not support OpenAI's structured output:UserWarning")

TGI_NO_GRAMMAR = "Input validation error: grammar is not supported"  # a 422
SGLANG_NO_GRAMMAR = ("Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported when the "
                     "server is launched with --grammar-backend none")


def _fault(stub: OpenAIStub, method: str, tool_round: bool) -> BackboneFault:
    bb = make(stub, method)
    with pytest.raises(BackboneFault) as info:
        if tool_round:
            asyncio.run(bb.atool_round("inspect", list(MSGS), [VIEW], Usage()))
        else:
            bb.structured("judge", Verdict, list(MSGS), Usage())
    return info.value


@pytest.mark.parametrize("status, text, option", [(422, TGI_NO_GRAMMAR, "--disable-grammar-support"),
                                                  (400, SGLANG_NO_GRAMMAR, "--grammar-backend")],
                         ids=["tgi", "sglang"])
@pytest.mark.parametrize("method, tool_round", [("json_schema", False), ("json_mode", False),
                                                ("function_calling", False), ("json_schema", True)],
                         ids=["json_schema", "json_mode", "function_calling", "tool_round"])
def test_a_server_without_guided_decoding_names_its_option(status: int, text: str, option: str, method: str,
                                                           tool_round: bool) -> None:
    with OpenAIStub([StubReply(status=status, content=text), good(method)]) as stub:
        fault = _fault(stub, method, tool_round)
    _settings(fault, stub, option)
    assert "RAA_STRUCTURED_METHOD=" not in fault.message  # every method asks the server for guided decoding


def test_grammar_off_words_for_a_request_that_asked_no_guided_decoding_are_no_setup() -> None:
    """Only a rejection of what the request carried counts: a body with neither tools nor a `response_format`."""
    def rejected(body: dict) -> openai.BadRequestError:
        request = httpx.Request("POST", "http://stub/v1/chat/completions", json=body)
        return openai.BadRequestError(TGI_NO_GRAMMAR, response=httpx.Response(400, request=request), body=None)

    assert unsupported_part(rejected({"messages": []})) is None
    assert unsupported_part(rejected({"messages": [], "tools": [VIEW]})) == "guided"


@pytest.mark.parametrize("method", ["function_calling", "json_schema"])
def test_a_schema_vllm_s_xgrammar_cannot_compile_names_json_mode(method: str) -> None:
    with OpenAIStub([StubReply(status=400, content=XGRAMMAR), good(method)]) as stub:
        fault = _fault(stub, method, tool_round=False)
    _settings(fault, stub, "RAA_STRUCTURED_METHOD=json_mode")
    assert "function_calling" not in fault.message and "RAA_STRUCTURED_METHOD=json_schema" not in fault.message


@pytest.mark.parametrize("method, also", [("json_schema", "RAA_STRUCTURED_METHOD=json_mode"),
                                          ("function_calling", "RAA_STRUCTURED_METHOD=json_mode"),
                                          ("json_mode", None)])
def test_a_tool_round_s_schema_vllm_s_xgrammar_cannot_compile_names_the_inspect_mode(method: str,
                                                                                    also: str | None) -> None:
    """vLLM compiles a tool round's tool parameters (its tool parsers' structural tags) with xgrammar too: its
    rejection was "refused" for every clip, though no structured method is sent there; inspecting with one plan
    sends no tools. The plan is a structured call, whose schema the same compiler reads under json_schema or
    function_calling: the fix named only the inspect mode, so its run could meet the compiler's refusal again, a
    second fault naming json_mode; both are named at once, json_mode only where the method compiles a schema."""
    with OpenAIStub([StubReply(status=400, content=XGRAMMAR), good(method)]) as stub:
        fault = _fault(stub, method, tool_round=True)
    _settings(fault, stub, "RAA_INSPECT_MODE=plan", *([also] if also else []))
    assert "--enable-auto-tool-choice" not in fault.message
    if also is None:
        assert "RAA_STRUCTURED_METHOD" not in fault.message, fault.message
