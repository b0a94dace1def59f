"""A stage cache that cannot be read is a miss (graph/cache.py `lookup`): the model is asked, as without a
cache; a read error used to make the run a fault while a write error was already tolerated."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from graph.backbone import Backbone, Usage
from graph.cache import StageCache
from graph.testing import ScriptedChatModel

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]


class Verdict(BaseModel):
    label: str
    score: int


def _damaged_cache(path: Path) -> StageCache:
    """A cache file whose pages after the first (the schema) are overwritten: it opens, every read fails."""
    cache = StageCache(path)
    for i in range(50):
        cache.put(f"k{i}", "x" * 200)
    cache.close()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xab" * (len(data) - page)
    path.write_bytes(bytes(data))
    damaged = StageCache(path)
    with pytest.raises(sqlite3.DatabaseError):
        damaged.get("k1")
    return damaged


def test_an_unreadable_cache_is_a_miss_and_the_model_is_asked(tmp_path, caplog) -> None:
    cache = _damaged_cache(tmp_path / "cache.sqlite")
    model = ScriptedChatModel({"judge": [{"label": "a", "score": 2}, AIMessage(content="R1 is met.")]})
    bb = Backbone(model, cache=cache, retry_wait=(0.0, 0.0))
    usage = Usage()
    with caplog.at_level(logging.WARNING, logger="graph.cache"):
        assert asyncio.run(bb.astructured("judge", Verdict, list(MSGS), usage)).score == 2
        assert asyncio.run(bb.atool_round("judge", list(MSGS), [], usage)).text == "R1 is met."
    assert len(model.calls) == 2 and usage.calls == 2 and usage.cache_hits == 0
    assert "cannot be read (DatabaseError" in caplog.text


def test_a_cache_that_cannot_be_read_counts_a_miss(tmp_path) -> None:
    """A read that fails (a damaged file, a lock held past the busy timeout) is a miss (`lookup`: the stage is asked),
    but `StageCache.get` raised before counting it: the cache's hits and misses left out every stage asked again."""
    cache = _damaged_cache(tmp_path / "cache.sqlite")
    before = (cache.hits, cache.misses)
    bb = Backbone(ScriptedChatModel({"judge": [{"label": "a", "score": 2}]}), cache=cache, retry_wait=(0.0, 0.0))
    assert asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage())).score == 2
    assert (cache.hits, cache.misses) == (before[0], before[1] + 1)


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_stored_entry_that_does_not_decode_counts_as_a_miss(tmp_path, on_disk: bool) -> None:
    # StageCache.hits counted it as a hit although the stage was asked again (Usage.cache_hits did not)
    from graph.cache import lookup

    cache = StageCache(tmp_path / "cache.sqlite" if on_disk else None)
    cache.put("bad", '{"label": "a"}')  # no score: fails the schema
    cache.put("good", '{"label": "a", "score": 1}')
    assert asyncio.run(lookup(cache, "bad", Verdict.model_validate_json, "judge")) is None
    assert (cache.hits, cache.misses) == (0, 1)
    assert asyncio.run(lookup(cache, "good", Verdict.model_validate_json, "judge")) == Verdict(label="a", score=1)
    assert asyncio.run(lookup(cache, "none", Verdict.model_validate_json, "judge")) is None
    assert (cache.hits, cache.misses) == (1, 2)


@pytest.mark.parametrize("on_disk", [False, True])
@pytest.mark.parametrize("stage", ["observe", "audit"])
def test_a_stored_empty_observation_or_audit_is_a_miss(tmp_path, on_disk: bool, stage: str) -> None:
    """`{}` is no Observation and no AuditReport (`graph.schemas.EMPTY_IS_NO_ANSWER`): a reply of it is re-asked,
    but an entry `{}` in the cache (written before that check) still decoded, as an observation of nothing or a
    clean audit, and was served on every hit. It is a miss now: the stage is asked and the entry replaced."""
    from graph.schemas import AuditReport, Observation

    schema = {"observe": Observation, "audit": AuditReport}[stage]
    answer = ({"scene": "a table", "summary": "an arm moves"} if stage == "observe"
              else {"missing_requirements": ["R2"], "invented_conditions": [], "contradictions": []})
    msgs = [SystemMessage(content=f"# stage: {stage}\nLook."), HumanMessage(content="frames")]
    cache = StageCache(tmp_path / "cache.sqlite" if on_disk else None)
    bb = Backbone(ScriptedChatModel({stage: [answer]}), cache=cache, retry_wait=(0.0, 0.0))
    key = bb.key_of(stage, msgs, method=bb.method, schema=schema)
    cache.put(key, "{}")
    usage = Usage()
    out = asyncio.run(bb.astructured(stage, schema, list(msgs), usage))
    assert out == schema.model_validate(answer)
    assert usage.calls == 1 and usage.cache_hits == 0 and (cache.hits, cache.misses) == (0, 1)
    assert cache.get(key) != "{}"  # replaced by the answer: the next run is served it
    again = Usage()
    assert asyncio.run(bb.astructured(stage, schema, list(msgs), again)) == out and again.cache_hits == 1
