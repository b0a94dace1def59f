"""A 4xx saying the server or model does not take a part of the request is a setting to change, not the clip's answer.

A 400 for structured output the server does not serve (OpenAI's "'response_format' of type 'json_schema' is not
supported with this model", a guided-decoding backend that cannot compile the schema), for tool calls it does not
serve (vLLM's "auto" tool choice without --enable-auto-tool-choice, Ollama's "does not support tools"), or for images
sent to a text-only model ("image_url is only supported by certain models", vLLM's "At most 0 image(s)") was kind
"refused", the model's answer about the clip: a misconfigured run turned every clip ineligible and the trainer counted
them as clips it could not judge. Such a fault is "settings" (an outage), never retried, and names the setting that
avoids the need. Only a rejection of what the request carried counts (read from the request body sent), so a 400
naming tools on a request without tools, or a content policy that names a tool, stays "refused".
Through the real ChatOpenAI path against the local stub server.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from evals.judge import JUDGE_NAMES
from graph.backbone import BackboneFault, Usage
from graph.schemas import Fault
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import MSGS, Verdict, good, make

# langchain-openai warns on OpenAI's own 'json_schema is not supported with this model' text, which these tests
# serve on purpose (its advice is the method setting the fault names)
pytestmark = pytest.mark.filterwarnings("ignore:This model does not support OpenAI's structured output:UserWarning")

OPENAI_SCHEMA = ("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model. Learn "
                 "more about supported models at the Structured Outputs guide")
OPENAI_JSON_OBJECT = "Invalid parameter: 'response_format' of type 'json_object' is not supported with this model."
OTHER_SCHEMA = ("The parameter `response_format.type` specified in the request are not valid: invalid value: "
                "`json_schema`, supported values are: `json_object` and `text`.")
PYDANTIC_SCHEMA = ("[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be "
                   "'text' or 'json_object'\", 'input': 'json_schema'}]")  # a server whose request model lacks it
XGRAMMAR = "The provided JSON schema contains features not supported by xgrammar."
OLLAMA_TOOLS = "registry.ollama.ai/library/llava:latest does not support tools"
VLLM_AUTO = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
LLAMACPP_TOOLS = "tools param requires --jinja flag"
OPENAI_IMAGES = "Invalid content type. image_url is only supported by certain models."
VLLM_NO_IMAGES = "At most 0 image(s) may be provided in one prompt."
NOT_MULTIMODAL = "Qwen3MoeForCausalLM is not a multimodal model"

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQSkZJRg=="}}
WITH_IMAGE = [SystemMessage(content="# stage: judge\nJudge."),
              HumanMessage(content=[{"type": "text", "text": "Is it ok?"}, IMAGE])]
VIEW = {"type": "function", "function": {"name": "view_frames", "description": "view frames",
                                         "parameters": {"type": "object", "properties": {}}}}


def _structured(stub: OpenAIStub, method: str, messages=MSGS, names=None) -> BackboneFault:
    bb = make(stub, method)
    if names is not None:
        bb.setting_names = names
    with pytest.raises(BackboneFault) as info:
        bb.structured("judge", Verdict, list(messages), Usage())
    return info.value


def _settings(fault: BackboneFault, stub: OpenAIStub, *named: str) -> None:
    assert fault.kind == "settings" and len(stub.requests) == 1, fault  # not retried, not re-asked
    assert all(name in fault.message for name in named), fault.message
    assert Fault(stage=fault.stage, kind=fault.kind, message=fault.message).outage


@pytest.mark.parametrize("method, text", [("json_schema", OPENAI_SCHEMA), ("json_schema", OTHER_SCHEMA),
                                          ("json_schema", XGRAMMAR), ("json_mode", OPENAI_JSON_OBJECT),
                                          ("json_schema", PYDANTIC_SCHEMA)],
                         ids=["openai", "other", "xgrammar", "json_object", "request_model"])
def test_structured_output_the_server_does_not_serve_names_the_method_setting(method: str, text: str) -> None:
    with OpenAIStub([StubReply(status=400, content=text), good(method)]) as stub:
        fault = _structured(stub, method)
    _settings(fault, stub, "RAA_STRUCTURED_METHOD")
    assert f"RAA_STRUCTURED_METHOD={method}" not in fault.message  # the other methods are named, not the failing one


@pytest.mark.parametrize("text", [OLLAMA_TOOLS, LLAMACPP_TOOLS])
def test_function_calling_without_tool_support_names_the_method_not_the_inspect_mode(text: str) -> None:
    with OpenAIStub([StubReply(status=400, content=text), good("function_calling")]) as stub:
        fault = _structured(stub, "function_calling")
    _settings(fault, stub, "RAA_STRUCTURED_METHOD=json_schema")
    assert "RAA_INSPECT_MODE" not in fault.message


@pytest.mark.parametrize("text", [VLLM_AUTO, OLLAMA_TOOLS, LLAMACPP_TOOLS])
def test_a_tool_round_without_tool_support_names_both_ways_out(text: str) -> None:
    with OpenAIStub([StubReply(status=400, content=text)] * 2) as stub, pytest.raises(BackboneFault) as info:
        asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [VIEW], Usage()))
    _settings(info.value, stub, "--enable-auto-tool-choice", "RAA_INSPECT_MODE=plan")


@pytest.mark.parametrize("text", [OPENAI_IMAGES, VLLM_NO_IMAGES, NOT_MULTIMODAL])
def test_images_sent_to_a_text_only_model_name_the_model_setting(text: str) -> None:
    with OpenAIStub([StubReply(status=400, content=text)]) as stub:
        fault = _structured(stub, "json_schema", WITH_IMAGE)
    _settings(fault, stub, "RAA_MODEL", "vision")
    assert "max_images_per_call" not in fault.message  # fewer images would not help a model that takes none


def test_the_judge_s_rejection_names_its_own_settings() -> None:
    with OpenAIStub([StubReply(status=400, content=OPENAI_SCHEMA)]) as stub:
        fault = _structured(stub, "json_schema", names=JUDGE_NAMES)
    _settings(fault, stub, "RAA_JUDGE_STRUCTURED_METHOD")
    with OpenAIStub([StubReply(status=400, content=OPENAI_IMAGES)]) as stub:
        fault = _structured(stub, "json_schema", WITH_IMAGE, names=JUDGE_NAMES)
    _settings(fault, stub, "RAA_JUDGE_MODEL")


@pytest.mark.parametrize("text", [
    "Your request was rejected by our content policy: the tool output describes violence.",
    "Invalid 'messages[2].tool_call_id': the tool message does not follow a tool call.",
], ids=["policy", "malformed"])
def test_a_tool_round_400_that_only_names_a_tool_is_not_a_settings_fault(text: str) -> None:
    """The tool rounds took any 400 whose message held "tool" for a server without tool calling."""
    with OpenAIStub([StubReply(status=400, content=text)]) as stub, pytest.raises(BackboneFault) as info:
        asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [VIEW], Usage()))
    assert info.value.kind == "refused" and "RAA_INSPECT_MODE" not in info.value.message, info.value.message


@pytest.mark.parametrize("text", [OPENAI_IMAGES, VLLM_AUTO])
def test_a_rejection_of_what_the_request_did_not_carry_stays_refused(text: str) -> None:
    """Images or tools named in a 400 to a json_mode request, which carries neither."""
    with OpenAIStub([StubReply(status=400, content=text)]) as stub:
        fault = _structured(stub, "json_mode")
    assert fault.kind == "refused", fault
    with OpenAIStub([StubReply(status=400, content=OPENAI_SCHEMA)]) as stub, pytest.raises(BackboneFault) as info:
        asyncio.run(make(stub, "json_schema").atool_round("inspect", list(MSGS), [VIEW], Usage()))  # no response_format
    assert info.value.kind == "refused", info.value


def test_a_limit_of_no_image_is_a_model_without_images_not_a_limit_to_raise() -> None:
    """`raa doctor` reads `limit_kind` for its hint: a limit of 0 is no "fewer images per request" to send."""
    import httpx
    import openai

    from graph.transport import limit_kind

    def rejected(text: str) -> openai.BadRequestError:
        request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
        return openai.BadRequestError(text, response=httpx.Response(400, request=request), body=None)

    assert limit_kind(rejected(VLLM_NO_IMAGES)) is None
    assert limit_kind(rejected("""You set or defaulted to '{"image": 0}' in `--limit-mm-per-prompt`""")) is None
    assert limit_kind(rejected("At most 48 image(s) may be provided in one prompt.")) == "images"


@pytest.mark.parametrize("text, named", [
    ("image input is not supported - hint: if this is unexpected, you may need to provide the mmproj", "RAA_MODEL"),
    (LLAMACPP_TOOLS, "RAA_INSPECT_MODE=plan")], ids=["images", "tools"])
def test_llama_cpp_s_500_for_an_unsupported_part_is_not_retried_as_an_outage_of_the_moment(text: str,
                                                                                          named: str) -> None:
    """llama.cpp's server answers such a request with a 500: it was retried `max_retries` times (the same answer each
    time), then a "transport" fault with no word on what to change."""
    with OpenAIStub([StubReply(status=500, content=text)] * 3) as stub, pytest.raises(BackboneFault) as info:
        bb = make(stub, "json_schema")
        asyncio.run(bb.atool_round("inspect", list(WITH_IMAGE), [VIEW], Usage()))
    _settings(info.value, stub, named)


LMSTUDIO_JSON_OBJECT = "'response_format.type' must be 'json_schema' or 'text'"  # LM Studio takes no json_object
LLAMACPP_OLD_SCHEMA = 'response_format type must be one of "text" or "json_object", but got: json_schema'  # a 500
DEEPINFRA_TOOLS = "deepinfra error: Tool calling is not supported for model: mistralai/Mistral-Small-24B-Instruct-2501"
DASHSCOPE_TOOLS = "<400> InternalError.Algo.InvalidParameter: The tool call is not supported."
NO_PARSER = "Internal server error: Unsupported tool_call_parser: None"  # a gateway's 500 before a server without one
DEEPSEEK_IMAGES = ("Failed to deserialize the JSON body into the target type: messages[1]: unknown variant "
                   "`image_url`, expected `text`")
OLLAMA_IMAGES = "this model is missing data required for image input"  # a 500 from a model without a projector
TGI_TRTLLM_IMAGES = "Input validation error: image modality is not supported"  # TGI's TensorRT-LLM backend, a 422


@pytest.mark.parametrize("status, method, text, named", [
    (400, "json_mode", LMSTUDIO_JSON_OBJECT, "RAA_STRUCTURED_METHOD=function_calling"),
    (500, "json_schema", LLAMACPP_OLD_SCHEMA, "RAA_STRUCTURED_METHOD=json_mode"),
    (405, "function_calling", DEEPINFRA_TOOLS, "RAA_STRUCTURED_METHOD=json_schema"),
    (400, "function_calling", DASHSCOPE_TOOLS, "RAA_STRUCTURED_METHOD=json_schema"),
    (500, "function_calling", NO_PARSER, "RAA_STRUCTURED_METHOD=json_schema"),
    (400, "json_schema", DEEPSEEK_IMAGES, "RAA_MODEL"), (500, "json_schema", OLLAMA_IMAGES, "RAA_MODEL"),
    (422, "json_schema", TGI_TRTLLM_IMAGES, "RAA_MODEL")],
    ids=["lmstudio-json_object", "llamacpp-json_schema", "deepinfra-tools", "dashscope-tools", "no-parser", "deepseek",
         "ollama-images", "tgi-trtllm-images"])
def test_other_servers_words_for_a_part_they_do_not_take(status: int, method: str, text: str, named: str) -> None:
    """Real servers' wordings the matcher missed: 'refused' for every clip (or a 500 retried, then 'transport')."""
    with OpenAIStub([StubReply(status=status, content=text)] * 3 + [good(method)]) as stub:
        fault = _structured(stub, method, WITH_IMAGE)
    _settings(fault, stub, named)


@pytest.mark.parametrize("text", ["This model does not support images larger than 5 MB",
                                  "This model does not support image inputs with this encoding",
                                  "The server cannot accept images of more than 4096x4096 pixels"],
                         ids=["size", "encoding", "pixels"])
def test_a_rejection_of_these_images_is_not_a_model_without_images(text: str) -> None:
    """Read as "the server or model takes no images": a 'settings' fault naming a vision model (which it is), the clip
    kept out of the counts and retried by --retry-ineligible for ever, though its own images (how large they encode)
    may be what was refused."""
    with OpenAIStub([StubReply(status=400, content=text)]) as stub:
        fault = _structured(stub, "json_schema", WITH_IMAGE)
    assert fault.kind == "refused" and "vision-language" not in fault.message, fault


def test_another_chat_model_s_limit_of_no_image_is_still_a_settings_fault() -> None:
    """vLLM's "At most 0 image(s)" says itself that images were sent: with no request to read (a LangChain
    `ModelError` from another chat model) it was a "settings" image limit, then neither that nor an unsupported
    part (which read only the openai SDK's errors): "refused", every clip counted as one the agent could not judge."""
    from langchain_core.exceptions import ModelError

    from tests.test_backbone_scripted import _bb

    bb, model = _bb([ModelError(f"Error code: 400 - {VLLM_NO_IMAGES}"), {"label": "a", "score": 2}])
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(WITH_IMAGE), Usage()))
    assert info.value.kind == "settings" and len(model.calls) == 1, info.value
    assert "RAA_MODEL" in info.value.message, info.value.message


@pytest.mark.parametrize("error", ["ModelAPIError", "ModelInvalidRequestError"])
def test_another_chat_model_s_rejection_of_images_it_was_sent_is_a_settings_fault(error: str) -> None:
    """A chat model other than ChatOpenAI raises LangChain's `ModelError`s with no request attached: the matcher read
    none, so llama.cpp's "image input is not supported" (a 500: `ModelAPIError`, retryable) was retried and then
    "transport", a 400 (`ModelInvalidRequestError`) "refused". The messages the backbone sent say images went."""
    from langchain_core import exceptions

    from tests.test_backbone_scripted import _bb

    text = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"
    bb, model = _bb([getattr(exceptions, error)(text)] * 3 + [{"label": "a", "score": 2}])
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(WITH_IMAGE), Usage()))
    assert info.value.kind == "settings" and len(model.calls) == 1, info.value
    assert "RAA_MODEL" in info.value.message, info.value.message


def test_another_chat_model_s_rejection_naming_images_it_was_not_sent_stays_as_it_was() -> None:
    """Only a rejection of what the request carried counts: the same words for a text-only request are no setup."""
    from langchain_core.exceptions import ModelInvalidRequestError

    from tests.test_backbone_scripted import _bb

    bb, model = _bb([ModelInvalidRequestError("image input is not supported"), {"label": "a", "score": 2}])
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == "refused", info.value
