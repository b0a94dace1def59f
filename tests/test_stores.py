"""A trace database or stage cache that cannot be used is a StoreError naming the file and its setting:
from the library, one error line and exit 2 from the CLI, and a training run stops at start."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from graph.builder import default_checkpointer
from graph.cache import StageCache
from graph.cli import app
from graph.settings import BackboneSettings
from graph.stores import StoreError
from graph.tracing import open_async_saver, open_saver
from tests.test_cli_agent import _env


@pytest.fixture
def not_a_database(tmp_path) -> Path:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this file is not a SQLite database, whatever its name says" * 4)
    return path


@pytest.fixture
def under_a_file(tmp_path) -> Path:
    (tmp_path / "plain.txt").write_text("x")
    return tmp_path / "plain.txt" / "traces.sqlite"


def test_library_openers_name_the_file_and_the_setting(not_a_database, under_a_file):
    for bad in (not_a_database, under_a_file):
        with pytest.raises(StoreError, match=rf"stage cache {bad}.*RAA_CACHE_PATH, or off"):
            StageCache(bad)
        with pytest.raises(StoreError, match=rf"trace database {bad}.*RAA_TRACES_PATH"):
            default_checkpointer(bad)
        with pytest.raises(StoreError, match=rf"trace database {bad}"):
            open_saver(bad)

        async def enter(path: Path = bad) -> None:
            async with open_async_saver(path):
                pass

        with pytest.raises(StoreError, match=rf"trace database {bad}"):
            asyncio.run(enter())
    with pytest.raises(StoreError, match="not a database"):
        StageCache(not_a_database)


def test_a_usable_path_still_opens(tmp_path):
    cache = StageCache(tmp_path / "deep" / "cache.sqlite")  # folders are created
    cache.put("k", "v")
    assert cache.get("k") == "v"
    cache.close()

    async def enter() -> None:
        async with open_async_saver(tmp_path / "other" / "traces.sqlite") as saver:
            assert saver is not None

    asyncio.run(enter())


@pytest.mark.parametrize("var", ["RAA_TRACES_PATH", "RAA_CACHE_PATH"])
def test_cli_prints_one_error_line_and_exits_2(var, not_a_database, tmp_path, monkeypatch, capsys):
    _env(monkeypatch, tmp_path)
    monkeypatch.setenv(var, str(not_a_database))
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"never read")
    with pytest.raises(SystemExit) as info:
        app(["score", str(clip), "-i", "push the block", "--preset", "no_wmreward"], prog_name="raa")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(not_a_database) in err and var in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_runs_listing_with_a_bad_trace_database(not_a_database, tmp_path, monkeypatch, capsys):
    _env(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_TRACES_PATH", str(not_a_database))
    with pytest.raises(SystemExit) as info:
        app(["runs"], prog_name="raa")
    assert info.value.code == 2 and "trace database" in capsys.readouterr().err


def test_training_agent_reward_opens_its_files_when_built(not_a_database, tmp_path):
    """Built lazily, the agent met its trace database at the first reward call, and an exception there only
    makes that batch ineligible: the run went on without ever updating. It is built with the reward now."""
    from training.rewards import build_reward

    settings = BackboneSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="EMPTY",
                                traces_path=str(not_a_database), cache_path=None)
    with pytest.raises(StoreError, match="trace database"):
        build_reward("agent", {"preset": "decomposed"}, agent_settings=settings)
    ok = replace(settings, traces_path=str(tmp_path / "t.sqlite"))
    reward = build_reward("agent", {"preset": "decomposed"}, agent_settings=ok)
    assert reward.agent() is reward.agent()  # built once, with the reward


def test_training_agent_reward_loads_its_tools_when_built(tmp_path):
    """A V-JEPA 2 path or a CoTracker3 checkpoint that cannot load made every reward of a run ineligible
    (the tools loaded at the first reward call); build_reward loads what the preset uses, at start."""
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox
    from training.rewards import build_reward

    settings = BackboneSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="EMPTY",
                                traces_path=str(tmp_path / "t.sqlite"), cache_path=None)
    missing = Toolbox(ToolSettings(vjepa_model=str(tmp_path / "no-such-vjepa")))
    with pytest.raises(ValueError, match="preset full.*the surprise tool cannot load"):
        build_reward("agent", {"preset": "full"}, agent_settings=settings, agent_tools=missing)
    assert build_reward("agent", {"preset": "no_wmreward"}, agent_settings=settings, agent_tools=missing)
    no_checkpoint = Toolbox(ToolSettings(motion_backend="cotracker3"))
    with pytest.raises(ValueError, match="the motion tool cannot load.*RAA_COTRACKER_CHECKPOINT"):
        build_reward("agent", {"preset": "motion"}, agent_settings=settings, agent_tools=no_checkpoint)
    assert build_reward("agent", {"preset": "decomposed"}, agent_settings=settings, agent_tools=no_checkpoint)


def test_many_openers_of_one_new_database_all_get_it(tmp_path):
    """Training ranks and score-batch workers open the same new trace database and stage cache together.
    Turning a new file to WAL takes the exclusive lock and the loser got "database is locked" at once
    (SQLite's deadlock avoidance skips the busy timeout): one of two training ranks stopped at start,
    and 8 threads opening 60 new files failed 0-2 times per run on the old code. Now retried."""
    import threading

    failures: list[str] = []

    def open_both(path: Path, barrier: threading.Barrier) -> None:
        barrier.wait()
        try:
            default_checkpointer(path).conn.close()
            StageCache(f"{path}.cache")
        except StoreError as exc:
            failures.append(str(exc))

    for trial in range(40):
        barrier = threading.Barrier(8)
        threads = [threading.Thread(target=open_both, args=(tmp_path / f"t{trial}.sqlite", barrier)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []
    assert StageCache(tmp_path / "t0.sqlite.cache").get("missing") is None


def test_retry_locked_retries_only_a_lock_and_only_for_a_while(tmp_path):
    import sqlite3

    from graph.stores import CACHE_TABLES, connect_wal, retry_locked

    conn = connect_wal(tmp_path / "x.sqlite", "stage cache", CACHE_TABLES)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    calls = []

    def locked_twice() -> None:
        calls.append(1)
        if len(calls) <= 2:
            raise sqlite3.OperationalError("database is locked")

    retry_locked(conn, locked_twice)
    assert len(calls) == 3

    def corrupt() -> None:
        calls.append(1)
        raise sqlite3.OperationalError("file is not a database")

    calls.clear()
    with pytest.raises(sqlite3.OperationalError, match="not a database"):
        retry_locked(conn, corrupt)
    assert len(calls) == 1  # not a lock: no retry

    def always_locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        retry_locked(conn, always_locked, wait_s=0.05)


def test_filesystem_type_picks_the_innermost_mount(tmp_path):
    from graph.stores import filesystem_type

    (tmp_path / "local").mkdir()
    (tmp_path / "my disk").mkdir()
    mounts = (f"/dev/vda / ext4 rw 0 0\nserver:/export {tmp_path} nfs4 rw 0 0\n"
              f"/dev/vdb {tmp_path}/local xfs rw 0 0\n//srv/share {tmp_path}/my\\040disk cifs rw 0 0\n")
    assert filesystem_type(tmp_path / "runs" / "traces.sqlite", mounts) == "nfs4"  # runs/ not made yet
    assert filesystem_type(tmp_path / "local" / "traces.sqlite", mounts) == "xfs"
    assert filesystem_type(tmp_path / "my disk" / "c.sqlite", mounts) == "cifs"
    assert filesystem_type("/definitely/not/here.sqlite", mounts) == "ext4"
    assert filesystem_type(tmp_path, "") is None


def test_a_store_on_a_network_filesystem_warns_once(tmp_path, monkeypatch):
    import warnings

    import graph.stores as stores
    from graph.cache import StageCache

    monkeypatch.setattr(stores, "filesystem_type", lambda path, mounts=None: "lustre")
    assert stores.network_fs_warning(":memory:", "stage cache", "RAA_CACHE_PATH") is None
    path = tmp_path / "cache.sqlite"
    with pytest.warns(stores.StoreWarning, match=r"stage cache .* is on a network filesystem \(lustre\).*RAA_CACHE_PATH"):
        StageCache(path).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StageCache(path).close()  # once per path
    monkeypatch.setattr(stores, "filesystem_type", lambda path, mounts=None: "ext4")
    assert stores.network_fs_warning(tmp_path / "t.sqlite", "trace database", "RAA_TRACES_PATH") is None


def test_another_database_is_refused_instead_of_filled(tmp_path):
    """The stage cache given as the trace database (or the other way round) got the other store's tables."""
    import asyncio

    from graph.builder import default_checkpointer
    from graph.cache import StageCache
    from graph.stores import StoreError
    from graph.tracing import open_async_saver, open_saver

    cache_file = tmp_path / "cache.sqlite"
    StageCache(cache_file).close()
    for opener in (open_saver, default_checkpointer):
        with pytest.raises(StoreError, match=r"holds other tables \(stage_cache\), not a trace database's"):
            opener(cache_file)

    async def enter() -> None:
        async with open_async_saver(cache_file):
            pass

    with pytest.raises(StoreError, match="not a trace database's"):
        asyncio.run(enter())
    traces = tmp_path / "traces.sqlite"
    open_saver(traces).conn.close()
    with pytest.raises(StoreError, match=r"not a stage cache's"):
        StageCache(traces)
    import sqlite3

    tables = {r[0] for r in sqlite3.connect(cache_file).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"stage_cache"}  # nothing was added to it


def test_trace_writers_wait_as_long_as_a_run_id_claim_for_another_process(tmp_path):
    """A run's checkpoint (with durability "exit", its only one, written when the run ends) waited SQLite's
    5 s default while another process held the trace file's write lock (a `raa prune --vacuum`, a burst of
    writers): the finished run came back ineligible with "agent: OperationalError: database is locked", a
    fault of the file and not of the clip, though its run-id claim had waited 30 s for the same lock. Every
    connection that writes runs' checkpoints now waits as long as the claim."""
    from graph.run_claims import WAIT_S

    wanted = int(WAIT_S * 1000)
    saver = default_checkpointer(tmp_path / "sync.sqlite")
    try:
        assert saver.conn.execute("PRAGMA busy_timeout").fetchone()[0] == wanted
    finally:
        saver.conn.close()

    async def async_wait() -> int:
        async with open_async_saver(tmp_path / "async.sqlite") as aio:
            return (await (await aio.conn.execute("PRAGMA busy_timeout")).fetchone())[0]

    assert asyncio.run(async_wait()) == wanted


@pytest.mark.parametrize("opener", ["open_async_saver", "open_saver"])
def test_trace_savers_wait_for_another_process_setting_up_the_same_new_file(tmp_path, opener):
    """`raa score-batch --processes N` workers open one new trace database together with `open_async_saver`.
    While another process held the write lock of the file, not yet in WAL mode (creating its tables), the
    setup got "database is locked" at once (SQLite skips the busy timeout where waiting could deadlock) and
    the worker failed to start; `default_checkpointer` already retried. Now all do (`open_saver`: `raa doctor`
    checking the trace database while a batch starts, `raa prune` deleting runs)."""
    import sqlite3
    import threading

    path = tmp_path / "traces.sqlite"
    other = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE checkpoints (thread_id TEXT)")  # rollback-journal mode, as a new file is
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO checkpoints VALUES ('x')")  # the other process is setting the file up
    done = threading.Event()

    def finish() -> None:
        done.wait(30)
        other.execute("COMMIT")
        other.close()

    async def open_it() -> str:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, done.set)  # the other process finishes while this one waits
        if opener == "open_saver":
            saver = await asyncio.to_thread(open_saver, path)
            try:
                return saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
            finally:
                saver.conn.close()
        async with open_async_saver(path) as aio:
            return (await (await aio.conn.execute("PRAGMA journal_mode")).fetchone())[0]

    finisher = threading.Thread(target=finish)
    finisher.start()
    try:
        assert asyncio.run(open_it()) == "wal"
    finally:
        done.set()
        finisher.join()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_a_foreign_file_is_refused_and_left_as_it_was(tmp_path, journal):
    """Another program's SQLite file given as a store was switched to WAL before it was refused: its journal mode
    changed for good (the header says WAL), and -wal / -shm files were left beside it (the refusing connection
    was not closed)."""
    import os
    import sqlite3

    from graph.retention import stage_cache_entries

    folder = tmp_path / "theirs"
    folder.mkdir()
    foreign = folder / "app.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO accounts (name) VALUES ('a')")
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    assert sorted(os.listdir(folder)) == ["app.sqlite"]

    async def enter() -> None:
        async with open_async_saver(foreign):
            pass

    openers = {"stage cache": StageCache, "checkpointer": default_checkpointer, "saver": open_saver,
               "async saver": lambda path: asyncio.run(enter()),
               "cache entries": lambda path: stage_cache_entries(path, delete=True)}
    for name, opener in openers.items():
        with pytest.raises(StoreError, match="holds other tables"):
            opener(foreign)
        assert sorted(os.listdir(folder)) == ["app.sqlite"], name
        assert foreign.read_bytes() == before, name  # the header's journal mode included
