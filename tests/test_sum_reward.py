"""reward: sum (training/sum_reward.py): checked parts, the weighted sum on hand values, ineligibility
that is never made up, components and usage of the parts, and a smoke run that logs each term."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.launches import launch
from training.rewards import (
    BrightnessReward,
    MotionReward,
    RewardBatch,
    RewardLengthError,
    build_reward,
    call_reward,
)
from training.sum_reward import SumPart, SumReward, parse_parts, used_rewards

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"


def _clips() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 255, (5, 16, 16, 3), dtype=np.uint8), np.full((5, 16, 16, 3), 200, np.uint8)]


@pytest.mark.parametrize(("options", "match"), [
    ({}, "needs reward_options.parts"),
    ({"parts": []}, "needs reward_options.parts"),
    ({"parts": [{"weight": 1.0}]}, "part 0 must be"),
    ({"parts": [{"reward": "motion", "scale": 2}]}, "part 0 must be"),
    ({"parts": [{"reward": "sum"}]}, "part 0 is a sum itself"),
    ({"parts": [{"reward": "motion", "weight": float("nan")}]}, "weight must be a finite number"),
    ({"parts": [{"reward": "motion", "weight": True}]}, "weight must be a finite number"),
    ({"parts": [{"reward": "motion"}, {"reward": "motion"}]}, "part 1 label 'motion' must be a distinct"),
    ({"parts": [{"reward": "motion", "label": "a-b"}]}, "label 'a-b'"),
    ({"parts": [{"reward": "agent", "label": "b"}, {"reward": "motion", "label": "b_T"}]},
     "part 0 label 'b' and part 1 label 'b_T' can log under one name"),
    ({"parts": [{"reward": "motion", "label": "a_b"}, {"reward": "agent", "label": "a"}]},
     "part 0 label 'a_b' and part 1 label 'a' can log under one name"),
    ({"parts": [{"reward": "motion", "options": [1]}]}, "options must be a mapping"),
    ({"parts": [{"reward": "motion"}], "weights": [1]}, "unknown reward_options"),
])
def test_bad_parts_are_named(options, match):
    with pytest.raises(ValueError, match=match):
        parse_parts(options)


def test_a_part_with_bad_options_stops_the_build():
    with pytest.raises(ValueError, match="reward 'sum' part 0 \\(brightnes\\): unknown reward 'brightnes'"):
        build_reward("sum", {"parts": [{"reward": "brightnes"}]})
    with pytest.raises(ValueError, match="part 1 \\(motion\\): reward 'motion': bad reward_options"):
        build_reward("sum", {"parts": [{"reward": "brightness"}, {"reward": "motion", "options": {"colour": 1}}]})


def test_the_weighted_sum_of_its_parts_with_each_term_logged():
    clips = _clips()
    fn = build_reward("sum", {"parts": [{"reward": "brightness", "weight": 1.0},
                                        {"reward": "motion", "weight": -0.5, "label": "moving"}]})
    out = call_reward(fn, "sum", clips, ["a", "b"])
    bright, moving = BrightnessReward()(clips, ["a", "b"]), MotionReward()(clips, ["a", "b"])
    assert out.rewards == pytest.approx([b - 0.5 * m for b, m in zip(bright, moving, strict=True)])
    assert out.components == {"brightness": pytest.approx(bright), "moving": pytest.approx(moving)}


def test_a_clip_missing_a_term_is_ineligible_and_says_which():
    def flaky(videos, prompts, **meta):
        return RewardBatch([0.5, None], [[], ["observe: timeout"]], ["run-a", "run-b"], {"T": [1.0, 0.2]},
                           [{"calls": 3}, {"calls": 4}])

    async def steady(videos, prompts, **meta):
        return [0.25] * len(videos)

    def broken(videos, prompts, **meta):
        raise RuntimeError("disk full")

    fn = SumReward([SumPart("agent", 2.0, flaky, "agent"), SumPart("steady", 1.0, steady, "motion")])
    out = call_reward(fn, "sum", _clips(), ["a", "b"])
    assert out.rewards == [pytest.approx(1.25), None]  # never 0.25 for the clip the agent could not judge
    assert "agent: reward 'agent' returned None (ineligible): observe: timeout" in out.reasons[1]
    assert out.run_ids == ["run-a", "run-b"] and out.usage == {"calls": 7}
    assert out.components == {"agent": [0.5, None], "agent_T": [1.0, None], "steady": [0.25, None]}
    out = call_reward(SumReward([SumPart("steady", 1.0, steady, "motion"), SumPart("disk", 1.0, broken, "motion")]),
                      "sum", _clips(), ["a", "b"])
    assert out.rewards == [None, None] and "disk: reward 'disk' raised RuntimeError: disk full" in out.reasons[0]
    short = SumReward([SumPart("steady", 1.0, steady, "motion"), SumPart("short", 1.0, lambda v, p, **m: [0.1], "x")])
    with pytest.raises(RewardLengthError, match="reward 'short' returned 1 values for 2 videos"):
        call_reward(short, "sum", _clips(), ["a", "b"])


def test_a_sum_built_directly_refuses_labels_that_can_log_under_one_name():
    with pytest.raises(ValueError, match="part 0 label 'b' and part 1 label 'b_T'"):
        SumReward([SumPart("b", 1.0, lambda v, p, **m: [0.0], "agent"), SumPart("b_T", 1.0, lambda v, p, **m: [0.0], "x")])
    with pytest.raises(ValueError, match="must be distinct"):
        SumReward([SumPart("b", 1.0, lambda v, p, **m: [0.0], "x"), SumPart("b", 1.0, lambda v, p, **m: [0.0], "x")])
    assert parse_parts({"parts": [{"reward": "motion", "label": "ab"}, {"reward": "agent", "label": "a"}]})


def test_a_clip_is_counted_under_its_parts_ineligible_kind():
    """ineligible_error / _nan / _inf of a sum come from its parts (all were counted 'none', the agent's verdict)."""
    def verdicts(videos, prompts, **meta):
        return [None, 0.5, 0.5, None]

    def values(videos, prompts, **meta):
        return [0.5, float("nan"), float("inf"), float("nan")]

    def broken(videos, prompts, **meta):
        raise ConnectionError("reward server down")

    clips, texts = _clips() * 2, ["a"] * 4
    out = call_reward(SumReward([SumPart("v", 1.0, verdicts, "agent"), SumPart("x", 1.0, values, "http")]),
                      "sum", clips, texts)
    assert out.rewards == [None] * 4 and out.kinds == ["none", "nan", "inf", "nan"]  # nan outranks a verdict
    assert out.counts == {"none": 1, "nan": 2, "inf": 1, "error": 0}
    out = call_reward(SumReward([SumPart("v", 1.0, verdicts, "agent"), SumPart("down", 1.0, broken, "http")]),
                      "sum", clips, texts)
    assert out.counts == {"none": 0, "nan": 0, "inf": 0, "error": 4}
    with pytest.raises(RewardLengthError, match="kinds must hold"):
        call_reward(lambda v, p, **m: RewardBatch([None, None], [[], []], kinds=["none", "late"]), "x", _clips(), texts[:2])


def test_used_rewards_lists_the_parts():
    assert used_rewards("agent", {}) == {"agent"} and used_rewards(None, {}) == set()
    assert used_rewards("sum", {"parts": [{"reward": "agent"}, {"reward": "motion"}, "junk"]}) == {"agent", "motion"}


def _train(out: Path, *extra: str, env_extra: dict | None = None) -> subprocess.CompletedProcess[str]:
    """The smoke run (tests/conftest.py has cleared RAA_* from the environment it inherits)."""
    cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--export", "none", "--checkpoint_every", "2", "--max_iterations", "2",
           "--reward", "sum", *extra]
    return launch(cmd, timeout=600, what="training", extra=env_extra)


@pytest.mark.slow
def test_a_smoke_run_logs_each_term_of_its_sum(tmp_path):
    proc = _train(tmp_path / "run", "--reward_options",
                  "{parts: [{reward: brightness, weight: 1.0, options: {region: [0.0, 0.0, 1.0, 0.5]}}, "
                  "{reward: motion, weight: 0.5}]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in (json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()):
        assert row["eligible_fraction"] == 1.0
        assert row["reward_mean"] == pytest.approx(row["reward_brightness_mean"] + 0.5 * row["reward_motion_mean"])


def test_a_sum_with_an_agent_part_needs_the_agents_endpoint(tmp_path, capsys, monkeypatch):
    """The entry point's own checks, in this process (`main` returns before any model or launch: a child process
    of its own only added its start-up, ~5 s of CPU); tests/conftest.py has cleared RAA_* here too."""
    import training.train
    from training.train import main

    def launched() -> None:  # past the checks: the run would start here
        raise AssertionError("the checks passed a sum with an agent part and no endpoint")

    monkeypatch.setattr(training.train, "_single_process_env", launched)
    code = main(["--config", str(SMOKE), "--output_dir", str(tmp_path / "run"), "--progress", "false",
                 "--tensorboard", "false", "--export", "none", "--reward", "sum",
                 "--reward_options", "{parts: [{reward: agent}, {reward: motion}]}"])
    assert code == 2 and "reward: agent needs its backbone endpoint" in capsys.readouterr().err


def test_each_http_part_sends_its_own_token_or_the_sums():
    """Two reward services on two hosts, each with its own bearer token: a part's own token_env wins, the
    sum's token_env is the default of http parts that name none; the entry point reads every variable."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from tests.http_stubs import POLL_S, send_json
    from training.sum_reward import token_envs

    seen: dict[int, list[str | None]] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the start-up check: any answer)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.setdefault(self.server.server_port, []).append(self.headers.get("Authorization"))
            send_json(self, {"results": [{"reward": 0.5} for _ in body["items"]]})

        def log_message(self, *args):
            pass

    servers = [HTTPServer(("127.0.0.1", 0), Handler) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    a, b = (f"http://127.0.0.1:{s.server_port}/score" for s in servers)
    options = {"token_env": "SUM_TOKEN", "parts": [
        {"reward": "http", "label": "a", "options": {"url": a, "token_env": "A_TOKEN"}},
        {"reward": "http", "label": "b", "options": {"url": b}},
        {"reward": "brightness", "weight": 0.0}]}
    try:
        assert token_envs("sum", options) == ["SUM_TOKEN", "A_TOKEN"]
        own = {"token_env": "SUM_TOKEN", "parts": options["parts"][:1]}
        assert token_envs("sum", own) == ["A_TOKEN"]  # every http part names its own: the sum's is unused
        assert token_envs("sum", {"token_env": "SUM_TOKEN", "parts": options["parts"][2:]}) == []
        assert parse_parts(options)[1]["options"]["token_env"] == "SUM_TOKEN"  # inherited
        assert "token_env" not in parse_parts(options)[2]["options"]  # not an http part
        with pytest.raises(ValueError, match="part 0 \\(a\\): token_env 'A_TOKEN': no token given"):
            build_reward("sum", options, tokens={"SUM_TOKEN": "s3cret"})
        fn = build_reward("sum", options, tokens={"SUM_TOKEN": "s3cret", "A_TOKEN": "a-key"})
        assert call_reward(fn, "sum", _clips(), ["x", "y"]).rewards == [1.0, 1.0]
        assert seen == {servers[0].server_port: ["Bearer a-key"], servers[1].server_port: ["Bearer s3cret"]}
    finally:
        for server in servers:
            server.shutdown()


def test_the_entry_point_reads_every_named_token_and_names_an_unset_one(monkeypatch):
    from training.config import ConfigError
    from training.config_io import load_config
    from training.train import reward_tokens

    sum_of_two = ('{token_env: SUM_TOKEN, parts: [{reward: http, options: {url: "http://a/score", '
                  'token_env: A_TOKEN}}, {reward: http, label: b, options: {url: "http://b/score"}}]}')
    cfg = load_config(SMOKE, ["--reward", "sum", "--reward_options", sum_of_two])
    monkeypatch.setenv("SUM_TOKEN", "s3cret")
    monkeypatch.delenv("A_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="token_env names A_TOKEN, which is not set in the environment"):
        reward_tokens(cfg)
    monkeypatch.setenv("A_TOKEN", "a-key")
    assert reward_tokens(cfg) == {"SUM_TOKEN": "s3cret", "A_TOKEN": "a-key"}
    assert reward_tokens(load_config(SMOKE, [])) == {}  # no http reward: nothing read
    overridden = sum_of_two.replace('"http://b/score"}', '"http://b/score", token_env: A_TOKEN}')
    assert overridden != sum_of_two
    monkeypatch.delenv("SUM_TOKEN")  # every part names its own token: the sum's is not read
    assert reward_tokens(load_config(SMOKE, ["--reward", "sum", "--reward_options", overridden])) == {"A_TOKEN": "a-key"}


def test_two_agent_parts_keeping_clips_in_one_folder_are_refused(tmp_path, monkeypatch):
    """Both parts wrote video_dir/itNNNNNN/rR_NNNN.mp4 for the same clips at once: one part's file was rewritten
    while the other's agent read it, and its traces named a file the other wrote."""
    monkeypatch.chdir(tmp_path)

    def parts(dir_a, dir_b, videos_b="keep"):
        return {"parts": [{"reward": "agent", "label": "full", "options": {"videos": "keep", "video_dir": dir_a}},
                          {"reward": "agent", "label": "fast",
                           "options": {"preset": "decomposed", "videos": videos_b, "video_dir": dir_b}}]}

    with pytest.raises(ValueError, match="parts 'full' and 'fast' both keep their clips in video_dir"):
        parse_parts(parts("clips", "./clips"))
    with pytest.raises(ValueError, match="give each agent part its own video_dir"):
        parse_parts(parts(str(tmp_path / "clips"), "clips"))
    assert len(parse_parts(parts("clips/full", "clips/fast"))) == 2
    assert len(parse_parts(parts("clips", "clips", videos_b="temporary"))) == 2  # a temporary folder of its own


def test_a_sum_built_directly_refuses_agent_parts_keeping_clips_in_one_folder(tmp_path):
    from training.rewards import AgentReward

    def agent(folder, videos="keep"):
        return AgentReward(preset="decomposed", videos=videos, video_dir=str(folder))

    with pytest.raises(ValueError, match="parts 'a' and 'b' both keep their clips"):
        SumReward([SumPart("a", 1.0, agent(tmp_path), "agent"), SumPart("b", 1.0, agent(tmp_path / "."), "agent")])
    SumReward([SumPart("a", 1.0, agent(tmp_path / "a"), "agent"), SumPart("b", 1.0, agent(tmp_path / "b"), "agent")])
    SumReward([SumPart("a", 1.0, agent(tmp_path), "agent"), SumPart("b", 1.0, agent(tmp_path, "temporary"), "agent")])


def test_a_part_with_the_wrong_length_stops_the_other_parts_too():
    """When one part answers with the wrong number of rewards, the sum raises RewardLengthError naming it, and
    the parts still scoring are cancelled and awaited (gather left them running on the loop, unawaited)."""
    import asyncio
    import threading

    stopped: list[str] = []
    slow_running = threading.Event()

    def short(videos, prompts, **meta):  # a sync part, in a worker thread: answers once the slow one is scoring
        assert slow_running.wait(timeout=60)
        return [0.5]

    async def slow(videos, prompts, **meta):
        slow_running.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append("slow")

    reward = SumReward([SumPart("short", 1.0, short, "short"), SumPart("slow", 1.0, slow, "slow")])

    async def main():
        with pytest.raises(RewardLengthError, match="reward 'short' returned 1 values for 2 videos"):
            await reward([np.zeros((2, 4, 4, 3), np.uint8)] * 2, ["a", "b"])
        assert stopped == ["slow"]  # cancelled before the sum raised, not left behind

    asyncio.run(main())
