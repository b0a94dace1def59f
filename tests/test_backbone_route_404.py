"""A model call answered 404 names the two settings that cause it.

With `RAA_BASE_URL` missing its `/v1` (vLLM's root: FastAPI answers `{"detail": "Not Found"}`) every run
was ineligible with "refused: OpenAIModelNotFoundError: Error code: 404" and nothing more: no setting, no
fix (`raa score` makes no pre-run endpoint check). The fault now says to check that RAA_BASE_URL ends in
/v1 and that RAA_MODEL is served, and points at `raa doctor`; other refusals are unchanged. It is kind
"settings" (an outage of the machinery, tests/test_backbone_settings_status.py), no longer "refused".
"""

from __future__ import annotations

import json

import pytest

from graph.backbone import BackboneFault, Usage
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import make, run

ROOT_404 = StubReply(status=404, body=json.dumps({"detail": "Not Found"}))


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_a_404_names_the_base_url_and_model_settings(method: str) -> None:
    with OpenAIStub([ROOT_404] * 4) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, method), Usage())
    fault = info.value
    assert fault.kind == "settings" and "404" in fault.message
    assert "RAA_BASE_URL" in fault.message and "/v1" in fault.message and "RAA_MODEL" in fault.message
    assert "raa doctor" in fault.message


def test_other_refusals_get_no_such_hint() -> None:
    with OpenAIStub([StubReply(status=400, content="bad request")] * 4) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema"), Usage())
    assert info.value.kind == "refused" and "RAA_BASE_URL" not in info.value.message
