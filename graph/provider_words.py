"""Other providers' own words for a request part their model does not take, and what to change for each
(graph.setup_rejections reads them; DESIGN.md §3 "Faults"), read as the whole of a message as DeepSeek's are
(graph.deepseek_words: `WHOLE_OPEN`, `WHOLE_CLOSE`), so a 500 quoting them inside other words (the model's own output)
stays "refused":
- Moonshot's (Kimi's) temperature its model does not take, naming the one it does (`ONLY_TEMPERATURE`);
- DashScope's (Qwen's) forced tool call refused in thinking mode (`DASHSCOPE_NO_FORCED_CALL`), and its
  `response_format` refused there (`DASHSCOPE_NO_JSON_MODE`).
Each was "refused" for every clip of a run. Read in a 4xx only (graph.setup_rejections, `rejected_request`): both
answer with a 400, and a 500 (which the module reads for llama.cpp's words) whose last words are theirs is a server
echoing the model's output ("Failed to parse input at pos 0: ... - invalid temperature: only 1 is allowed for this
model"), which the anchors read as a whole message after its " - " (or a JSON "message" field of the output).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from graph.deepseek_words import WHOLE_CLOSE, WHOLE_OPEN

if TYPE_CHECKING:  # pragma: no cover
    from graph.transport import EndpointNames

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?"
"""A number as a server may write a float (Go's, Python's, JSON's spellings: "1", "0.6", ".6", "1.0", "1e0", "6e-1"),
in lowered words: no sign (a temperature is not negative)."""
ONLY_TEMPERATURE = re.compile(WHOLE_OPEN + rf"invalid temperature: only ({_NUMBER}) is allowed for this model" +
                              WHOLE_CLOSE)
"""Moonshot's 400 for a temperature its model does not sample at, naming the one it does: "invalid temperature: only 1
is allowed for this model" (as Kimi's users quote it: tinyhumansai/openhuman#2082, countbot-ai/CountBot#61; its body
`{"message": ..., "type": "invalid_request_error"}` under "error": XCNXNXNX/dsh-portable-tavern#1), "only 0.6 is
allowed" for another model (arcsin1/oh-my-ppt#45). The value is the group: the fix names it (not always 1), as the
number it is (`temperature_value`), not as written."""
DASHSCOPE_NO_FORCED_CALL = re.compile(WHOLE_OPEN + r"(?:<\d{3}> )?(?:internalerror\.algo\.invalidparameter: )?the "
                                      r"tool_choice parameter does not support being set to required or object in "
                                      r"thinking mode" + WHOLE_CLOSE)
"""DashScope's 400 for a forced tool call (`tool_choice` "required" or naming a function: function_calling's) to a
model in thinking mode: "<400> InternalError.Algo.InvalidParameter: The tool_choice parameter does not support being
set to required or object in thinking mode" (code `invalid_parameter_error`; cloudwego/eino#994, QwenLM/qwen-code#7659,
can1357/oh-my-pi#886). Not DeepSeek's refusal of the same (graph.deepseek_words.NO_FORCED_CALL), whose fix says its
API serves json_object only: DashScope serves a `response_format`."""

DASHSCOPE_NO_JSON_MODE = re.compile(WHOLE_OPEN + r"(?:<\d{3}> )?(?:internalerror\.algo\.invalidparameter: )?json mode "
                                    r"response is not supported when enable_thinking is true" + WHOLE_CLOSE)
"""DashScope's 400 for a `response_format` (json_object; json_schema, which it serves as json_object) to a model in
thinking mode: "Json mode response is not supported when enable_thinking is true" (Alibaba Cloud Model Studio's
error-code page: structured output with thinking on, fixed by enable_thinking false; presenton/presenton#184, for
qwen3-235b-a22b-thinking-2507), under the prefix of its other InvalidParameter words ("<400> ***.***.InvalidParameter:
Json mode ...", code `invalid_parameter_error`, as a relay quotes it with the prefix masked: errs.dmxapi.cn). Read as
the whole of a message, in a 4xx only, as `DASHSCOPE_NO_FORCED_CALL`: the json-mode rule (graph.setup_rejections
`_STRUCTURED`: "does not support json mode") did not read it, and it was "refused" for every clip."""


def only_temperature(text: str) -> str | None:
    """The one temperature Moonshot's words say the model takes (`ONLY_TEMPERATURE`), in the lowered server words
    `text`; None where they are not its words."""
    found = ONLY_TEMPERATURE.search(text)
    return found.group(1) if found is not None else None


def temperature_value(written: str) -> str | None:
    """The number `written` (`_NUMBER`) as the client's temperature setting takes it: the float it reads, written the
    shortest way ("00" "0", ".6" "0.6", "1e0" "1"); None for one no setting holds as written: a number a float
    cannot hold (infinite), or one a float reads as 0 though it is not ("0.000...1"). Echoed as written, "00" was the
    setting named, and a number of 10,000 digits went whole into every fault's message, row and trace."""
    value = float(written)
    if not math.isfinite(value) or (value == 0 and re.search(r"[1-9]", written.lower().split("e")[0])):
        return None
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def only_temperature_fix(written: str, names: EndpointNames) -> str:
    """What to change when the model takes the temperature `written` only (`only_temperature`), for a client with a
    temperature setting (graph.setup_rejections names another model for one without): that value as a number
    (`temperature_value`), or, for one no setting holds, another model, quoting the number's first digits only."""
    value = temperature_value(written)
    if value is None:
        shown = written if len(written) <= _SHOWN else f"{written[:_SHOWN]}... ({len(written)} characters)"
        return (f"the model takes no temperature but {shown}, which Moonshot's words name and {names.temperature} "
                f"cannot be set to: set {names.model} to a model that takes temperature 0")
    greedy = "" if float(value) == 0 else ": the runs are then not greedy"
    return (f"the model takes no temperature but {value}: set {names.temperature}={value} (Moonshot's words name the "
            f"one temperature this model samples at{greedy})")


_SHOWN = 24
"""The most characters of a number no setting holds that its fix quotes (`only_temperature_fix`): a float's
shortest spelling is no longer ("1.2345678901234568e+300"), but such a number may be thousands of digits."""


def dashscope_thinking_fix(names: EndpointNames) -> str:
    """What to change when DashScope refuses function_calling's forced tool call in thinking mode
    (`DASHSCOPE_NO_FORCED_CALL`): a method that sends no tool call, or a model that does not think."""
    return ("the model is in thinking mode, where DashScope (whose words these are) takes no forced tool call "
            f"(function_calling's): set {names.method}=json_schema or json_mode (a response_format, no tool call), "
            f"or set {names.model} to a model that does not think (DashScope turns thinking off with the request's "
            "enable_thinking false, which this client does not send: a model whose default is off)")


def dashscope_json_mode_fix(names: EndpointNames) -> str:
    """What to change when DashScope refuses a `response_format` in thinking mode (`DASHSCOPE_NO_JSON_MODE`): a model
    that does not think. Not another structured method: DashScope's thinking mode takes no forced tool call either
    (`DASHSCOPE_NO_FORCED_CALL`), and serves json_schema as json_object."""
    return ("the model is in thinking mode, where DashScope (whose words these are) serves no response_format (json "
            f"mode) nor a forced tool call: set {names.model} to a model that does not think (DashScope turns thinking "
            "off with the request's enable_thinking false, which this client does not send: a model whose default is "
            "off)")
