"""A request over a limit of the server's setup is a setting to change, not the model's answer about the clip.

A 400 for more images than the server takes in one request (vLLM's `--limit-mm-per-prompt`) or for a request
longer than the model's context (vLLM's "maximum context length", LangChain's `ContextOverflowError`) was kind
"refused": the reward service and the trainer counted it as the clip's own ineligibility, while every clip of the
run hits the same limit. It is kind "settings" (an outage, `graph.schemas.OUTAGE_FAULTS`), never retried, and its
message names what to change on the server and in the client's own settings (`graph.transport.EndpointNames`).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.exceptions import ContextOverflowError, ModelError

from evals.judge import JUDGE_NAMES
from graph.backbone import BackboneFault, Usage
from graph.schemas import Fault
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import good, make, run
from tests.test_backbone_scripted import MSGS, Verdict, _bb

IMAGES_OLD = "At most 48 image(s) may be provided in one prompt."
IMAGES_NEW = ("You set or defaulted to '{\"image\": 48}' in `--limit-mm-per-prompt`, but passed 49 image items in "
              "the same prompt.")
CONTEXT = ("This model's maximum context length is 16384 tokens. However, you requested 22301 tokens (21789 in the "
           "messages, 512 in the completion). Please reduce the length of the messages or completion.")
DECODER = "The decoder prompt (length 88049) is longer than the maximum model length of 32768."
TOO_MANY = "Too many images in request: 54 > 30"  # a hosted API's count limit (others: "... Max is 50.")


@pytest.mark.parametrize("text, named", [
    (IMAGES_OLD, ["--limit-mm-per-prompt", "max_images_per_call"]),
    (IMAGES_NEW, ["--limit-mm-per-prompt", "max_images_per_call"]),
    (CONTEXT, ["--max-model-len", "RAA_IMAGE_LONG_SIDE", "RAA_MAX_TOKENS"]),
    (DECODER, ["--max-model-len", "RAA_IMAGE_LONG_SIDE"]), (TOO_MANY, ["max_images_per_call"])],
    ids=["images", "images_new", "context", "decoder", "too_many"])
def test_a_server_limit_is_a_settings_fault_naming_what_to_change(text: str, named: list[str]) -> None:
    with OpenAIStub([StubReply(status=400, content=text), good("json_schema")]) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault
    assert all(name in fault.message for name in named), fault.message
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


def test_langchain_s_context_overflow_of_any_chat_model_is_a_settings_fault() -> None:
    bb, model = _bb([ContextOverflowError("prompt too long"), {"label": "a", "score": 2}])
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == "settings" and len(model.calls) == 1 and "--max-model-len" in info.value.message


def test_the_judge_s_limit_names_its_own_settings() -> None:
    with OpenAIStub([StubReply(status=400, content=IMAGES_OLD)]) as stub, pytest.raises(BackboneFault) as info:
        bb = make(stub, "json_schema")
        bb.setting_names = JUDGE_NAMES
        run(bb, Usage())
    assert "RAA_JUDGE_MAX_FRAMES" in info.value.message and "max_images_per_call" not in info.value.message


def test_a_content_policy_400_that_mentions_images_is_still_refused() -> None:
    with OpenAIStub([StubReply(status=400, content="the image violates the content policy")] * 2) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    assert info.value.kind == "refused", info.value


NGINX_413 = ("<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 "
             "Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")


@pytest.mark.parametrize("reply", [StubReply(status=413, body=NGINX_413, content_type="text/html"),
                                   StubReply(status=413, content="Request body too large")], ids=["nginx", "json"])
def test_a_body_over_the_proxy_s_limit_is_a_settings_fault_naming_what_to_change(reply: StubReply) -> None:
    """A 413 (a reverse proxy's body limit, nginx's `client_max_body_size`, met by many base64 frames) was kind
    "refused", the clip's own ineligibility, while every clip of the run sends bodies of about that size."""
    with OpenAIStub([reply, good("json_schema")]) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault
    assert all(n in fault.message for n in ("client_max_body_size", "max_images_per_call", "RAA_IMAGE_LONG_SIDE"))
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


def test_the_judge_s_body_limit_names_its_own_settings() -> None:
    with OpenAIStub([StubReply(status=413, body=NGINX_413, content_type="text/html")]) as stub:
        bb = make(stub, "json_schema")
        bb.setting_names = JUDGE_NAMES
        with pytest.raises(BackboneFault) as info:
            run(bb, Usage())
    message = info.value.message
    assert info.value.kind == "settings" and "RAA_JUDGE_MAX_FRAMES" in message, message
    assert "image_long_side" in message and "max_images_per_call" not in message, message


def test_another_chat_model_s_413_in_words_is_a_settings_fault() -> None:
    bb, model = _bb([ModelError("Error code: 413 - Request Entity Too Large"), {"label": "a", "score": 2}])
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == "settings" and len(model.calls) == 1 and "client_max_body_size" in info.value.message


LLAMA_CPP_BODY = json.dumps({"error": {"code": 400, "message": "request (70123 tokens) exceeds context size (4096 tokens)",
                                       "type": "exceed_context_size_error", "n_prompt_tokens": 70123, "n_ctx": 4096}})


@pytest.mark.parametrize("reply", [
    StubReply(status=400, content="request (70123 tokens) exceeds the available context size (4096 tokens), try "
                                  "increasing it"),
    StubReply(status=400, body=LLAMA_CPP_BODY),
    StubReply(status=400, content="The input (70123 tokens) is longer than the model's context length (32768 tokens)."),
    StubReply(status=422, content="Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: "
                                  "70123 `inputs` tokens and 1024 `max_new_tokens`"),
    StubReply(status=422, content="Input validation error: `inputs` must have less than 32767 tokens. Given: 70123")],
    ids=["llama_cpp", "llama_cpp_type", "sglang", "tgi_total", "tgi_input"])
def test_other_servers_words_for_a_request_longer_than_the_context_name_the_context(reply: StubReply) -> None:
    """llama.cpp's server (its error type `exceed_context_size_error`; the message's wording moved between builds),
    SGLang (sgl-project/sglang test/srt/test_request_length_validation.py) and TGI (router/src/validation.rs,
    `MaxTotalTokens`, `InputLength`) say a request is longer than the model's context in words only vLLM's were read
    in: "refused" for every clip, the model's answer about it, and the doctor asked whether the model takes images."""
    with OpenAIStub([reply, good("json_schema")]) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault
    assert "model's context" in fault.message and "RAA_IMAGE_LONG_SIDE" in fault.message, fault.message


TGI_TOTAL = json.dumps({"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: "
                                 "70123 `inputs` tokens and 1024 `max_new_tokens`", "error_type": "validation"})


def test_tgi_s_own_error_body_is_read() -> None:
    """TGI answers `{"error": "<words>", "error_type": "validation"}` (router/src/server.rs `ErrorResponse`), an
    `error` that is a string: the openai SDK puts only an `error.message` in its exception's text, so its words were
    never read (the test above wraps them as OpenAI does): "refused" for every clip, its message "Error code: 422"."""
    with OpenAIStub([StubReply(status=422, body=TGI_TOTAL), good("json_schema")]) as stub, \
            pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and "max_new_tokens" in fault.message and "--max-total-tokens" in fault.message, \
        fault
