"""What `graph.setup_rejections.server_words` adds of a reply's body to a fault's message and to what the matchers
read: a server's own words (TGI's `{"error": "<words>"}`, FastAPI's `{"detail": "<words>"}`), but not a reverse
proxy's web page (a 502 from nginx or Cloudflare: kilobytes of markup in every clip's row and trace, where the
SDK's text said "Error code: 502"): of a page, its title only."""

from __future__ import annotations

import httpx
import openai
import pytest

from graph.backbone import BackboneFault, Usage
from graph.server_words import server_words
from tests.openai_stub import OpenAIStub, StubReply
from tests.test_backbone_http import good, make, run

CLOUDFLARE_502 = ("<!DOCTYPE html>\n<!--[if lt IE 7]> <html class=\"no-js ie6 oldie\" lang=\"en-US\"> <![endif]-->\n"
                  "<html><head>\n<title>llm.example.org | 502: Bad gateway</title>\n<meta charset=\"UTF-8\" />\n"
                  + "<style>body{margin:0;padding:0}</style>\n" * 80 +
                  "</head><body><div id=\"cf-error-details\"><h1>Bad gateway</h1></div></body></html>")


def _status(status: int, body: object, text: str = "") -> openai.APIStatusError:
    request = httpx.Request("POST", "http://server/v1/chat/completions")
    response = httpx.Response(status, request=request, text=text)
    return openai.APIStatusError(f"Error code: {status}", response=response, body=body)


def test_a_proxy_s_502_page_is_named_by_its_title_not_written_whole() -> None:
    page = StubReply(status=502, body=CLOUDFLARE_502, content_type="text/html")
    with OpenAIStub([page, page, page, good("json_schema")]) as stub, pytest.raises(BackboneFault) as info:
        run(make(stub, "json_schema"), Usage())
    fault = info.value
    assert fault.kind == "transport", fault
    assert "502: Bad gateway" in fault.message and "<" not in fault.message and len(fault.message) < 200, \
        fault.message


def test_a_page_without_a_title_adds_nothing() -> None:
    exc = _status(400, "<html><body><center><h1>400 Bad Request</h1></center></body></html>")
    assert server_words(exc) == "Error code: 400"


@pytest.mark.parametrize("body", [None, ["a", "list"], {"error": {"nested": "dict"}}, {"detail": [{"loc": ["body"]}]},
                                  {"message": "Error code: 400"}, 42, "", b"raw bytes"])
def test_bodies_without_words_of_their_own_add_nothing(body: object) -> None:
    assert server_words(_status(400, body)) == "Error code: 400"


def test_a_plain_text_body_and_a_detail_are_added_once() -> None:
    assert server_words(_status(503, "upstream connect error")) == "Error code: 503 - upstream connect error"
    assert server_words(_status(404, {"detail": "Not Found"})) == "Error code: 404 - Not Found"
    exc = openai.APIStatusError("Error code: 400 - Not Found", response=_status(400, None).response,
                                body={"detail": "Not Found"})
    assert server_words(exc) == "Error code: 400 - Not Found"


def test_errors_without_a_reply_are_their_text() -> None:
    request = httpx.Request("POST", "http://server/v1/chat/completions")
    assert server_words(openai.APIConnectionError(request=request)) == "Connection error."
    assert server_words(httpx.ReadError("boom", request=request)) == "boom"


@pytest.mark.parametrize("said", ["Invalid Authorization header: Bearer sk-proj-abcdef0123456789ABCDEF",
                                  "api_key=hf_abcdefghijklmnopqrstuvwxyz012345 is not valid",
                                  "unknown key sk-abcdef0123456789abcdef0123"])
def test_a_credential_the_server_echoes_is_not_written(said: str) -> None:
    """A gateway that quotes the key it was sent (`{"detail": "Invalid API key: <key>"}`): its words go into every
    row and trace, so the key in them is masked; what the server said about it stays."""
    for body in ({"detail": said}, said):
        words = server_words(_status(401, body))
        assert "0123" not in words and "[redacted]" in words and words.startswith("Error code: 401 - "), words
