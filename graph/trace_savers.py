"""Opening the trace database (DESIGN.md §3 "Tracing"): the checkpointers an agent writes its runs with and the
read-only one the commands read them with. Reading runs back is `graph.tracing`.

Decisions where the issue was silent (moved here from graph/tracing.py with the code):
- `open_saver` builds the SqliteSaver with a serializer that allow-lists the pydantic records of graph.schemas and
  graph.inspection_schemas (LangGraph warns about, and will later block, unlisted types in checkpoints), and that
  keeps file names that are not UTF-8 (`graph.trace_names`; they were stored as "?").
- The commands that only read traces (`raa runs`, `raa trace`, `raa report`, `raa prune --dry-run`) open the file
  with `open_saver(read_only=True)`: SqliteSaver's setup switches the file to WAL and migrates its tables, so they
  could not read a teammate's runs/ on a shared folder they cannot write, a read-only mount, or a rollback-journal
  database there. Such a file is read with SQLite's `mode=ro`, or as immutable when SQLite needs to write its WAL
  index for that (`graph.stores.connect_read_only`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import BaseModel

from graph.frame_fork import abandon, watch
from graph.stores import (
    TABLES_SQL,
    TRACE_TABLES,
    TRACE_WAIT_S,
    aretry_locked,
    check_tables,
    closed_on_error,
    connect_read_only,
    ensure_parent,
    refuse_other_database,
    retry_locked,
    store_errors,
)
from graph.trace_names import SurrogateSafeSerializer


def traces_serde() -> JsonPlusSerializer:
    """Checkpoint serializer allowing the agent's pydantic records (graph.schemas and the modules it re-exports
    records of, `graph.schemas.RECORD_MODULES`) to round-trip. A record moved out of graph.schemas is also allowed
    under its old path there, where it is still importable: checkpoints written before the move name it so."""
    from graph import schemas  # deferred: graph-core module, imported only when a saver is opened

    records = [obj for obj in vars(schemas).values()
               if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ in schemas.RECORD_MODULES]
    moved = [(schemas.__name__, obj.__name__) for obj in records if obj.__module__ != schemas.__name__]
    return SurrogateSafeSerializer(allowed_msgpack_modules=[*records, *moved])  # non-UTF-8 file names round-trip


def open_saver(path: str | Path | None, *, read_only: bool = False) -> SqliteSaver:
    """A SqliteSaver on `path` (None or ":memory:" -> in-memory); creates the parent folder. `read_only`
    (`raa runs`, `raa trace`, `raa report`): the saver only reads an existing file (see module docstring). An
    agent may run with it as checkpointer, sync or async (`ThreadedAsyncSaver`)."""
    target = ":memory:" if path in (None, ":memory:") else str(path)
    if read_only and target != ":memory:":
        return _open_reader(target)
    with store_errors(target, "trace database", "RAA_TRACES_PATH"):
        ensure_parent(target)
        with closed_on_error(sqlite3.connect(target, check_same_thread=False, timeout=TRACE_WAIT_S)) as conn:
            refuse_other_database(conn, "trace database", TRACE_TABLES)  # before setup switches it to WAL
            saver = _TraceSaver(conn, serde=traces_serde())
            retry_locked(conn, saver.setup)  # another process may be setting up the same new file
    if target != ":memory:":  # an in-memory database cannot be opened again: the child's copy is its own
        saver.reopen = lambda: sqlite3.connect(target, check_same_thread=False, timeout=TRACE_WAIT_S)
        watch(saver)
    return saver


class ThreadedAsyncSaver(SqliteSaver):
    """A SqliteSaver usable from async code (`ainvoke`, `score_video`, `ascore_videos`): its reads and writes run
    in a worker thread. SqliteSaver's own async methods raise NotImplementedError, so every run of an agent
    given `open_saver(path)` as checkpointer was ineligible. In a thread, a write that waits (up to SQLite's busy
    timeout) while another process writes the file does not stall the event loop every run shares."""

    async def aget_tuple(self, config):  # type: ignore[override]
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config, *, filter=None, before=None, limit=None):  # type: ignore[override]
        items = await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        return await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id):  # type: ignore[override]
        return await asyncio.to_thread(self.delete_thread, thread_id)


class _TraceSaver(ThreadedAsyncSaver):
    """A SqliteSaver that opens its own connection in a forked child (`graph.frame_fork`)."""

    reopen: Callable[[], sqlite3.Connection] | None = None
    """A new connection to the saver's file; None for an in-memory database."""

    def after_fork(self) -> None:
        """In a forked child: fresh lock, and its own connection (the inherited one is never used nor closed).
        Opening takes no lock; one that fails leaves the inherited one (the child's trace writes may fail)."""
        self.lock = threading.Lock()
        if self.reopen is not None:
            try:
                conn = self.reopen()
            except sqlite3.Error:
                return
            abandon(self.conn)
            self.conn = conn


class ReadingSaver(_TraceSaver):
    """A SqliteSaver on a read-only connection whose setup writes nothing: SqliteSaver's own switches the
    file to WAL and adds a column, which a file this process may not write refused. An SQLite error while it
    reads (damaged data pages, which opening the file does not touch) is a StoreError naming the file."""

    path = ""
    """The file read (for the StoreError)."""

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        with store_errors(self.path, "trace database", "RAA_TRACES_PATH", read_only=True), \
                super().cursor(transaction) as cur:
            yield cur

    def setup(self) -> None:
        if not self.is_setup:
            columns = {row[1] for row in self.conn.execute("PRAGMA table_info(writes)")}
            self._has_task_path = "task_path" in columns
            self.is_setup = True


def _open_reader(target: str) -> SqliteSaver:
    with store_errors(target, "trace database", "RAA_TRACES_PATH", read_only=True):
        conn = connect_read_only(target, "trace database", TRACE_TABLES)
        if not TRACE_TABLES <= {row[0] for row in conn.execute(TABLES_SQL)}:  # an empty file: no runs
            conn.close()
            return open_saver(None)
        saver = ReadingSaver(conn, serde=traces_serde())
        saver.path = target
        saver.setup()
    saver.reopen = lambda: connect_read_only(target, "trace database", TRACE_TABLES)
    watch(saver)
    return saver


@asynccontextmanager
async def open_async_saver(path: str | Path) -> AsyncIterator[AsyncSqliteSaver]:
    """An AsyncSqliteSaver on `path` for concurrent runs (`ascore_videos`)."""
    import aiosqlite  # dependency of langgraph-checkpoint-sqlite

    with store_errors(path, "trace database", "RAA_TRACES_PATH"):
        ensure_parent(path)
        conn = await aiosqlite.connect(str(path), timeout=TRACE_WAIT_S)
        try:
            check_tables([r[0] for r in await (await conn.execute(TABLES_SQL)).fetchall()], "trace database",
                         TRACE_TABLES)
            saver = AsyncSqliteSaver(conn, serde=traces_serde())
            await aretry_locked(conn, saver.setup)  # another process may be setting up the same new file
        except BaseException:
            await conn.close()
            raise
    try:
        yield saver
    finally:
        await conn.close()
