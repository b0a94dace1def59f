"""The reward service's start-up check behind a gateway: a proxy that answers 502 / 503 / 504 for a service
that is not up yet is waited through (it used to count as the service answering, and the run's first batches
were then ineligible: a gateway's 502 is not retried), and one that never gets past it is named."""

from __future__ import annotations

import httpx
import pytest

from graph.endpoint import first_answer
from tests.http_stubs import status_server
from training.rewards import HttpAgentReward


@pytest.mark.parametrize("busy", [502, 503, 504])
def test_the_start_up_check_waits_while_a_gateway_answers_for_a_service_not_up(busy):
    server, sent = status_server([busy, busy, 405])  # then the service is up: a GET on its POST route is a 405
    try:
        HttpAgentReward(url=f"http://127.0.0.1:{server.server_port}/score", startup_wait_s=10,
                        backoff_s=0).wait_until_reachable()
    finally:
        server.shutdown()
    assert sent == [busy, busy, 405]


def test_a_gateway_that_never_gets_past_502_is_named_at_start():
    server, sent = status_server([502])
    url = f"http://127.0.0.1:{server.server_port}/score"
    try:
        with pytest.raises(ValueError, match=r"reward service .*/score answered only HTTP 502 .* for 1.5 s"):
            HttpAgentReward(url=url, startup_wait_s=1.5).wait_until_reachable()
    finally:
        server.shutdown()
    assert len(sent) >= 2  # it asked again


def test_first_answer_returns_the_last_gateway_answer_at_its_deadline_and_other_statuses_at_once():
    server, sent = status_server([500, 503])
    url = f"http://127.0.0.1:{server.server_port}/x"
    try:
        assert first_answer(url, wait_s=5, timeout_s=2).status_code == 500  # the service's own error: an answer
        assert first_answer(url, wait_s=0, timeout_s=2).status_code == 503  # one try when wait_s is 0
    finally:
        server.shutdown()
    assert sent == [500, 503]
    with pytest.raises(httpx.ConnectError):
        first_answer("http://127.0.0.1:9/x", wait_s=0, timeout_s=2)
