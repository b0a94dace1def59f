"""`graph.api.arun_agent` with an `on_update` that raises (`raa score --stream`'s printer failing, say) releases the
run's claim before it returns: `_streamed` left `agent.astream` open, so the claim (`graph.thread_claims`) was
released only once the abandoned generator was finalized, later, on the loop (or never, were it kept alive)."""

from __future__ import annotations

import asyncio

from tests.graph_scripts import PUSH
from tests.test_plain_invoke_claims import _agent, _claims


def test_a_failing_update_sink_releases_the_claim_before_the_result_returns(clip, tmp_path) -> None:
    from graph import run_claims
    from graph.api import arun_agent

    db = tmp_path / "traces.sqlite"
    agent = _agent(db)
    calls: list[str] = []

    def sink(node, update):
        calls.append(node)
        raise RuntimeError("printer broke")

    async def main():
        result = await arun_agent(agent, str(clip), PUSH, "s1", "decomposed", on_update=sink)
        run_claims.join_releases(10)  # an error's release runs in a daemon thread: wait for it, not for the loop
        return result, _claims(db)

    result, left = asyncio.run(main())
    assert len(calls) == 1
    assert result.status == "ineligible" and "printer broke" in result.reasons[0], result.reasons
    assert left == [], left
