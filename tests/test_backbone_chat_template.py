"""A model served without a chat template rejects every chat request alike: a setting to change, not the clip's answer.

Through the real ChatOpenAI path against the local stub server.
"""

from __future__ import annotations

import pytest

from graph.backbone import BackboneFault, Usage
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import good, make, run

VLLM_NO_TEMPLATE = ("As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
                    "template if the tokenizer does not define one.")
HF_NO_TEMPLATE = ("Cannot use chat template functions because tokenizer.chat_template is not set and no template "
                  "argument was passed! For information about writing templates and setting the "
                  "tokenizer.chat_template attribute, please see the documentation at "
                  "https://huggingface.co/docs/transformers/main/en/chat_templating")


@pytest.mark.parametrize("text", [VLLM_NO_TEMPLATE, HF_NO_TEMPLATE], ids=["vllm", "transformers"])
def test_a_model_served_without_a_chat_template_names_the_model_and_the_template(text: str) -> None:
    """A base model, or a tokenizer without a chat template, served by vLLM (a 400 in these words, as its users
    report them) or a server relaying transformers' own error: every chat request is rejected alike, and it was
    "refused", the model's answer about each clip."""
    with OpenAIStub([StubReply(status=400, content=text), good("json_schema")]) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault
    assert "RAA_MODEL" in fault.message and "--chat-template" in fault.message, fault.message
