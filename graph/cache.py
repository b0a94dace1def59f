"""Stage-output cache: identical stage inputs share one backbone output (DESIGN.md §3 "Backbone").

A key (`graph.cache_keys.stage_key`) is the sha256 of a canonical JSON rendering of (endpoint, model name, structured-output method, stage
name, rendered messages with every image data URL replaced by the sha256 of that URL, stage parameters,
schema name + JSON schema, bound tool schemas). The value is the validated output as a JSON string. Who answers and
how it samples come from the backbone (`Backbone.key_of`, `graph.model_request.stage_identity`).

Decisions where the issue was silent:
- The endpoint (RAA_BASE_URL, `graph.cache_keys.endpoint_identity`: one URL written two ways is one endpoint) is part of
  the key, as LangChain's own LLM cache keys on `openai_api_base`, and training records it among the settings
  that decide what the model answers (`BackboneSettings.scoring`). A served name says little about the
  weights: vLLM serves a local path or any `--served-model-name`, so a fine-tune served under its base
  model's name on another server was handed the base model's cached outputs (silently wrong rewards). The
  price: the same weights behind two URLs (two replicas, localhost and 127.0.0.1, a new port) do not share
  entries, and each computes its own, which is correct, only slower; replicas share when reached through
  one URL (a load balancer). Still not told apart: other weights under the same name at the same URL (a
  server restarted with a new checkpoint): serve it under a new name, or prune the cache
  (`raa prune --cache`). A backbone without an endpoint (an injected chat model, which gets an in-memory
  cache of its own) keeps the keys from before the endpoint was keyed; a cache file written before it
  misses once per stage input.
- An OpenAI-family chat model (langchain-openai's BaseChatOpenAI: ChatOpenAI, AzureChatOpenAI, ChatDeepSeek) is
  keyed by what it asks for (`graph.model_request.requested`): the model it names (Azure's deployment) and its own
  base URL, in place of the backbone's model name and endpoint. An injected one was keyed by its class name,
  "ChatOpenAI", without its address: two of them of different served models sharing a cache file (`backbone=`, or
  `Backbone.from_settings(model=...)` under settings of another name) shared entries, and the second model's run
  took the first one's outputs, a reward from the wrong model. The agent built from settings asks for the
  settings' model at their base URL, so its keys are unchanged; an injected model of the same settings shares them.
- The stage name is part of the key (two stages never share an output even with equal messages).
- The sampling temperature is part of the stage parameters when it is not 0 (`Backbone.temperature`, from
  RAA_TEMPERATURE; an OpenAI-family model's own, None when it sends none and the server's default applies, but
  RAA_TEMPERATURE for the one built from settings, whose temperature langchain-openai drops for a gpt-5 model:
  `ShapedChatOpenAI.asked_temperature`), so answers sampled at one temperature are never served for another; a run of
  `AgentConfig.draw` k != 0 adds `draw: k` (`Backbone.for_draw`), so repeated draws of one clip sample
  anew. At temperature 0 and draw 0 the keys are those of runs from before either was keyed. A repeat of
  one (temperature, draw) is served from the cache: draws are how to sample again. The other request parameters an
  OpenAI-family model sends (top_p, seed, penalties, stop sequences, reasoning effort, extra_body, model_kwargs)
  are a `request` parameter when it sends any (none from settings): an injected model set to top_p 0.5 was served
  the answers of one at the server's defaults.
- A stored output keeps a non-finite number (a model's JSON may hold Infinity) as written (`encode_output`).
- Only validated outputs are stored; faults and invalid replies are never cached. A stored entry that no
  longer decodes (a structured output that fails a validator added since it was written, or the checks of a
  reply, `graph.validation.decode_stored`: `{}` is no Observation and no AuditReport; or a damaged
  entry) is a miss (`decoded`; counted in `StageCache.misses`, it was a hit): the stage is asked again and
  the entry replaced, where it used to raise on every hit, failing that stage input for good until the cache
  was pruned.
- A cache that cannot be read (SQLite: "database disk image is malformed", a lock held past the busy
  timeout, an I/O error) is a miss too (`lookup`, logged): the model is asked, exactly as without a cache,
  so no output is invented, where the read error used to make the run a fault (ineligible) while a failed
  write was already tolerated. Opening a file that is no cache, or cannot be opened, still stops at once.
- The output cap (`RAA_MAX_TOKENS`, an OpenAI-family model's `max_tokens`) is a stage parameter when set. A cut
  reply is never stored (a structured one fails validation; a tool-round reply the server marks cut, finish_reason
  "length", is returned but not cached: graph/tool_rounds.py), but the cap still decides the stored output: a
  structured reply cut at 512 is re-asked for a shorter answer, which is stored, and an answer of 1000 tokens stored
  under a cap of 4096 was served to a run at 512, which could never have received it. The price: a cache file
  written with RAA_MAX_TOKENS set before the cap was keyed misses once per stage input (without it, the keys are
  unchanged).
- `StageCache` serialises its SQLite access with one `threading.Lock` (a connection opened with
  `check_same_thread=False`), which makes it safe from threads and from many asyncio tasks. The nodes
  use `aget` / `aput`: on SQLite they run in a worker thread of the "io" lane, because a file read or
  write (or a wait for another process's write lock) must not stall the event loop that every run in
  the process shares (`langgraph dev` refuses such calls outright); the in-memory store stays inline.
- Each entry records when it was stored (`created`, Unix seconds), so `raa prune --cache-before 30d`
  can drop entries by age (graph/retention.py); a read does not update it (no write per hit), so an
  entry used every day still ages out once and is recomputed. A cache file from before this column is
  given it on open; its old entries have no date and count as older than any cutoff.
- Concurrent identical requests are collapsed with `share(key, compute)`, a single flight per key and
  event loop (graph/flights.py): the first caller computes, the others take its outcome. That keeps "one
  backbone call per unique stage input" true when presets run concurrently, and a fault of that call is
  the fault of every caller waiting for it (not one more failing call each); it is not stored, so a later
  caller asks again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import AIMessage
from pydantic import BaseModel

from graph.flights import Flights
from graph.frame_fork import abandon, watch
from graph.stores import (
    CACHE_TABLES,
    CACHE_WAIT_S,
    connect_wal,
    ensure_parent,
    retry_locked,
    store_errors,
)
from graph.workers import run_blocking

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)  # a stage output: a pydantic model or an AIMessage (one too)
_log = logging.getLogger(__name__)
_SCHEMA = "CREATE TABLE IF NOT EXISTS stage_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"


def decoded(hit: str | None, decode: Callable[[str], T], stage: str) -> T | None:
    """`decode(hit)`, or None for a miss and for an entry that does not decode (logged; see the module
    docstring)."""
    if hit is None:
        return None
    try:
        return decode(hit)
    except (ValueError, KeyError, TypeError) as exc:  # pydantic's ValidationError and JSON errors included
        first = next(iter(str(exc).splitlines()), "")[:200]
        _log.warning("stage cache: a stored %s output does not decode (%s: %s); asking again", stage,
                     type(exc).__name__, first)
        return None


async def lookup(cache: StageCache, key: str, decode: Callable[[str], T], stage: str) -> T | None:
    """The decoded stored output for `key` (`decoded`), or None for a miss, which includes a cache that
    cannot be read now (a SQLite error: a damaged file, a lock held past the busy timeout, an I/O error;
    logged): the stage is asked again (see the module docstring)."""
    try:
        hit = await cache.aget(key)
    except sqlite3.Error as exc:
        _log.warning("stage cache: the stored %s output cannot be read (%s: %s); asking again", stage,
                     type(exc).__name__, exc)
        return None
    out = decoded(hit, decode, stage)
    if hit is not None and out is None:  # stored, but the stage is asked again: a miss
        cache.count_undecodable()
    return out


async def store(cache: StageCache, key: str, value: str, stage: str) -> None:
    """Store a stage output the model gave; a cache that cannot take it now (the SQLite file locked by another
    process past its busy timeout, a full disk; logged) costs a later cache hit, not this valid output."""
    try:
        await cache.aput(key, value)
    except sqlite3.Error as exc:
        _log.warning("stage cache: %s output not stored (%s: %s)", stage, type(exc).__name__, exc)


def encode_output(out: BaseModel) -> str:
    """A structured stage output as stored: JSON with a non-finite number as Infinity / NaN, read back as the
    model's reply was. pydantic's JSON writes null: a plan's track at Infinity came back an entry "not run", or
    the output did not decode (a miss on every hit)."""
    try:
        return json.dumps(out.model_dump(mode="python"), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):  # a value plain JSON cannot hold as it is (a date, bytes): pydantic's JSON
        return out.model_dump_json()


def encode_tool_reply(reply: AIMessage) -> str:
    """The stored form of a tool-round reply: its content and tool calls."""
    calls = [{"name": c["name"], "args": c["args"], "id": c.get("id"), "type": "tool_call"} for c in reply.tool_calls]
    return json.dumps({"content": reply.content, "tool_calls": calls})


def decode_tool_reply(text: str) -> AIMessage:
    """The tool-round reply of `encode_tool_reply`'s `text`."""
    data = json.loads(text)
    return AIMessage(content=data["content"], tool_calls=data["tool_calls"])


def dated(conn: sqlite3.Connection) -> bool:
    """Whether the stage cache table on `conn` has the `created` column (files from before it do not)."""
    return "created" in {row[1] for row in conn.execute("PRAGMA table_info(stage_cache)")}


class KeyLocks:
    """An asyncio lock per (event loop, key), dropped when no task holds or waits for it: the map stays as
    small as the requests in flight, and callers on different loops never share a lock. Safe to use
    from several threads (each with its own loop)."""

    def __init__(self) -> None:
        self._locks: dict[tuple[int, Any], tuple[asyncio.Lock, int]] = {}  # slot -> (lock, users)
        self._guard = threading.Lock()

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)

    @asynccontextmanager
    async def claim(self, key: Any) -> AsyncIterator[None]:
        """Hold `key`'s lock on the running loop."""
        slot = (id(asyncio.get_running_loop()), key)
        with self._guard:
            lock, users = self._locks.get(slot, (asyncio.Lock(), 0))
            self._locks[slot] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[slot]
                if users <= 1:
                    del self._locks[slot]
                else:
                    self._locks[slot] = (lock, users - 1)


MEMORY_ENTRIES = 20_000
"""Entries an in-memory StageCache keeps: a few MB of JSON outputs. Without a bound, a long-lived process
with an injected chat model (training with `reward: agent`, a notebook) would keep every stage output of
every clip it ever scored, and training clips are never scored twice."""


class StageCache:
    """Key -> JSON string store: SQLite at `path`, or a dict of the `memory_entries` most recently used
    entries when `path` is None (an in-memory SQLite database would make every lookup release and re-take
    the GIL on the event loop, which under 16 concurrent runs cost ~5 ms of loop time per run)."""

    def __init__(self, path: str | Path | None = None, *, memory_entries: int = MEMORY_ENTRIES) -> None:
        if memory_entries < 1:
            raise ValueError(f"StageCache: memory_entries must be >= 1, got {memory_entries}")
        self.path = None if path is None else Path(path)
        self.memory_entries = memory_entries
        self._mem: OrderedDict[str, str] = OrderedDict()  # the store when there is no path
        self._conn: sqlite3.Connection | None = None
        if self.path is not None:
            with store_errors(self.path, "stage cache", "RAA_CACHE_PATH, or off"):
                ensure_parent(self.path)
                conn = self._conn = connect_wal(self.path, "stage cache", CACHE_TABLES, isolation_level=None,
                                                timeout=CACHE_WAIT_S)

                def create_table() -> None:  # another process may be creating (or dating) it too
                    conn.execute(_SCHEMA)
                    if not dated(conn):  # a cache written before entries were dated
                        try:
                            conn.execute("ALTER TABLE stage_cache ADD COLUMN created REAL")
                        except sqlite3.OperationalError as exc:
                            if "duplicate column" not in str(exc):
                                raise

                retry_locked(conn, create_table)
        self._lock = threading.Lock()
        self._flights = Flights()
        self.hits = 0
        self.misses = 0
        watch(self)  # own connection and no flights in a forked child (`after_fork`)

    def after_fork(self) -> None:
        """In a forked child: its own connection to the file, fresh lock, no in-flight stage calls of the parent's
        (why: `graph.frame_fork`). Opening takes no lock; one that fails leaves the store in memory."""
        self._lock = threading.Lock()
        self._flights = Flights()
        if self._conn is not None:
            abandon(self._conn)
            try:
                self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None,
                                             timeout=CACHE_WAIT_S)
            except sqlite3.Error:
                self._conn = None

    def get(self, key: str) -> str | None:
        """The stored value for `key`, or None."""
        with self._lock:
            if self._conn is None:
                value = self._mem.get(key)
                if value is not None:
                    self._mem.move_to_end(key)
            else:
                try:
                    row = self._conn.execute("SELECT value FROM stage_cache WHERE key = ?", (key,)).fetchone()
                except sqlite3.Error:  # `lookup` asks the stage: a miss
                    self.misses += 1
                    raise
                value = None if row is None else str(row[0])
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
            return value

    def count_undecodable(self) -> None:
        """Count the entry `get` just returned as a miss, not a hit: it did not decode (`lookup`), so the
        stage was asked again."""
        with self._lock:
            self.hits -= 1
            self.misses += 1

    def put(self, key: str, value: str) -> None:
        """Store (or replace) `value` under `key`."""
        with self._lock:
            if self._conn is None:
                self._mem[key] = value
                self._mem.move_to_end(key)
                if len(self._mem) > self.memory_entries:
                    self._mem.popitem(last=False)
            else:
                self._conn.execute("INSERT OR REPLACE INTO stage_cache (key, value, created) VALUES (?, ?, ?)",
                                   (key, value, time.time()))

    async def aget(self, key: str) -> str | None:
        """`get` from async code: the SQLite read in a worker thread (the event loop never blocks on the file)."""
        if self._conn is None:
            return self.get(key)
        return await run_blocking(self.get, key, lane="io")

    async def aput(self, key: str, value: str) -> None:
        """`put` from async code: the SQLite write in a worker thread."""
        if self._conn is None:
            self.put(key, value)
            return
        await run_blocking(self.put, key, value, lane="io")

    def __len__(self) -> int:
        with self._lock:
            if self._conn is None:
                return len(self._mem)
            return int(self._conn.execute("SELECT COUNT(*) FROM stage_cache").fetchone()[0])

    async def share(self, key: str, compute: Callable[[], Awaitable[M]]) -> tuple[M, bool]:
        """(output, shared): `compute()` run once for the concurrent identical stage calls of `key` on the
        running loop (`graph.flights.Flights.run`; its waiters raise `graph.flights.FlightFailed`). A
        waiter's output is a deep copy: each run owns its output, as when each read it from the cache."""
        out, shared = await self._flights.run(key, compute)
        return (out.model_copy(deep=True) if shared else out), shared

    def close(self) -> None:
        """Close the SQLite connection (an in-memory cache has nothing to release)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
