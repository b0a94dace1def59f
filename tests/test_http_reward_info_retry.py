"""HttpAgentReward.service_info (the trainer's record of what scored a run, training/provenance.py) sent one
GET /v1/info: a service that said "busy" (503 / 429) or "your request did not arrive in time" (408) at that
moment left the run recorded as "scoring: unreported", although every other call of the client sends those
again (tools/http_retry.py, which names /v1/info among the requests it retries). And
wait_until_reachable's start-up wait (connection refused until the service listens) is pinned here."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from tests.http_stubs import POLL_S, send_json, served
from training.rewards import HttpAgentReward

INFO = {"preset": "full", "scoring": {"model": "m"}}


class _Info(BaseHTTPRequestHandler):
    first: list[int] = []  # statuses to answer before the info, one per GET
    gets = 0

    def do_GET(self):  # noqa: N802
        _Info.gets += 1
        status = _Info.first.pop(0) if _Info.first else 200
        send_json(self, INFO if status == 200 else {"detail": "busy"}, status, content_type="application/json")

    def log_message(self, *args):
        pass


def _serve(first: list[int]):
    """The root URL of the info stub answering the statuses ``first`` before the info, served while the block
    runs."""
    _Info.first, _Info.gets = list(first), 0
    return served(_Info)


def test_service_info_retries_busy_and_408_answers_like_the_other_calls():
    with _serve([503, 429, 408]) as root:
        fn = HttpAgentReward(url=f"{root}/v1/score", retries=4, backoff_s=0, startup_wait_s=0)
        assert fn.service_info() == [(fn.url, INFO)]
        assert _Info.gets == 4


def test_service_info_gives_up_after_retries_and_does_not_retry_a_500():
    with _serve([503, 503, 503]) as root:
        fn = HttpAgentReward(url=f"{root}/v1/score", retries=2, backoff_s=0, startup_wait_s=0)
        [(url, why)] = fn.service_info()  # never raises: recorded, not required
        assert isinstance(why, str) and "503" in why and "after 2 attempts" in why, why
        assert _Info.gets == 2
        _Info.first, _Info.gets = [500], 0  # the shared policy: a 500 may have done the work; not sent again
        [(url, why)] = fn.service_info()
        assert isinstance(why, str) and "500" in why and _Info.gets == 1, why


def test_service_info_connection_refused_is_retried_then_reported():
    fn = HttpAgentReward(url="http://127.0.0.1:9/v1/score", retries=2, backoff_s=0, startup_wait_s=0)
    [(url, why)] = fn.service_info()
    assert isinstance(why, str) and "ConnectError" in why and "after 2 attempts" in why, why


def test_wait_until_reachable_waits_through_connection_refused_at_start_up():
    server = HTTPServer(("127.0.0.1", 0), _Info, bind_and_activate=False)
    server.server_bind()  # the port is taken but not listening: a connection is refused until it is
    _Info.first, _Info.gets = [], 0

    def start_late():
        time.sleep(1.0)
        server.server_activate()
        server.serve_forever(POLL_S)

    threading.Thread(target=start_late, daemon=True).start()
    try:
        HttpAgentReward(url=f"http://127.0.0.1:{server.server_port}/v1/score",
                        startup_wait_s=10).wait_until_reachable()
        assert _Info.gets >= 1
    finally:
        server.shutdown()
        server.server_close()
