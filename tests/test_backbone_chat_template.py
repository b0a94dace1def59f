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


TGI_NO_TEMPLATE = '{"error":"Template error: template not found","error_type":"template_error"}'
"""TGI's 422 for a model whose tokenizer_config has no chat template (minijinja's TemplateNotFound, as its users
quote it: huggingface/text-generation-inference#1427)."""


@pytest.mark.parametrize("reply", [StubReply(status=400, content=VLLM_NO_TEMPLATE),
                                   StubReply(status=400, content=HF_NO_TEMPLATE),
                                   StubReply(status=422, body=TGI_NO_TEMPLATE)], ids=["vllm", "transformers", "tgi"])
def test_a_model_served_without_a_chat_template_names_the_model_and_the_template(reply: StubReply) -> None:
    """A base model, or a tokenizer without a chat template, served by vLLM (a 400 in these words, as its users
    report them) or a server relaying transformers' own error: every chat request is rejected alike, and it was
    "refused", the model's answer about each clip."""
    with OpenAIStub([reply, good("json_schema")]) as stub:
        with pytest.raises(BackboneFault) as info:
            run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "settings" and len(stub.requests) == 1, fault
    assert "RAA_MODEL" in fault.message and "--chat-template" in fault.message, fault.message
