"""What the trainer's reward-service client (training.http_reward.HttpAgentReward) says of a batch the service
refused: the service's own reason, not only httpx's status line."""

from __future__ import annotations

import numpy as np
from service_helpers import serve

from graph.reward_service import create_reward_app
from training.rewards import HttpAgentReward, call_reward


def test_a_refused_batch_says_why_the_service_refused_it():
    """A 400 (more items than --max-items) read "HTTPStatusError: Client error '400 Bad Request' for url ... For more
    information check: https://developer.mozilla.org/...": the service's detail, which names the limit, was
    dropped, so the trainer's log did not say which setting to change."""
    app = create_reward_app(object(), "decomposed", max_items=1)
    clips = [np.zeros((3, 4, 4, 3), dtype=np.uint8) for _ in range(2)]
    with serve(app) as url:
        fn = HttpAgentReward(url=f"{url}/v1/score", retries=1, backoff_s=0, startup_wait_s=0)
        out = call_reward(fn, "http", clips, ["a", "b"])
    assert out.rewards == [None, None] and out.kinds == ["error", "error"]
    reason = fn.last_reasons[0][0]
    assert "HTTP 400" in reason and "2 items in one request; the limit is 1" in reason, reason
    assert "--max-items" in reason, reason  # the setting to raise
    assert "developer.mozilla.org" not in reason
