"""A child forked while an agent's stores are open (a script that scores, then maps clips over a fork pool)
opens its own SQLite connections (SQLite connections must not be used across fork) and starts without the
parent's in-flight stage calls and run ids. Each scenario runs in a fresh interpreter under
`tests.launches.launch`, so a regression fails instead of hanging the suite: past its deadline the scenario and
its forked child are killed (``subprocess.run(timeout=...)`` killed the scenario alone, and a hung child held the
output pipe ``run`` then read to its end, for ever). The forked child ends by SIGALRM when it hangs, and always
with ``os._exit``."""

from __future__ import annotations

import sys
import textwrap

from tests.launches import launch

SCENARIO = textwrap.dedent("""
    import asyncio, os, signal, sys, traceback
    from graph import api, frame_fork
    from graph.cache import StageCache
    from graph.tracing import open_saver

    folder = sys.argv[1]
    cache = StageCache(folder + "/cache.sqlite")
    saver = open_saver(folder + "/traces.sqlite")
    conns = (cache._conn, saver.conn)

    async def main():
        started, release = asyncio.Event(), asyncio.Event()

        async def compute():
            started.set()
            await release.wait()
            return 1

        task = asyncio.create_task(cache._flights.run("k", compute))
        await started.wait()
        frame_fork.watch(api._RUNNING)  # as the first run does
        with api._RUNNING.lock:
            api._RUNNING.ids.add((id(saver), "r1"))
        pid = os.fork()
        if pid == 0:  # ends with os._exit whatever happens: an exception went on to run the parent's code
            signal.alarm(20)  # a hung child (an inherited lock) ends by SIGALRM; the parent waits for it
            try:
                problems = []
                if len(cache._flights):
                    problems.append("inherited flights")
                if cache._conn is conns[0] or saver.conn is conns[1]:
                    problems.append("inherited connection")
                if api._RUNNING.ids:
                    problems.append("inherited running ids")
                cache.put("a", "b")
                if cache.get("a") != "b" or saver.conn.execute("SELECT 1").fetchone() != (1,):
                    problems.append("no working connection")
                print(problems, flush=True)
                os._exit(0 if not problems else 3)
            except BaseException:
                traceback.print_exc()
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        release.set()
        await task
        assert cache.get("a") == "b" and len(cache._flights) == 0  # the parent's own store goes on
        return os.waitstatus_to_exitcode(status)

    sys.exit(asyncio.run(main()))
""")


def test_a_forked_child_opens_its_own_stores_and_forgets_the_parents_flights(tmp_path):
    proc = launch([sys.executable, "-W", "ignore", "-c", SCENARIO, str(tmp_path)], timeout=60,
                  what="the store fork scenario")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_importing_the_agent_registers_no_fork_hook():
    """No module-level work at import: the fork hooks are registered with the first store, pool or run."""
    code = ("import os\nours = []\n"
            "os.register_at_fork = lambda **kw: ours.extend(m for f in kw.values() "
            "if (m := str(getattr(f, '__module__', ''))).split('.')[0] in ('graph', 'tools'))\n"
            "import graph.api, graph.builder, graph.cache, graph.tracing, graph.workers, graph.frame_store\n"
            "print(ours)")
    done = launch([sys.executable, "-c", code], timeout=120, what="the import")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
