"""DeepSeek's "does not support Json Output" as gateways and local servers pass it on (graph/deepseek_words.py),
through the real ChatOpenAI path against a local OpenAI-compatible server: "doesn't support", the words wrapped
across lines, a model name with Ollama's tag ("deepseek-r1:14b"), and Portkey's "<provider> error: " before the
message. Each was missed: "refused" for every clip, or the generic advice naming methods a thinking model does not
take. Still read only as the whole of a message: the same words quoted inside another stay "refused"."""

from __future__ import annotations

import pytest

from tests.test_gateway_budget_and_caps import _call

DEEPSEEK_FIX = "set RAA_MODEL to a DeepSeek model that does not think"


def _fault_of(words: str):
    fault, sent = _call(400, {"error": {"message": words, "type": "invalid_request_error"}}, replies=1,
                        method="json_mode")
    assert fault is not None and sent == 1, (fault, sent)
    return fault


@pytest.mark.parametrize("words", [
    "deepseek-reasoner doesn't support Json Output.",
    "deepseek-reasoner does not support\nJson Output.",
    "deepseek-r1:14b does not support Json Output.",
    "deepseek error: deepseek-reasoner does not support Json Output.",
    "deepseek error: deepseek-ai/DeepSeek-R1:671b doesn't  support json\noutput."],
    ids=["doesnt", "wrapped", "ollama_tag", "portkey_prefix", "all"])
def test_deepseek_s_refusal_in_other_wording_is_its_refusal(words: str) -> None:
    fault = _fault_of(words)
    assert fault.kind == "settings" and DEEPSEEK_FIX in fault.message, fault.message


def test_another_model_s_doesnt_support_json_output_is_a_structured_fault() -> None:
    fault = _fault_of("qwen3:32b doesn't support Json Output.")
    assert fault.kind == "settings" and "RAA_STRUCTURED_METHOD=function_calling or json_schema" in fault.message
    assert "DeepSeek model" not in fault.message, fault.message


@pytest.mark.parametrize("words", [
    "Invalid 'messages[1].content': the caption 'deepseek-reasoner doesn't support json output' was flagged",
    "Content policy: the text quotes deepseek-r1:14b does not support\njson output. and was refused",
    "Content policy: the text reads 'deepseek error: deepseek-reasoner does not support json output.' here",
    "the screen says: deepseek error: deepseek-r1 does not support json output.",
    "deepseek error: the caption deepseek-r1 does not support json output."],
    ids=["doesnt_quoted", "wrapped_inside", "portkey_quoted", "prefix_inside_a_sentence", "words_before_the_name"])
def test_the_new_wordings_quoted_inside_another_message_stay_refused(words: str) -> None:
    fault = _fault_of(words)
    assert fault.kind == "refused" and "RAA_STRUCTURED_METHOD" not in fault.message, fault.message



@pytest.mark.parametrize("words", [
    "Failed to parse input at pos 0: The screen lists:\n- deepseek-r1 does not support json output.",
    "Failed to parse input at pos 0: The screen lists:\n- deepseek-r1 doesn't support json output.\n- retry later",
    "Failed to parse input at pos 0: The screen lists:\n- qwen3:32b does not support\njson output.\n- retry later",
    "Failed to parse input at pos 0: Notes:\n  - retry later\n  - deepseek-reasoner does not support json output."],
    ids=["last_item", "middle_item", "any_model_wrapped", "indented_items"])
def test_the_words_as_an_item_of_a_list_the_model_wrote_are_no_refusal(words: str) -> None:
    """A server's 500 quoting the model's own output (llama.cpp's "Failed to parse input at pos N: <output>"), whose
    list holds the words as an item: its "\\n- " was read as the " - " that opens a whole message ("Error code: 400 -
    "), and the next item's as the one that closes it, so the output was taken for the server's refusal of
    json_object: "settings" at once, never retried. A 500 of no such words is retried, and here answered."""
    fault, sent = _call(500, {"error": {"message": words, "type": "server_error"}}, replies=1, method="json_mode")
    assert fault is None and sent == 2, (fault, sent)
