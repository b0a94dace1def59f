"""What a server's rejection of a request says about its setup (graph.transport.settings_problem; DESIGN.md §3
"Faults"): a limit the request exceeds (`server_limit`, graph/server_limits.py), or a part of the request the server
or model does not take at all (`unsupported_part`) (a model served without a chat template, an account without credit: graph/settings_faults.py).
Either way every clip of a run sends the same kind of request and is refused the same way:
kind "settings", an outage, naming what to change, not the model's answer about the clip ("refused"), as it was (a
misconfigured server turned every clip ineligible and the trainer counted them as clips it could not judge).

A part the server does not take is read from the rejection's text together with the request that was sent (the body
the openai SDK attaches to the error): a 4xx whose text says the part is not supported, for a request that carried it.
- "structured": `response_format` (json_schema or json_object) the server or model does not serve: OpenAI's
  "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model", DeepSeek's "This
  response_format type is unavailable now" (earlier "response_format.type `json_schema` is unavailable now": it serves
  json_object only; not "temporarily unavailable" nor "service unavailable", which a retry may pass) and, for
  json_object, "deepseek-reasoner does not support Json Output." (a thinking model: graph.deepseek_words), a
  guided-decoding backend that cannot compile the schema ("features not supported by xgrammar": the stage schemas are
  fixed, so every clip's request fails alike), a request model without it (pydantic's "Input should be 'text' or 'json_object'" at
  `response_format.type`), LM Studio's "'response_format.type' must be 'json_schema' or 'text'" (no json_object), older
  llama.cpp's "response_format type must be one of ...".
  Also function_calling's forced tool call that a model serving tool calls does not take: DeepSeek's "Thinking mode
  does not support this tool_choice" (its V4 models think by default, and then take only "auto" or "none"), and
  DashScope's "The tool_choice parameter does not support being set to required or object in thinking mode"
  (graph.provider_words: its fix names a response_format or a model that does not think), and DashScope's "Json mode
  response is not supported when enable_thinking is true" for a response_format (its fix: a model that does not
  think).
  Fix: another structured method; for a schema the backend cannot compile, json_mode (vLLM compiles function_calling's
  forced tool call with the same backend: its xgrammar rejection of one is "structured" too; of a tool round's
  tools, "tools").
- "tools": tool calls the server does not serve: vLLM's "\"auto\" tool choice requires --enable-auto-tool-choice
  and --tool-call-parser to be set", llama.cpp's "tools param requires --jinja flag", Ollama's "... does not support
  tools", OpenAI's "'tools' is not supported with this model", DeepInfra's "Tool calling is not supported for model",
  DashScope's "The tool call is not supported", a gateway's "Unsupported tool_call_parser" (a 500). Fix: serve tool
  calling, or, in a tool round (`tool_choice` not forced), inspect without tool calls; for function_calling
  structured output (a forced `tool_choice`), another structured method.
- "images": images sent to a model or server that takes none: OpenAI's "image_url is only supported by certain
  models", vLLM's "At most 0 image(s) may be provided" (or `{"image": 0}` in its --limit-mm-per-prompt message) and
  "... is not a multimodal model", llama.cpp's "image input is not supported", DeepSeek's "unknown variant
  `image_url`, expected `text`", Ollama's "this model is missing data required for image input" (a 500), TGI's
  "image modality is not supported". Fix: a vision-language model.
- "temperature": a model that samples only at its default temperature: OpenAI's reasoning models' "Unsupported
  value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.", or that takes
  none at all: "Unsupported parameter: 'temperature' ..." (`_TEMPERATURE`); Moonshot's "invalid temperature: only 1
  is allowed for this model" (graph.provider_words, whose value the fix names). Fix: its temperature setting, or (a
  client without one: the judge's; a model without the parameter, which every client sends) another model.
- "guided": a server whose guided decoding is off, for a request with `response_format` or tools (TGI's "grammar is
  not supported" with --disable-grammar-support, SGLang's "... --grammar-backend none": `_NO_GUIDED`). Fix: its
  grammar backend (every structured method asks for guided decoding).
Also a 500 that says so (llama.cpp's server answers these with 500s, as a gateway may): not retried
(`graph.transport.transient_error`), the same request gets the same answer. Decided where the issue was silent:
only a rejection of what the request carried counts (a 400 naming tools for a request without tools, a content
policy that mentions a tool or an image, a malformed tool message, stay "refused"). The request is the one the
openai SDK attaches to its error; another chat model's `ModelError` has none (nor has an SDK error whose body cannot
be read: streamed, not JSON), so the caller passes what it sent (`sent_request`: the backbone's messages, whose image
parts say whether images went, with the call's tools or `response_format`, `structured_parts`). Without it such a
rejection was "refused" (a 400) or retried and then "transport" (a 500, a retryable `ModelAPIError`), for every clip;
with the messages alone, tools and structured output still were. vLLM's limit of no image needs no request: its
words say images were sent (it was an image limit, "settings", before this matcher).
The words matched are the servers' own, quoted above; a reworded message falls back to "refused", as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import openai
from langchain_core.exceptions import ModelAPIError

from graph.deepseek_words import (
    DEEPSEEK_NO_JSON,
    DEEPSEEK_NO_SCHEMA,
    NO_FORCED_CALL,
    NO_JSON_OUTPUT,
    deepseek_json_fix,
    deepseek_type_fix,
)
from graph.provider_words import (
    DASHSCOPE_NO_FORCED_CALL,
    DASHSCOPE_NO_JSON_MODE,
    dashscope_json_mode_fix,
    dashscope_thinking_fix,
    only_temperature,
    only_temperature_fix,
)
from graph.server_limits import NO_IMAGES, rejected_request, server_limit
from graph.server_words import server_words

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.messages import BaseMessage

    from graph.transport import EndpointNames

Part = Literal["structured", "tools", "images", "guided", "temperature"]

SERVE_TOOLS = ("serve the model with tool calling (vLLM: --enable-auto-tool-choice --tool-call-parser NAME, the "
               "parser of the model's format; llama.cpp: --jinja; Ollama: a model with tool support)")
"""How to make a server take tool calls (named by a tool round's rejection, and by a tool call left in the text)."""
PLAN_SETTING = "RAA_INSPECT_MODE=plan, AgentConfig(inspect_mode='plan')"
"""The agent's setting that inspects without tool calls."""
INSPECT_PLAN = f"inspect with one structured plan ({PLAN_SETTING})"
"""The remedy of a server without tool calls that the agent's own setting gives."""
_NOT_TAKEN = "not supported|unsupported"
"""The servers' words for a part they do not take, shared by `_TOOLS`, `_STRUCTURED`, `_IMAGES` (pinned by
tests/test_setup_rejection_words.py)."""
_DOES_NOT = "(?:does not|doesn't)"
_TOOLS = re.compile(r"enable-auto-tool-choice|tool-call-parser|unsupported tool_call_parser|requires --jinja|"
                    rf"{_DOES_NOT} support (?:tools|tool call|function call)|\b(?:tools|tool_choice|functions|"
                    rf"(?:tool|function)[ _](?:calls?|calling|use))'? (?:is |are )?(?:{_NOT_TAKEN})")
_STRUCTURED = re.compile(r"(?:response_format|json_schema|json schema|json_object|guided_\w+|structured output)"
                         rf"[^\n]{{0,80}}?(?:{_NOT_TAKEN}|not valid|invalid value|only supported|"
                         r"(?<!temporarily )(?<!service )unavailable|"
                         rf"input should be|must be)|unsupported parameter: '?response_format|{_DOES_NOT} "
                         r"support (?:response_format|json_schema|json schema|structured output|json mode|guided)")
_IMAGES = re.compile(NO_IMAGES.pattern + r"|not a (?:multi-?modal|vision)|unknown variant .image_url.|"
                     r"missing data required for image input|"
                     r"(?:image|vision|multi-?modal)(?:_url)?(?: input| inputs| content| modality)?s? (?:is |are )?"
                     rf"(?:{_NOT_TAKEN}|only supported)|(?:does not|doesn't|cannot) "
                     r"(?:support|accept|take) (?:image|vision|multi-?modal)(?![\w/-]*(?: inputs?| content)? "
                     r"(?:larger|bigger|over|above|exceeding|more|of|with|encoded|encoding|format|size|from)\b)")
"""A model or server that takes no images, in the servers' words (module docstring; TGI's "image modality is not
supported": ValidationError::UnsupportedModality, huggingface/text-generation-inference router/src/validation.rs,
raised by its TensorRT-LLM backend for an image chunk); not one that refuses these
images ("does not support images larger than 5 MB", "image inputs with this encoding"): the clip's own images may be
what it refused, so not every clip's setting."""
_NO_GUIDED = re.compile(r"grammar is not supported|--grammar-backend none")
"""A server whose guided decoding is off, which constrains neither a `response_format` nor tool calls, in its words:
TGI's router started with --disable-grammar-support ("grammar is not supported", ValidationError::Grammar in
huggingface/text-generation-inference router/src/validation.rs; its infer/tool_grammar.rs turns the tools of any
tool_choice into a grammar), SGLang's scheduler started with --grammar-backend none ("Grammar-based generation
(json_schema, regex, ebnf, structural_tag) is not supported when the server is launched with --grammar-backend none",
sgl-project/sglang python/sglang/srt/constrained/grammar_manager.py; json_object and a forced tool call are json
schemas there too). No structured method helps: each asks for guided decoding."""
_SCHEMA_COMPILER = re.compile(r"not supported by xgrammar")
"""vLLM's xgrammar backend refusing the stage schema ("The provided JSON schema contains features not supported by
xgrammar.", vllm-project/vllm vllm/v1/structured_output/backend_xgrammar.py, and its tool parsers' structural tags
for a tool's parameters): a json_schema `response_format` and a forced tool call's arguments (function_calling) are
compiled alike, so only json_mode, which sends no schema, avoids it; a tool round's tools (not forced) are no
structured method's: "tools", whose way out is inspecting without them (`INSPECT_PLAN`), with json_mode where the
method compiles the plan's schema too (it named the plan alone: a second run, a second fault, to learn json_mode)."""
_NO_TEMPERATURE = "unsupported parameter: 'temperature'"
"""OpenAI's words (code `unsupported_parameter`) for a model that takes no temperature at all (`_TEMPERATURE`)."""
_TEMPERATURE = re.compile(r"unsupported value: 'temperature' does not support|" + re.escape(_NO_TEMPERATURE))
"""OpenAI's words for a temperature the model does not take (its reasoning models sample only at 1): "Unsupported
value: 'temperature' does not support 0 with this model. Only the default (1) value is supported." (code
`unsupported_value`) and "Unsupported parameter: 'temperature' is not supported with this model." (as its API's
users quote them, e.g. in their tests; not read in an OpenAI source). langchain-openai leaves the temperature out
for gpt-5 models only, so o3 or o4-mini at the agent's temperature 0 was "refused" for every clip. The second
(`_NO_TEMPERATURE`: o1, o3-mini, gpt-5.2) refuses any value, 1 too: the client always sends its temperature, so
only another model is a way out (it named RAA_TEMPERATURE=1, and the run after faulted alike)."""
_METHODS = {"json_schema": "json_schema", "json_object": "json_mode"}
"""The structured method (`graph.settings.StructuredMethod`) that sends each `response_format` type."""


Sent = Mapping[str, Any]
"""A chat-completions request body as sent (or what is known of it: `sent_request`)."""


def sent_request(messages: Sequence[BaseMessage], parts: Sent | None = None) -> Sent:
    """What is known of the request that sent `messages` with the other `parts` of the call (`structured_parts`, a
    tool round's tools), read when its error has no readable body attached (module docstring): their content, as a
    chat-completions body's messages, and those parts."""
    return {**(parts or {}), "messages": [{"content": m.content} for m in messages]}


def structured_parts(method: str, name: str) -> Sent:
    """What a structured call of `method` for the schema `name` sends besides its messages, as a chat-completions
    body carries it: json_schema's and json_mode's `response_format`, function_calling's one tool with its call
    forced (`tool_choice` naming it; langchain's `with_structured_output` forces it for any chat model)."""
    if method == "function_calling":
        tool = {"type": "function", "function": {"name": name}}
        return {"tools": [tool], "tool_choice": tool}
    return {"response_format": {"type": "json_object" if method == "json_mode" else "json_schema"}}


def unsupported_part(exc: BaseException, sent: Sent | None = None) -> Part | None:
    """Which part of the request the server or model does not take, when `exc` is a 4xx (or 500) rejection that says
    so of a part the request carried (module docstring), else None. `sent`: the request, where `exc` has none."""
    found = _rejected_part(exc, sent)
    return found[0] if found is not None else None


def unsupported_fix(exc: BaseException, names: EndpointNames, sent: Sent | None = None,
                    method: str | None = None) -> str | None:
    """What to change when the server rejected a part of the request it does not take (`unsupported_part`), naming
    the settings `names`; None for any other error. `method`: the client's structured method, which the plan a
    tool round's compiler rejection names would use (`_SCHEMA_COMPILER`)."""
    found = _rejected_part(exc, sent)
    if found is None:
        return None
    part, sent = found
    if part == "guided":
        return ("the server runs without guided decoding, which structured output and tool calls need: start it with "
                "a grammar backend (TGI: without --disable-grammar-support; SGLang: a --grammar-backend other than "
                "none)")
    if part == "temperature":
        if names.temperature and rejected_request(exc) and \
                (value := only_temperature(server_words(exc).lower())) is not None:
            return only_temperature_fix(value, names)  # Moonshot's words name the one value it takes
        if names.temperature and _NO_TEMPERATURE not in server_words(exc).lower():  # a value the model does not take
            return (f"the model takes no temperature but its default: set {names.temperature}=1 (OpenAI's reasoning "
                    "models sample only at 1: the runs are then not greedy)")
        return (f"the model takes no temperature but its default, and this client sends one (at 0 unless set): set "
                f"{names.model} to a model that takes temperature 0")
    if part == "images":
        return (f"the server or model takes no images: set {names.model} to a vision-language model and serve it with "
                "image input (vLLM: a multimodal model, --limit-mm-per-prompt above 0; llama.cpp: --mmproj)")
    if part == "tools" and _forced(sent):  # a forced call: function_calling output
        return (f"the server does not serve tool calls for this model: set {names.method}=json_schema or json_mode "
                f"(structured output without a tool call), or {SERVE_TOOLS}")
    if part == "tools" and _SCHEMA_COMPILER.search(server_words(exc).lower()):
        # the plan is a structured call: json_schema and function_calling send its schema to the same compiler
        plain = f", with {names.method}=json_mode (which sends no schema)" if method not in (None, "json_mode") else ""
        return ("the server's guided decoding cannot compile the tools' parameter schema of a tool round" +
                (f": {names.no_tools}{plain}" if names.no_tools else ""))
    if part == "tools":
        return f"the server does not serve tool calls for this model: {SERVE_TOOLS}" + \
            (f", or {names.no_tools}" if names.no_tools else "")
    forced = _forced(sent)  # function_calling's call: its arguments constrained alike
    rtype = "" if forced else str(sent["response_format"].get("type"))
    kind = "a forced tool call" if forced else f"response_format {rtype}"
    method = "function_calling" if forced else _METHODS.get(rtype)
    text = server_words(exc).lower()
    if method != "json_mode" and _SCHEMA_COMPILER.search(text):
        return (f"the server's guided decoding cannot compile the stage schema, sent as {kind}: set "
                f"{names.method}=json_mode (which sends no schema)")
    if forced and rejected_request(exc) and DASHSCOPE_NO_FORCED_CALL.search(text):
        return dashscope_thinking_fix(names)
    if not forced and rejected_request(exc) and DASHSCOPE_NO_JSON_MODE.search(text):
        return dashscope_json_mode_fix(names)
    if method == "json_mode" and DEEPSEEK_NO_JSON.search(text):
        return deepseek_json_fix(names)
    if method == "json_mode" and DEEPSEEK_NO_SCHEMA.search(text):
        return deepseek_type_fix(names)
    return (f"the server does not serve structured output as {kind} for this model: set "
            f"{names.method}={_working_methods(exc, method)}")


def _working_methods(exc: BaseException, method: str | None) -> str:
    """The structured methods a rejection of `method` names (`other_methods`), but on DeepSeek's API, which serves
    json_object only (`DEEPSEEK_NO_SCHEMA`) and whose V4 models, thinking by default, take no forced tool call
    (`NO_FORCED_CALL`): only json_mode serves a thinking model, so its thinking refusal names json_mode alone, and its
    json_schema refusal says what function_calling needs (it named both, and the second fault followed)."""
    text = server_words(exc).lower()
    if NO_FORCED_CALL.search(text):
        return ("json_mode (DeepSeek's API, whose words these are, serves no json_schema either: json_object only; "
                "its thinking, the V4 models' default, takes no forced tool call)")
    if DEEPSEEK_NO_SCHEMA.search(text) and method == "json_schema":
        return ("json_mode or function_calling (function_calling only for a model that does not think: DeepSeek's "
                "thinking models, the V4 default, take no forced tool call)")
    return other_methods(method)


def other_methods(method: str | None) -> str:
    """The two structured methods to try instead of `method` ("json_mode or function_calling" for json_schema)."""
    return " or ".join([m for m in ("json_mode", "function_calling", "json_schema") if m != method][:2])


def setup_rejection(exc: BaseException, names: EndpointNames, sent: Sent | None = None,
                    method: str | None = None) -> str | None:
    """What to change when the server rejected a request for its setup: a part it does not take (`unsupported_fix`,
    `method` as there) or a limit the request exceeds (`server_limit`); None for any other error."""
    return unsupported_fix(exc, names, sent, method) or server_limit(exc, names)


def _rejected_part(exc: BaseException, given: Sent | None) -> tuple[Part, Sent] | None:
    """(the part, the request body sent) when `exc` is a 4xx or 500 saying a part the request carried is not taken:
    an openai SDK error, whose request is read (the request `given` where its body cannot be), or another chat
    model's rejection (`rejected_request`) or 5xx (`ModelAPIError`) read against the request `given` (module
    docstring), if any."""
    sent: Sent
    if isinstance(exc, openai.APIStatusError):
        if not (400 <= exc.status_code < 500 or exc.status_code == 500):
            return None
        sent = _sent_body(exc) or given or {}
    elif rejected_request(exc) or isinstance(exc, ModelAPIError):
        sent = given or {}
    else:
        return None
    text = server_words(exc).lower()
    provider = rejected_request(exc)  # Moonshot's and DashScope's words come in a 400 (graph.provider_words)
    structured = isinstance(sent.get("response_format"), dict)
    if (structured or sent.get("tools")) and _NO_GUIDED.search(text):
        return "guided", sent
    if sent.get("tools") and (_TOOLS.search(text) or
                              (not _forced(sent) and _SCHEMA_COMPILER.search(text))):
        return "tools", sent  # a tool round's tools whose parameters the compiler rejects: no method sends them
    if (structured and (_STRUCTURED.search(text) or NO_JSON_OUTPUT.search(text) or
                        (provider and DASHSCOPE_NO_JSON_MODE.search(text)))) or \
            (_forced(sent) and (_SCHEMA_COMPILER.search(text) or NO_FORCED_CALL.search(text) or
                                (provider and DASHSCOPE_NO_FORCED_CALL.search(text)))):
        return "structured", sent
    if sent.get("temperature") is not None and \
            (_TEMPERATURE.search(text) or (provider and only_temperature(text) is not None)):
        return "temperature", sent
    if NO_IMAGES.search(text) or (_carries_images(sent) and _IMAGES.search(text)):
        return "images", sent
    return None


def _forced(sent: Sent) -> bool:
    """Whether the request forces a call of one tool (`tool_choice` naming it: function_calling structured output,
    `structured_parts`), not a tool round's tools the model may call."""
    return isinstance(sent.get("tool_choice"), dict)


def _sent_body(exc: openai.APIStatusError) -> dict[str, Any]:
    """The JSON body of the request `exc` answers ({} when it cannot be read: a streamed body, not JSON)."""
    try:
        body = json.loads(exc.request.content)
    except (RuntimeError, ValueError):  # httpx's RequestNotRead is a RuntimeError; undecodable or not JSON
        return {}
    return body if isinstance(body, dict) else {}


def _carries_images(sent: Sent) -> bool:
    """Whether a chat-completions body holds an image part in one of its messages."""
    messages = sent.get("messages")
    return isinstance(messages, list) and any(
        isinstance(part, dict) and part.get("type") in ("image_url", "input_image", "image")
        for message in messages if isinstance(message, dict) and isinstance(message.get("content"), list)
        for part in message["content"])
