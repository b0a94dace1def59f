"""DashScope's refusal of a `response_format` to a model in thinking mode (graph/provider_words.py): "Json mode response
is not supported when enable_thinking is true" (Alibaba Cloud Model Studio's error-code page, whose fix is
enable_thinking false; presenton/presenton#184 for qwen3-235b-a22b-thinking-2507; a relay quotes its body as
{'message': '<400> ***.***.InvalidParameter: Json mode response is not supported when enable_thinking is true',
'code': 'invalid_parameter_error'}, errs.dmxapi.cn, its prefix masked). The json-mode rule read "does not support json
mode" only: it was "refused" for every clip. No structured method serves a thinking model there (its forced tool call
is refused too: graph.provider_words.DASHSCOPE_NO_FORCED_CALL): the fix names a model that does not think."""

from __future__ import annotations

import pytest

from graph.setup_rejections import unsupported_fix, unsupported_part
from graph.transport import BACKBONE_NAMES
from tests.test_gateway_budget_and_caps import TOOL_ROUND, _call
from tests.test_settings_answers import _status

pytestmark = pytest.mark.filterwarnings("ignore:This model does not support OpenAI's structured output:UserWarning")

WORDS = "Json mode response is not supported when enable_thinking is true"


def dashscope(message: str = f"<400> InternalError.Algo.InvalidParameter: {WORDS}") -> dict:
    """DashScope's 400 body in its compatible mode (the shape of its tool_choice refusal, cloudwego/eino#994)."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": "invalid_parameter_error"}}


@pytest.mark.parametrize("method", ["json_mode", "json_schema"])
@pytest.mark.parametrize("message", [WORDS, f"<400> InternalError.Algo.InvalidParameter: {WORDS}"],
                         ids=["bare", "prefixed"])
def test_dashscope_s_json_mode_refusal_in_thinking_mode_names_a_model_that_does_not_think(method: str,
                                                                                            message: str) -> None:
    fault, sent = _call(400, dashscope(message), replies=1, method=method)
    assert fault is not None and fault.kind == "settings" and sent == 1, (fault, sent)
    assert "thinking" in fault.message and "RAA_MODEL" in fault.message, fault.message
    assert "RAA_STRUCTURED_METHOD=function_calling" not in fault.message, fault.message


@pytest.mark.parametrize("sent", [TOOL_ROUND, {}], ids=["tool_round", "nothing"])
def test_the_words_for_a_request_without_a_response_format_are_no_rejected_part(sent: dict) -> None:
    assert unsupported_part(_status(400, dashscope()), sent) is None


@pytest.mark.parametrize(("status", "message"), [
    (500, f"Failed to parse input at pos 0: the robot says - {WORDS}"),
    (400, f"{WORDS}, unless stream is true"),
    (400, "<400> InternalError.Algo.InvalidParameter: 'messages' must contain the word 'json' in some form, to use "
          "'response_format' of type 'json_object'."),
], ids=["echoed_in_a_500", "other_words_after", "json_keyword_missing"])
def test_near_misses_are_not_the_thinking_refusal(status: int, message: str) -> None:
    exc = _status(status, dashscope(message))
    sent = {"messages": [], "response_format": {"type": "json_object"}}
    fix = unsupported_fix(exc, BACKBONE_NAMES, sent)
    assert fix is None or "thinking" not in fix, fix
