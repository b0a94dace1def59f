"""DeepSeek's own words for the structured methods it does not serve, and what to change for each
(graph.setup_rejections reads them; DESIGN.md §3 "Faults"): its API serves json_object only, and its thinking models
(the V4 default) take no forced tool call. Moved out of graph/setup_rejections.py, which imports these names.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from graph.transport import EndpointNames

NO_FORCED_CALL = re.compile(r"thinking mode does not support this tool_choice")
"""A model that takes tool calls but not a forced one, in its words: DeepSeek's 400 for a `tool_choice` naming a
function (or "required") while thinking, its V4 models' default (as its users quote it: deepseek-ai/DeepSeek-V3#1376,
tickernelz/opencode-mem#253). Read for a forced call only (function_calling's, graph.setup_rejections): a tool round's
"auto" is taken. It was "refused" for every clip; json_mode and json_schema send no tool call."""
DEEPSEEK_NO_SCHEMA = re.compile(r"this response_format type is unavailable now|response_format\.type `json_schema` is "
                                r"unavailable now")
"""DeepSeek's words for a json_schema `response_format`, which its API does not serve (json_object only; module
docstring), for its V4 models too (as their users quote it: presenton/presenton#676)."""
WHOLE_OPEN = r"""(?:^|(?<=\S) - |['"]message['"]:\s*['"])(?:error from provider \([^()\n]{1,60}\): )?""" \
    r"(?:[a-z][\w.-]* error: )?"
WHOLE_CLOSE = r"""\.?(?: \((?:request id|aiproxy): [^()\s]{1,80}\))?(?=\s*$| - |['"]| received model group=)"""
"""Where the words of `NO_JSON_OUTPUT` and `DEEPSEEK_NO_JSON` open and close a whole message (`DEEPSEEK_NO_JSON`). The
" - " between a prefix and a message ("Error code: 400 - ", "DeepseekException - ") is on one line, after a word: an
item of a list ("\n- ", "\n  - ") opened them, and the next item's closed them, in a 500 quoting the model's own output
(llama.cpp's "Failed to parse input at pos N: <output>"), which was taken for the server's refusal of json_object.
A LiteLLM proxy's router closes the provider's message with ". Received Model Group=<name>" (its next line "Available
Model Group Fallbacks=..."): read as another sentence, the relayed refusal was "refused" for every clip. A relay's
"Error from provider (<name>): " before the provider's message opens it too ("Error from provider (Moonshot AI): invalid
temperature: ...", HenriGrimm/Minnow#291, anomalyco/opencode#33957; "(Alibaba): <400> InternalError...",
plastic-labs/honcho#663): it opened no whole message, and the refusal was "refused"."""
_NO_JSON_WORDS = r"\s+(?:does\s+not|doesn't)\s+support\s+json\s+output"
"""DeepSeek's words after the model's name (`NO_JSON_OUTPUT`, `DEEPSEEK_NO_JSON`), written once for both: "doesn't" too,
and across any whitespace, as a relay's plain-text body wraps them (each was "refused" for every clip)."""
NO_JSON_OUTPUT = re.compile(WHOLE_OPEN + r"[\w.:/-]+" + _NO_JSON_WORDS + WHOLE_CLOSE)
"""DeepSeek's words for json_object to a thinking model under any model's name, read as the whole of a message as
`DEEPSEEK_NO_JSON` reads them (graph.setup_rejections takes them for a rejection of json_object). `_STRUCTURED` read
"does not support json output" anywhere in the words: a message quoting them (a validation error echoing the clip's
text, a content policy) was a structured-output fault naming another method, which is no fix; it is "refused"."""
DEEPSEEK_NO_JSON = re.compile(WHOLE_OPEN + r"(?:[\w.-]+/)*deepseek[\w.-]*(?::[\w.-]+)?" + _NO_JSON_WORDS +
                              WHOLE_CLOSE)
"""DeepSeek's 400 for json_object to a thinking model, which takes no forced tool call either (`NO_FORCED_CALL`):
"deepseek-reasoner does not support Json Output." (as its users quote it: gomate-community/TrustRAG#140). Read as the
whole of a message: at the start of the words, after the SDK's or a gateway's " - " ("Error code: 400 - ",
"DeepseekException - ") or a relayed body's `message` key, and up to their end: the same phrase inside another
message (a validation error quoting the clip's text) named a DeepSeek model to switch to. A gateway's request id after
them is still their end: one-api's and new-api's " (request id: ...)", sealos aiproxy's " (aiproxy: ...)", appended to
every error message they relay (read as other words, the fix named json_schema, which DeepSeek never serves). The
model's name may carry a provider's path, as a gateway names it ("deepseek/deepseek-r1", "deepseek-ai/DeepSeek-R1",
"Pro/deepseek-ai/DeepSeek-R1"): once the words were anchored, the path before "deepseek" left them unread, and the
fix named the structured methods a thinking model does not take; or a tag, as Ollama names its models
("deepseek-r1:14b"). Portkey's "<provider> error: " before a provider's message (`WHOLE_OPEN`) opens it too."""


def deepseek_json_fix(names: EndpointNames) -> str:
    """What to change when DeepSeek says a model gives no JSON output for json_mode's json_object
    (`DEEPSEEK_NO_JSON`): no method serves that model, so a model that does not think. It named "function_calling or
    json_schema"."""
    return ("the model gives no JSON output (response_format json_object; DeepSeek's API serves no json_schema, and "
            f"its thinking models take no forced tool call): set {names.model} to a DeepSeek model that does not think "
            f"(deepseek-chat), with {names.method}=json_mode or function_calling")


def deepseek_type_fix(names: EndpointNames) -> str:
    """What to change when DeepSeek's words refuse json_mode's json_object as a type (`DEEPSEEK_NO_SCHEMA`: "This
    response_format type is unavailable now"): they name the type sent, not the model, nor whether it thinks, so no
    model is named as the cause (it read as `deepseek_json_fix`'s "the model gives no JSON output")."""
    return ("the server says the response_format type sent, json_object (json_mode), is unavailable (DeepSeek's API "
            f"serves no json_schema either): set {names.method}=function_calling (for a DeepSeek model that does not "
            f"think: its thinking models take no forced tool call), or set {names.model} to a model served with "
            "json_object")
