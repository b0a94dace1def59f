"""The HTTP reward service (`raa serve-reward`): protocol, bad items, limits, clips and traces (the trainer against
it: test_train_reward_service.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from graph_scripts import full_script, garbage_file, moving_square, uniform_clip
from langgraph.checkpoint.memory import InMemorySaver
from service_helpers import serve
from typer.testing import CliRunner

from graph.cli import app as cli_app
from graph.reward_service import create_reward_app

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _agent(saver=None):
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.testing import ScriptedChatModel

    return build_reward_agent(AgentConfig(preset="decomposed"), model=ScriptedChatModel(full_script()),
                              tools=AgentTools(), checkpointer=saver or InMemorySaver())


def _b64(path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


@pytest.fixture()
def client():
    saver = InMemorySaver()
    app = create_reward_app(_agent(saver), "decomposed", token=TOKEN, max_concurrency=4, max_items=5,
                            max_body_mb=2.0, info={"model": "scripted"})
    with TestClient(app) as c:
        c.saver = saver
        yield c


def test_scores_items_in_order_and_bad_items_get_their_own_reason(client, tmp_path):
    good = _b64(moving_square(tmp_path / "a.mp4"))
    items = [{"video_b64": good, "instruction": "push the red block to the right", "fps": 16.0},
             {"video_b64": "not base64!!", "instruction": "x"},
             {"video_b64": good, "instruction": 7},
             {"instruction": "no video"},
             {"video_b64": _b64(garbage_file(tmp_path / "g.mp4")), "instruction": "x"},
             ]
    res = client.post("/v1/score", json={"items": items, "meta": {"iteration": 3}}, headers=AUTH)
    assert res.status_code == 200, res.text
    results = res.json()["results"]
    assert [r["status"] for r in results] == ["scored"] + ["ineligible"] * 4
    assert results[0]["reward"] == pytest.approx(0.975) and results[0]["preset"] == "decomposed"
    assert all(r["reward"] is None for r in results[1:])
    assert "item 1: video_b64 is not valid base64" in results[1]["reasons"][0]
    assert "item 2: instruction must be a string" in results[2]["reasons"][0]
    assert "item 3: video_b64 is missing" in results[3]["reasons"][0]
    assert any("video" in r for r in results[4]["reasons"])  # undecodable: the agent's own video fault
    assert [r["kind"] for r in results] == [None, "error", "error", "error", None]  # the service's, the agent's
    trace = client.saver.get_tuple({"configurable": {"thread_id": results[0]["run_id"], "checkpoint_ns": ""}})
    assert trace is not None  # the run id in the answer names a trace on the service host


def test_auth_limits_and_malformed_requests(client):
    assert client.get("/healthz").json() == {"status": "ok"}  # open
    assert client.get("/v1/info").status_code == 401
    info = client.get("/v1/info", headers=AUTH).json()
    assert info["preset"] == "decomposed" and info["model"] == "scripted" and info["max_items"] == 5
    assert client.post("/v1/score", json={"items": []}).status_code == 401
    assert client.post("/v1/score", json={"items": []}, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.post("/v1/score", json={"items": []}, headers=AUTH).json() == {"results": []}
    res = client.post("/v1/score", content=b"{not json", headers=AUTH)
    assert res.status_code == 400 and "not JSON" in res.json()["detail"]
    res = client.post("/v1/score", json={"clips": []}, headers=AUTH)
    assert res.status_code == 400 and "'items' list" in res.json()["detail"]
    res = client.post("/v1/score", json={"items": [{}] * 6}, headers=AUTH)
    assert res.status_code == 400 and "limit is 5" in res.json()["detail"]
    res = client.post("/v1/score", content=b"x" * (3 * 1024 * 1024), headers=AUTH)
    assert res.status_code == 413


def test_deeply_nested_json_is_a_400_not_a_500(client):
    """json.loads raised RecursionError for a body nested past the parser's depth: a 500. (5000 levels: within the
    bound on a request's JSON values, which refuses 100000 before parsing, test_reward_service_json.py.)"""
    for body in (b"[" * 5000, b'{"items": ' + b"[" * 5000 + b"]" * 5000 + b"}"):
        res = client.post("/v1/score", content=body, headers=AUTH)
        assert res.status_code == 400 and "nested too deeply" in res.json()["detail"], res.text
    assert client.post("/v1/score", content=b"[" * 100000, headers=AUTH).status_code == 413


@pytest.mark.parametrize("bound", [1.5, True])
def test_a_run_bound_that_is_not_an_int_is_refused(bound):
    """A float `max_concurrency` made the service's semaphore one that never blocks (asyncio's waits only at exactly
    0): every run of every request went at once, against the backbone."""
    with pytest.raises(ValueError, match="max_concurrency must be an int"):
        create_reward_app(object(), "full", max_concurrency=bound)


def test_runs_in_flight_are_capped_over_all_requests(monkeypatch, tmp_path):
    import graph.reward_service

    live, peak = [0], [0]

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        from graph.schemas import RewardResult

        live[0] += 1
        peak[0] = max(peak[0], live[0])
        await asyncio.sleep(0.05)
        live[0] -= 1
        return RewardResult(status="scored", reward=0.5, run_id=run_id, preset=preset)

    monkeypatch.setattr(graph.reward_service, "arun_agent", fake_run)
    app = create_reward_app(object(), "full", max_concurrency=2)
    item = {"video_b64": base64.b64encode(b"bytes").decode(), "instruction": "x"}
    with serve(app) as url:
        import httpx

        def post() -> None:
            assert httpx.post(f"{url}/v1/score", json={"items": [item] * 3}, timeout=30).status_code == 200

        threads = [threading.Thread(target=post) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert peak[0] == 2  # six runs from two requests, never more than two at once


def _three_items_with_the_middle_failing(monkeypatch, fake_run) -> list[dict]:
    """POST three items to a service whose runs are `fake_run` (each scores 0.5); the results, after checking
    the request answered 200 and only the middle item (index 1) lost its reward."""
    import graph.reward_service

    monkeypatch.setattr(graph.reward_service, "arun_agent", fake_run)
    item = {"video_b64": base64.b64encode(b"bytes").decode(), "instruction": "x"}
    with TestClient(create_reward_app(object(), "full"), raise_server_exceptions=False) as c:
        res = c.post("/v1/score", json={"items": [item] * 3})
    assert res.status_code == 200, res.text
    results = res.json()["results"]
    assert [r["reward"] for r in results] == [0.5, None, 0.5]
    return results


def test_a_clip_that_cannot_be_written_is_its_items_own_reason(monkeypatch):
    """An OSError writing one item's clip (a full disk: `--keep-videos` keeps every request's clips) failed
    the whole request with a bare 500, while the other items' runs went on for nobody."""
    import errno
    import pathlib

    from graph.schemas import RewardResult

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        return RewardResult(status="scored", reward=0.5, run_id=run_id, preset=preset)

    real_write = pathlib.Path.write_bytes

    def write_bytes(self, data):
        if self.name == "00001.mp4":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", write_bytes)
    results = _three_items_with_the_middle_failing(monkeypatch, fake_run)
    assert "item 1: the clip cannot be written on the service host: [Errno 28] No space" in results[1]["reasons"][0]


def test_cli_needs_an_endpoint_and_a_known_preset(monkeypatch, tmp_path):
    import uvicorn

    from tools.service_http import SERVER_KEEPALIVE_S

    runner = CliRunner()
    for name in ("RAA_BASE_URL", "RAA_MODEL", "RAA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    res = runner.invoke(cli_app, ["serve-reward"])
    assert res.exit_code == 2 and "RAA_BASE_URL" in res.output
    monkeypatch.setenv("RAA_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAA_MODEL", "m")
    monkeypatch.setenv("RAA_API_KEY", "EMPTY")
    monkeypatch.setenv("RAA_INSPECT_MODE", "plan")
    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite"))
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    res = runner.invoke(cli_app, ["serve-reward", "--preset", "fulll"])
    assert res.exit_code == 2 and "fulll" in res.output
    monkeypatch.setenv("RAA_ENDPOINT_WAIT_S", "0")  # nothing listens at the url: skip the pre-flight
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, log_level, **kw: seen.update(app=app, host=host, port=port, **kw))
    import graph.builder

    stores = []
    real_store = graph.builder.frame_store_for
    monkeypatch.setattr(graph.builder, "frame_store_for", lambda settings: stores.append(real_store(settings)) or stores[-1])
    # a preset whose tool cannot load would answer every request with ineligible rewards: refused at start
    monkeypatch.setenv("RAA_VJEPA_MODEL", str(tmp_path / "no-vjepa"))
    res = runner.invoke(cli_app, ["serve-reward", "--preset", "no_audit"])
    assert res.exit_code == 2 and "surprise tool load failure" in res.output and not seen
    res = runner.invoke(cli_app, ["serve-reward", "--preset", "no_wmreward", "--port", "9123", "--token", TOKEN])
    assert res.exit_code == 0, res.output
    assert (seen["host"], seen["port"]) == ("127.0.0.1", 9123)
    assert seen["timeout_keep_alive"] == SERVER_KEEPALIVE_S  # longer than the clients keep a connection idle
    flat = {"video_b64": _b64(uniform_clip(tmp_path / "flat.mp4")), "instruction": "push it"}
    with TestClient(seen["app"]) as c:
        info = c.get("/v1/info", headers=AUTH).json()
        scored = c.post("/v1/score", json={"items": [flat]}, headers=AUTH).json()["results"]  # zeroed: no model call
    assert info["preset"] == "no_wmreward" and info["inspect_mode"] == "plan" and info["model"] == "m"
    assert info["scoring"]["model"] == "m" and info["scoring"]["inspect_mode"] == "plan"  # what trainers record
    assert info["scoring"]["base_url"] == "http://127.0.0.1:9/v1" and "api_key" not in info["scoring"]
    assert scored[0]["status"] == "zero" and len(stores) == 1 and stores[0].nbytes == 0  # the agent's cache, emptied
    assert json.dumps(info)  # plain JSON


def test_a_request_s_deleted_clips_leave_the_frame_cache(tmp_path):
    """Without --keep-videos each request's clips are deleted when it is answered; their decoded frames
    and images go with them (`raa serve-reward` passes the agent's FrameStore). Kept clips stay cached."""
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel

    good = {"video_b64": _b64(moving_square(tmp_path / "a.mp4")), "instruction": "push it"}
    for keep in (None, tmp_path / "kept"):
        frames = FrameStore()
        agent = build_reward_agent(AgentConfig(preset="decomposed"), model=ScriptedChatModel(full_script()),
                                   tools=AgentTools(), checkpointer=InMemorySaver(), frame_store=frames)
        with TestClient(create_reward_app(agent, "decomposed", keep_videos=keep, frames=frames)) as c:
            res = c.post("/v1/score", json={"items": [good, good]})
        assert [r["status"] for r in res.json()["results"]] == ["scored"] * 2
        assert (frames.nbytes == 0) == (keep is None), (keep, frames.nbytes)


def test_kept_clips_stay_where_the_traces_point(tmp_path):
    """--keep-videos: every request's clips stay under DIR/itNNNNNN-*/, the path each trace records, so
    `raa report RUN_ID` on the service host can show a training reward's frames."""
    saver = InMemorySaver()
    app = create_reward_app(_agent(saver), "decomposed", keep_videos=tmp_path / "kept")
    good = _b64(moving_square(tmp_path / "a.mp4"))
    with TestClient(app) as c:
        for iteration in (3, 3):  # two ranks posting for the same iteration get separate folders
            res = c.post("/v1/score", json={"items": [{"video_b64": good, "instruction": "push it"}],
                                            "meta": {"iteration": iteration}})
            run_id = res.json()["results"][0]["run_id"]
            video = saver.get_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}).checkpoint[
                "channel_values"]["video"]
            assert Path(video).is_file() and Path(video).parent.name.startswith("it000003-")
        c.post("/v1/score", json={"items": [{"video_b64": good, "instruction": "push it"}]})
        c.post("/v1/score", json={"items": [{"video_b64": good, "instruction": "push it"}],
                                  "meta": {"iteration": 3, "phase": "eval"}})
    folders = sorted(p.name.split("-")[0] for p in (tmp_path / "kept").iterdir())
    assert folders == ["eval000003", "it000003", "it000003", "request"]


def test_an_iteration_out_of_range_names_a_plain_request_folder(tmp_path):
    """meta.iteration 10**300 made a folder name too long for the filesystem (a 500 for the whole batch) and -5
    an odd `it-00005-`."""
    app = create_reward_app(_agent(), "decomposed", keep_videos=tmp_path / "kept")
    good = _b64(moving_square(tmp_path / "a.mp4"))
    with TestClient(app, raise_server_exceptions=False) as c:
        for iteration in (10**300, -5, 10**9):
            res = c.post("/v1/score", json={"items": [{"video_b64": good, "instruction": "push it"}],
                                            "meta": {"iteration": iteration}})
            assert res.status_code == 200 and res.json()["results"][0]["status"] == "scored", res.text
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "kept").iterdir()) == ["request"] * 3


def test_kept_clips_have_absolute_paths_in_the_traces(tmp_path, monkeypatch):
    """A relative --keep-videos put relative clip paths in the traces: `raa report` from another folder found
    no frames."""
    saver = InMemorySaver()
    monkeypatch.chdir(tmp_path)
    app = create_reward_app(_agent(saver), "decomposed", keep_videos="kept")
    with TestClient(app) as c:
        res = c.post("/v1/score", json={"items": [{"video_b64": _b64(moving_square(tmp_path / "a.mp4")),
                                                   "instruction": "push it"}]})
    run_id = res.json()["results"][0]["run_id"]
    video = saver.get_tuple({"configurable": {"thread_id": run_id}}).checkpoint["channel_values"]["video"]
    assert Path(video).is_absolute() and Path(video).parent.parent == tmp_path / "kept"


def test_a_non_ascii_token_is_refused_at_the_edge_without_echoing_it(tmp_path, monkeypatch):
    """The tool service's rule for the reward service: a token like "pässwort" could never be sent by
    httpx, and the server would accept only its latin-1 bytes."""
    from typer.testing import CliRunner

    from graph.cli import app

    with pytest.raises(ValueError, match="the reward service token must be printable ASCII"):
        create_reward_app(object(), "full", token="pässwort")
    started = []
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: started.append(a))
    res = CliRunner().invoke(app, ["serve-reward", "--preset", "no_wmreward"],
                             env={"RAA_REWARD_TOKEN": "pässwort", "RAA_TRACES_PATH": str(tmp_path / "t.sqlite")})
    assert res.exit_code == 2 and not started and "printable ASCII" in res.output, res.output
    assert "pässwort" not in res.output


def test_an_item_whose_run_raises_gets_its_own_reason_and_the_others_their_results(monkeypatch):
    """An error escaping one item's run (`arun_agent` should never raise, but an escaped bug, a MemoryError on a
    huge clip) made the whole request a 500: the other items' results were dropped while their runs went on."""
    from graph.schemas import RewardResult

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        if video.endswith("00001.mp4"):
            raise RuntimeError("escaped from the graph")
        return RewardResult(status="scored", reward=0.5, run_id=run_id, preset=preset)

    results = _three_items_with_the_middle_failing(monkeypatch, fake_run)
    assert results[1]["status"] == "ineligible" and results[1]["preset"] == "full"
    assert results[1]["reasons"] == ["agent: internal: item 1: the run failed on the service host (RuntimeError: "
                                     "escaped from the graph)"]  # its fault's reason (`graph.run_results.machinery_failed`)


def test_a_clip_folder_the_service_cannot_make_is_a_named_507(tmp_path):
    """An unwritable --keep-videos (or a full disk) was a bare 500 with no message."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    app = create_reward_app(_agent(), "decomposed", keep_videos=blocker / "kept")
    good = _b64(moving_square(tmp_path / "a.mp4"))
    with TestClient(app, raise_server_exceptions=False) as c:
        res = c.post("/v1/score", json={"items": [{"video_b64": good, "instruction": "push it"}]})
    assert res.status_code == 507 and "cannot make a folder" in res.text, res.text


def test_the_trainer_counts_an_item_the_service_failed_on_as_an_error_not_the_agents_verdict(monkeypatch):
    """A clip the service could not write or a run that raised came back as a null reward like the agent's own ⊥,
    so the trainer counted a service outage as ineligible_none; the result now says "kind": "error"."""
    import pathlib

    import graph.reward_service
    from graph.run_results import ineligible_result
    from graph.schemas import RewardResult
    from training.rewards import HttpAgentReward, call_reward

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        if video.endswith("00001.mp4"):
            raise RuntimeError("escaped from the graph")
        if video.endswith("00002.mp4"):
            return ineligible_result(preset, "unverifiable: the gripper is out of view", run_id)
        return RewardResult(status="scored", reward=0.5, run_id=run_id, preset=preset)

    real_write = pathlib.Path.write_bytes

    def write_bytes(self, data):
        if self.name == "00003.mp4":
            raise OSError(28, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(graph.reward_service, "arun_agent", fake_run)
    monkeypatch.setattr(pathlib.Path, "write_bytes", write_bytes)
    fn = HttpAgentReward(url="http://svc/v1/score", startup_wait_s=0)
    with TestClient(create_reward_app(object(), "full"), raise_server_exceptions=False) as c:
        fn._post = lambda url, body: c.post("/v1/score", content=body).json()  # noqa: SLF001 (the transport)
        clips = [np.zeros((3, 8, 8, 3), dtype=np.uint8) for _ in range(4)]
        out = call_reward(fn, "http", clips, ["x"] * 4)
    assert out.rewards == [0.5, None, None, None]
    assert out.kinds == [None, "error", "none", "error"]
    assert out.counts == {"none": 1, "nan": 0, "inf": 0, "error": 2}
    assert "the run failed on the service host" in out.reasons[1] and "out of view" in out.reasons[2]


def test_cli_and_app_share_the_named_limit_defaults():
    """`raa serve-reward`'s --concurrency, --max-items and --max-body-mb defaults and create_reward_app's were
    the same numbers written twice (16, 1024, 2048.0): a change to one side left the other behind. Both read
    graph/reward_limits.py now."""
    import inspect

    from graph import reward_limits
    from graph.serve_command import serve_reward_command

    app_defaults = inspect.signature(create_reward_app).parameters
    cli_defaults = inspect.signature(serve_reward_command).parameters
    expected = {"concurrency": reward_limits.DEFAULT_MAX_CONCURRENCY, "max_items": reward_limits.DEFAULT_MAX_ITEMS,
                "max_body_mb": reward_limits.DEFAULT_MAX_BODY_MB}
    assert expected == {"concurrency": 16, "max_items": 1024, "max_body_mb": 2048.0}  # the documented values
    for cli_name, value in expected.items():
        assert cli_defaults[cli_name].default == value
        assert app_defaults["max_concurrency" if cli_name == "concurrency" else cli_name].default == value


def test_the_service_scores_without_its_lifespan(tmp_path):
    # TestClient(app) without `with` (or a server with lifespan off) never ran the startup: every item failed
    # with "KeyError: 'runs'" (the run slots were made there); they are now made on the first request
    app = create_reward_app(_agent(), "decomposed", max_concurrency=2)
    client = TestClient(app)
    item = {"video_b64": _b64(moving_square(tmp_path / "a.mp4")), "instruction": "push the red block to the right"}
    for _ in range(2):  # each request of a TestClient without `with` runs on its own event loop
        res = client.post("/v1/score", json={"items": [item, item, item]})
        assert res.status_code == 200, res.text
        assert [r["status"] for r in res.json()["results"]] == ["scored"] * 3, res.json()
