"""Other providers' own words for a request part their model does not take, and what to change for each
(graph.setup_rejections reads them; DESIGN.md §3 "Faults"), read as the whole of a message as DeepSeek's are
(graph.deepseek_words: `WHOLE_OPEN`, `WHOLE_CLOSE`), so a 500 quoting them inside other words (the model's own output)
stays "refused":
- Moonshot's (Kimi's) temperature its model does not take, naming the one it does (`ONLY_TEMPERATURE`);
- DashScope's (Qwen's) forced tool call refused in thinking mode (`DASHSCOPE_NO_FORCED_CALL`).
Each was "refused" for every clip of a run. Read in a 4xx only (graph.setup_rejections, `rejected_request`): both
answer with a 400, and a 500 (which the module reads for llama.cpp's words) whose last words are theirs is a server
echoing the model's output ("Failed to parse input at pos 0: ... - invalid temperature: only 1 is allowed for this
model"), which the anchors read as a whole message after its " - " (or a JSON "message" field of the output).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from graph.deepseek_words import WHOLE_CLOSE, WHOLE_OPEN

if TYPE_CHECKING:  # pragma: no cover
    from graph.transport import EndpointNames

ONLY_TEMPERATURE = re.compile(WHOLE_OPEN + r"invalid temperature: only (\d+(?:\.\d+)?) is allowed for this model" +
                              WHOLE_CLOSE)
"""Moonshot's 400 for a temperature its model does not sample at, naming the one it does: "invalid temperature: only 1
is allowed for this model" (as Kimi's users quote it: tinyhumansai/openhuman#2082, countbot-ai/CountBot#61; its body
`{"message": ..., "type": "invalid_request_error"}` under "error": XCNXNXNX/dsh-portable-tavern#1), "only 0.6 is
allowed" for another model (arcsin1/oh-my-ppt#45). The value is the group: the fix names it (not always 1)."""
DASHSCOPE_NO_FORCED_CALL = re.compile(WHOLE_OPEN + r"(?:<\d{3}> )?(?:internalerror\.algo\.invalidparameter: )?the "
                                      r"tool_choice parameter does not support being set to required or object in "
                                      r"thinking mode" + WHOLE_CLOSE)
"""DashScope's 400 for a forced tool call (`tool_choice` "required" or naming a function: function_calling's) to a
model in thinking mode: "<400> InternalError.Algo.InvalidParameter: The tool_choice parameter does not support being
set to required or object in thinking mode" (code `invalid_parameter_error`; cloudwego/eino#994, QwenLM/qwen-code#7659,
can1357/oh-my-pi#886). Not DeepSeek's refusal of the same (graph.deepseek_words.NO_FORCED_CALL), whose fix says its
API serves json_object only: DashScope serves a `response_format`."""


def only_temperature(text: str) -> str | None:
    """The one temperature Moonshot's words say the model takes (`ONLY_TEMPERATURE`), in the lowered server words
    `text`; None where they are not its words."""
    found = ONLY_TEMPERATURE.search(text)
    return found.group(1) if found is not None else None


def only_temperature_fix(value: str, names: EndpointNames) -> str:
    """What to change when the model takes the temperature `value` only (`only_temperature`), for a client with a
    temperature setting (graph.setup_rejections names another model for one without)."""
    greedy = "" if float(value) == 0 else ": the runs are then not greedy"
    return (f"the model takes no temperature but {value}: set {names.temperature}={value} (Moonshot's words name the "
            f"one temperature this model samples at{greedy})")


def dashscope_thinking_fix(names: EndpointNames) -> str:
    """What to change when DashScope refuses function_calling's forced tool call in thinking mode
    (`DASHSCOPE_NO_FORCED_CALL`): a method that sends no tool call, or a model that does not think."""
    return ("the model is in thinking mode, where DashScope (whose words these are) takes no forced tool call "
            f"(function_calling's): set {names.method}=json_schema or json_mode (a response_format, no tool call), "
            f"or set {names.model} to a model that does not think (DashScope turns thinking off with the request's "
            "enable_thinking false, which this client does not send: a model whose default is off)")
