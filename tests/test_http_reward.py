"""training.rewards.HttpAgentReward: the reward-service protocol, retries, ranks spread over services, and
what it makes of each result (split from test_rewards.py)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from tests.http_stubs import POLL_S, send_json
from training.rewards import HttpAgentReward, build_reward, call_reward


def _clips(n: int = 2, t: int = 3) -> list[np.ndarray]:
    return [np.zeros((t, 4, 4, 3), dtype=np.uint8) for _ in range(n)]


class _Handler(BaseHTTPRequestHandler):
    mode = "ok"
    busy = 0  # answer 503 this many times first
    posts = 0
    metas: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.posts += 1
        _Handler.metas.append(body["meta"])
        if _Handler.mode == "fail" or _Handler.busy > 0:
            _Handler.busy -= 1
            self.send_response(500 if _Handler.mode == "fail" else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        results = [{"reward": None if i == 1 else 0.1 * i, "reasons": [item["instruction"]]}
                   for i, item in enumerate(body["items"])]
        send_json(self, {"results": results})

    def log_message(self, *args):
        pass


def test_http_reward_roundtrip_and_failure():
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    try:
        clips = [np.full((3, 16, 16, 3), 100, dtype=np.uint8) for _ in range(3)]
        fn = HttpAgentReward(url=f"http://127.0.0.1:{server.server_port}/score", timeout_s=30)
        _Handler.metas = []
        out = call_reward(fn, "http", clips, ["a", "b", "c"], fps=8.0, iteration=4, phase="train")
        assert out.rewards == [0.0, None, pytest.approx(0.2)] and out.counts["none"] == 1
        assert fn.last_reasons == [["a"], ["b"], ["c"]]
        call_reward(fn, "http", clips, ["a", "b", "c"], iteration=5, phase="eval")
        assert _Handler.metas == [{"iteration": 4, "phase": "train"}, {"iteration": 5, "phase": "eval"}]  # the API's values
        _Handler.mode, _Handler.posts = "fail", 0
        out = call_reward(fn, "http", clips, ["a", "b", "c"], fps=8.0)
        assert out.rewards == [None, None, None] and _Handler.posts == 1  # a 500 is not retried
        assert "http reward failed" in fn.last_reasons[0][0]
        # an outage is a broken reward (error), not the agent's own verdict (none, which it was counted as)
        assert out.counts["error"] == 3 and out.counts["none"] == 0 and out.kinds == ["error"] * 3
        down = HttpAgentReward(url="http://127.0.0.1:9/score", retries=1, startup_wait_s=0)  # connection refused
        assert call_reward(down, "http", clips[:1], ["a"]).counts["error"] == 1
    finally:
        _Handler.mode = "ok"
        server.shutdown()


def test_a_service_result_that_is_no_number_costs_only_its_item():
    """One malformed result made the whole batch ineligible (kind none), and text "0.5" was read as 0.5
    (the plain-list contract refuses text); a null reward stays the service's own verdict."""
    fn = HttpAgentReward(url="http://svc/score", startup_wait_s=0)
    fn._post = lambda url, body: {"results": [  # noqa: SLF001 (the transport, stubbed)
        {"reward": "0.5", "reasons": ["r0"]}, {"reward": 0.7}, {"reward": [0.3]}, "oops",
        {"reward": None, "reasons": ["not visible"]}, {"reward": True}]}
    out = call_reward(fn, "http", _clips(6), ["a"] * 6)
    assert out.rewards == [None, 0.7, None, None, None, 1.0]
    assert out.kinds == ["error", None, "error", "error", "none", None]
    assert out.counts == {"none": 1, "nan": 0, "inf": 0, "error": 3}
    assert fn.last_reasons[0] == ["http reward service http://svc/score returned a reward that is not a number: '0.5'",
                                  "r0"]
    assert "not a number: [0.3]" in out.reasons[2] and "not a JSON object: 'oops'" in out.reasons[3]
    assert out.reasons[4] == "reward 'http' returned None (ineligible): not visible"


def test_http_reward_waits_for_the_service_at_start_and_names_a_dead_url():
    server = HTTPServer(("127.0.0.1", 0), _Handler)  # answers GET with 501: an answer all the same
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    try:
        HttpAgentReward(url=f"http://127.0.0.1:{server.server_port}/score", startup_wait_s=5).wait_until_reachable()
        assert isinstance(build_reward("http", {"url": f"http://127.0.0.1:{server.server_port}/score"}),
                          HttpAgentReward)
    finally:
        server.shutdown()
    with pytest.raises(ValueError, match=r"reward service http://127.0.0.1:9/score did not answer within 0.3 s"):
        HttpAgentReward(url="http://127.0.0.1:9/score", startup_wait_s=0.3).wait_until_reachable()
    with pytest.raises(ValueError, match="did not answer"):  # build_reward checks; the trainer makes it exit 2
        build_reward("http", {"url": "http://127.0.0.1:9/score", "startup_wait_s": 0.3})
    HttpAgentReward(url="http://127.0.0.1:9/score", startup_wait_s=0).wait_until_reachable()  # 0: no check


def test_http_reward_spreads_ranks_over_several_services():
    """url: [a, b]: rank r posts to url[r % 2]; every url is checked at start, and a dead one is named."""
    servers = [HTTPServer(("127.0.0.1", 0), _Handler) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    urls = [f"http://127.0.0.1:{server.server_port}/score" for server in servers]
    seen: list[int] = []
    try:
        fn = build_reward("http", {"url": urls, "startup_wait_s": 5})
        for server in servers:  # which service answered each call: its port, recorded by a wrapper
            server.RequestHandlerClass = type("H", (_Handler,), {"do_POST": lambda self, port=server.server_port: (
                seen.append(port), _Handler.do_POST(self))})
        clips = [np.full((3, 16, 16, 3), 100, dtype=np.uint8)]
        for rank in (0, 1, 2, 3):
            assert call_reward(fn, "http", clips, ["a"], rank=rank).rewards == [0.0]
        ports = [server.server_port for server in servers]
        assert seen == [ports[0], ports[1], ports[0], ports[1]]
        with pytest.raises(ValueError, match=r"reward service http://127.0.0.1:9/score did not answer"):
            HttpAgentReward(url=[urls[0], "http://127.0.0.1:9/score"], startup_wait_s=0.3).wait_until_reachable()
    finally:
        for server in servers:
            server.shutdown()
    for bad in ([], ["ftp://x"], [7], "http://", ["https:///score"]):
        with pytest.raises(ValueError, match="url must be an http"):
            HttpAgentReward(url=bad)


def test_http_reward_retries_transient_failures_a_bounded_number_of_times():
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    try:
        clips = [np.full((3, 16, 16, 3), 100, dtype=np.uint8) for _ in range(3)]
        fn = HttpAgentReward(url=f"http://127.0.0.1:{server.server_port}/score", retries=3, backoff_s=0)
        _Handler.busy, _Handler.posts = 2, 0  # two 503s, then an answer
        out = call_reward(fn, "http", clips, ["a", "b", "c"])
        assert out.rewards == [0.0, None, pytest.approx(0.2)] and _Handler.posts == 3
        _Handler.busy, _Handler.posts = 5, 0  # busy for longer than the attempts last
        out = call_reward(fn, "http", clips, ["a", "b", "c"])
        assert out.rewards == [None, None, None] and _Handler.posts == 3
        assert "HTTP 503" in fn.last_reasons[0][0] and "after 3 attempts" in fn.last_reasons[0][0]
    finally:
        _Handler.busy = 0
        server.shutdown()
    with pytest.raises(ValueError, match="retries"):
        HttpAgentReward(url="http://x", retries=0)


def test_a_service_result_without_a_reward_key_is_an_error_not_the_services_verdict():
    """A result object that has no "reward" field at all (a service answering {"score": ...}, or an error
    object per item) was read as a null reward: the service's own ⊥ (kind none), with no reason saying the
    answer was malformed. Only an explicit null is the verdict."""
    fn = HttpAgentReward(url="http://svc/score", startup_wait_s=0)
    fn._post = lambda url, body: {"results": [  # noqa: SLF001 (the transport, stubbed)
        {"score": 0.7}, {"reward": None, "reasons": ["not visible"]}, {"reward": 0.2}]}
    out = call_reward(fn, "http", _clips(3), ["a"] * 3)
    assert out.rewards == [None, None, 0.2]
    assert out.kinds == ["error", "none", None]
    assert out.counts == {"none": 1, "nan": 0, "inf": 0, "error": 1}
    assert "without a reward" in out.reasons[0]


class _Gateway(BaseHTTPRequestHandler):
    """A proxy in front of the service that answers a gateway error (the service behind it may be scoring)."""

    status = 502
    posts = 0

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        _Gateway.posts += 1
        self.send_response(_Gateway.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(("status", "phrase"), [(502, "Bad Gateway"), (504, "Gateway Timeout")])
def test_a_gateway_error_says_its_status_and_that_it_was_not_retried(status, phrase):
    """A 502 / 504 read "HTTPStatusError: Server error '502 Bad Gateway' for url ...", nothing saying that it
    was deliberately not retried, nor why: the request went through the gateway, so the batch may have been
    scored (or still be) behind it."""
    server = HTTPServer(("127.0.0.1", 0), _Gateway)
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    try:
        _Gateway.status, _Gateway.posts = status, 0
        fn = HttpAgentReward(url=f"http://127.0.0.1:{server.server_port}/score", retries=3, backoff_s=0,
                             startup_wait_s=0)
        out = call_reward(fn, "http", _clips(2), ["a", "b"])
        assert out.rewards == [None, None] and out.kinds == ["error", "error"] and _Gateway.posts == 1
        reason = fn.last_reasons[0][0]
        assert f"HTTP {status} {phrase}" in reason and "not retried" in reason, reason
        assert "may have" in reason and "HTTPStatusError" not in reason, reason
    finally:
        server.shutdown()


@pytest.mark.parametrize(("token", "problem"), [("s3cret ", "ends in a space"), ("pässwort", "printable ASCII")])
def test_a_token_no_request_can_carry_is_refused_when_the_reward_is_built(token, problem):
    """The trainer's reward-service token was not checked as the tool client's is: every batch of the run then
    failed in httpx (a UnicodeEncodeError, or an "Illegal header value" reported as a transport failure of a
    request it said was sent), each reward ineligible, no update, instead of one error at start."""
    with pytest.raises(ValueError, match=problem) as info:
        HttpAgentReward(url="http://127.0.0.1:9/score", token=token, startup_wait_s=0)
    assert token not in str(info.value) and "reward service token" in str(info.value)
    assert HttpAgentReward(url="http://127.0.0.1:9/score", token="s3cret", startup_wait_s=0).token == "s3cret"


@pytest.mark.parametrize(("reply", "said"), [([{"reward": 0.5}, {"reward": 0.5}], "a JSON list"),
                                             ({"result": []}, "no results field"),
                                             ({"results": [{"reward": 0.5}]}, "1 results")])
def test_a_reply_not_shaped_as_the_api_says_names_what_came(monkeypatch, reply, said):
    """A 200 answer that is not {"results": [one per item]} made the batch ineligible with Python's words for
    it ("TypeError: list indices must be integers or slices, not str", "KeyError: 'results'"); the reason
    says what the API expects and what came instead, for every item, of kind error."""
    fn = HttpAgentReward(url="http://127.0.0.1:9/score", startup_wait_s=0)
    monkeypatch.setattr(fn, "_post", lambda url, body: reply)
    out = call_reward(fn, "http", _clips(), ["a", "b"])
    assert out.rewards == [None, None] and out.counts["error"] == 2
    assert all("expected a JSON object with a results list of 2" in r and said in r for r in out.reasons)
