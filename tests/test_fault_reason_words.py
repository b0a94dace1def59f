"""What a backbone fault's one-line reason quotes of the server's words (`graph.server_words.quoted_words`): a
plain-text body's line breaks (a server's traceback) as spaces, and a validation error that echoes the request
(vLLM's, FastAPI's: the messages with their base64 images) cut to a bound."""

from __future__ import annotations

import json

import pytest

from graph.backbone import BackboneFault, Usage
from graph.validation import ERR_CHARS
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import make, run

TRACEBACK = ("Internal Server Error\n\nTraceback (most recent call last):\n  File \"/app/server.py\", line 12, in "
             "generate\n    out = model(**inputs)\r\nRuntimeError: CUDA error: an illegal memory access was encountered\n")


def _fault(reply: StubReply) -> BackboneFault:
    with OpenAIStub([reply] * 2) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema", max_retries=1), Usage())
    return info.value


def test_a_multi_line_plain_text_body_is_one_line_in_the_reason() -> None:
    fault = _fault(StubReply(status=500, body=TRACEBACK, content_type="text/plain"))
    assert fault.kind == "transport", fault
    assert "\n" not in fault.message and "\r" not in fault.message, fault.message
    assert "Traceback (most recent call last): File" in fault.message, fault.message


def test_a_validation_error_echoing_the_request_is_cut_to_a_bound() -> None:
    echo = "data:image/jpeg;base64," + "A" * 200_000
    message = ("1 validation error for ChatCompletionRequest\nmessages.0.content\n  Input should be a valid string "
               f"[type=string_type, input_value=[{{'type': 'image_url', 'image_url': {{'url': '{echo}'}}}}]]")
    body = {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
    fault = _fault(StubReply(status=400, body=json.dumps(body)))
    assert fault.kind == "refused", fault
    assert len(fault.message) <= ERR_CHARS + 200 and fault.message.rstrip().endswith("..."), len(fault.message)
    assert "Input should be a valid string" in fault.message and "\n" not in fault.message, fault.message
