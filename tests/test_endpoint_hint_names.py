"""A model call's fix hints name the settings of the client that made it.

The judge (`RAA_JUDGE_*`) goes through the same `graph.backbone.Backbone` as the agent; its 404 said "check
that RAA_BASE_URL ends in /v1 and that the server serves RAA_MODEL", and a 200 that is no chat completion
said "check RAA_BASE_URL": settings the judge never reads. The backbone is told its setting names
(`graph.transport.EndpointNames`); the judge passes its own.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_openai import ChatOpenAI

from evals.judge import JUDGE_NAMES, JudgeSettings, RewardJudge
from graph.backbone import BackboneFault, Usage
from graph.transport import BACKBONE_NAMES, EndpointNames
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import make, run

ROOT_404 = StubReply(status=404, body=json.dumps({"detail": "Not Found"}))
HTML = StubReply(body="<!doctype html><html><body>Hi</body></html>", content_type="text/html; charset=utf-8")


def test_the_names_passed_in() -> None:
    assert (BACKBONE_NAMES.base_url, BACKBONE_NAMES.model) == ("RAA_BASE_URL", "RAA_MODEL")
    assert (JUDGE_NAMES.base_url, JUDGE_NAMES.model) == ("RAA_JUDGE_BASE_URL", "RAA_JUDGE_MODEL")


@pytest.mark.parametrize("reply", [ROOT_404, HTML], ids=["404", "web_page"])
def test_the_backbone_names_its_own_settings(reply: StubReply) -> None:
    with OpenAIStub([reply] * 4) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema"), Usage())
    assert "RAA_BASE_URL" in info.value.message and "JUDGE" not in info.value.message


@pytest.mark.parametrize("reply", [ROOT_404, HTML], ids=["404", "web_page"])
def test_a_backbone_told_other_names_says_those(reply: StubReply) -> None:
    with OpenAIStub([reply] * 4) as stub, pytest.raises(BackboneFault) as info:
        bb = make(stub, "function_calling")
        bb.setting_names = EndpointNames(base_url="X_URL", model="X_MODEL")
        run(bb, Usage())
    assert "X_URL" in info.value.message and "RAA_BASE_URL" not in info.value.message
    assert ("X_MODEL" in info.value.message) == (reply is ROOT_404)


@pytest.mark.parametrize("reply", [ROOT_404, HTML], ids=["404", "web_page"])
def test_the_judge_names_its_settings(reply: StubReply) -> None:
    async def no_frames(path):
        return []

    with OpenAIStub([reply] * 8) as stub:
        settings = JudgeSettings(base_url=stub.base_url, model="judge-vl", api_key="EMPTY", attempts=1,
                                 max_retries=0, timeout_s=5.0)
        chat = ChatOpenAI(base_url=stub.base_url, model="judge-vl", api_key="EMPTY", timeout=5.0, max_retries=0)
        judge = RewardJudge.from_settings(settings, model=chat)
        judge._blocks = no_frames
        verdict = asyncio.run(judge.judge("clip.mp4", "lift the cube", 0.9, "scored", ["lifted"]))
    assert verdict.status == "unjudged", verdict
    assert "RAA_JUDGE_BASE_URL" in verdict.rationale and "RAA_BASE_URL" not in verdict.rationale
    if reply is ROOT_404:
        assert "404" in verdict.rationale and "RAA_JUDGE_MODEL" in verdict.rationale
        assert "RAA_MODEL" not in verdict.rationale


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:  # bound and closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("names", [BACKBONE_NAMES, JUDGE_NAMES], ids=["agent", "judge"])
def test_nothing_answering_names_the_url_and_its_setting(names: EndpointNames) -> None:
    """A wrong port or a server not started: the reason said only "APIConnectionError after 3 attempts:
    Connection error.", naming neither the URL tried nor the setting to fix (`raa score` has no pre-flight)."""
    from graph.backbone import Backbone

    url = f"http://user:secret@127.0.0.1:{_closed_port()}/v1"
    chat = ChatOpenAI(base_url=url, model="m", api_key="EMPTY", timeout=5.0, max_retries=0)
    bb = Backbone(chat, method="json_schema", max_retries=1, timeout_s=5.0, model_name="m", retry_wait=(0.0, 0.01))
    bb.setting_names = names
    with pytest.raises(BackboneFault) as info:
        run(bb, Usage())
    message = info.value.message
    assert info.value.kind == "transport" and "ConnectionError after 2 attempts" in message
    assert f"{url.replace('user:secret@', '')}/chat/completions" in message and "secret" not in message
    assert names.base_url in message
