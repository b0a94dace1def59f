"""`raa score` checks its clip path and instruction before the endpoint check and the tool models
(graph/score_inputs.py): a typo in the path, a folder or a blank instruction is the same ineligible result (exit 3,
`--json` the RewardResult with its fault) at once, not after `GET /models` (up to RAA_ENDPOINT_WAIT_S against a
server that refuses connections) and the preset's tool models, nor a configuration exit 2 that hides it."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from graph.cli import app
from tests.cli_agent_helpers import _clip, _scripted, runner
from tests.http_stubs import send_json, served


class _Models(BaseHTTPRequestHandler):
    """A server listing only "other": `raa score` against it stops at the endpoint check (exit 2) when it asks."""

    asked: list = []

    def do_GET(self):  # noqa: N802 (http.server API)
        _Models.asked.append(self.path)
        send_json(self, {"object": "list", "data": [{"id": "other"}]})

    def log_message(self, *args):
        pass


@pytest.fixture
def wrong_endpoint(monkeypatch, tmp_path):
    """The scripted model behind the CLI, the endpoint a server that does not serve RAA_MODEL, its check on, and a
    preset tool that cannot load (RAA_VJEPA_MODEL missing; the default preset "full" uses it)."""
    model = _scripted(monkeypatch, tmp_path)
    _Models.asked = []
    with served(_Models) as root:
        monkeypatch.setenv("RAA_BASE_URL", f"{root}/v1")
        monkeypatch.setenv("RAA_ENDPOINT_WAIT_S", "5")
        monkeypatch.setenv("RAA_VJEPA_MODEL", str(tmp_path / "no-such-vjepa"))
        yield model


def _cases(tmp_path):
    (tmp_path / "clips").mkdir()
    clip = _clip(tmp_path / "a.mp4")
    (loop := tmp_path / "loop.mp4").symlink_to(loop)  # Path.resolve raised RuntimeError: a traceback, exit 1
    return {"missing": ([str(tmp_path / "nope.mp4"), "-i", "push"], "video file not found"),
            "folder": ([str(tmp_path / "clips"), "-i", "push"], "is a directory, not a video file"),
            "name too long": ([str(tmp_path / ("x" * 300 + ".mp4")), "-i", "push"], "cannot be read (OSError"),
            "symlink loop": ([str(loop), "-i", "push"], "cannot be read (OSError: [Errno 40]"),
            "blank instruction": ([clip, "-i", "  \n "], "instruction is empty or whitespace only")}


@pytest.mark.parametrize("case", ["missing", "folder", "name too long", "symlink loop", "blank instruction"])
def test_a_bad_clip_path_or_instruction_is_ineligible_before_the_endpoint_and_tools(case, wrong_endpoint,
                                                                                      tmp_path) -> None:
    args, words = _cases(tmp_path)[case]
    res = runner.invoke(app, ["score", *args, "--json"])
    assert res.exit_code == 3, res.output
    result = json.loads(res.stdout)  # stdout is only the result
    assert result["status"] == "ineligible" and result["reward"] is None
    assert words in " ".join(result["reasons"]) and result["faults"][0]["stage"] == "quality"
    assert res.stderr.startswith("error: ") and words in res.stderr.splitlines()[0]
    assert _Models.asked == [] and wrong_endpoint.calls == []  # no GET /models, no model call
    assert "no-such-vjepa" not in res.output  # the tool models were not loaded
    plain = runner.invoke(app, ["score", *args])
    assert plain.exit_code == 3 and words in plain.stderr.splitlines()[0], plain.output  # said first
    assert _Models.asked == []


def test_a_good_clip_and_instruction_still_check_the_endpoint_first(wrong_endpoint, tmp_path) -> None:
    res = runner.invoke(app, ["score", _clip(tmp_path / "a.mp4"), "-i", "push", "--json"])
    assert res.exit_code == 2 and "model 'stub-model' is not served" in res.output, res.output
    assert _Models.asked == ["/v1/models"] and wrong_endpoint.calls == []



def test_a_bad_clip_loads_no_tool_model_with_the_endpoint_check_off(wrong_endpoint, monkeypatch, tmp_path) -> None:
    """With RAA_ENDPOINT_WAIT_S=0 the preset's tool models were still loaded first: a V-JEPA 2 that cannot load
    was exit 2 for a clip path with a typo."""
    monkeypatch.setenv("RAA_ENDPOINT_WAIT_S", "0")
    res = runner.invoke(app, ["score", str(tmp_path / "nope.mp4"), "-i", "push", "--json"])
    assert res.exit_code == 3 and "video file not found" in res.stderr, res.output
    assert "no-such-vjepa" not in res.output and wrong_endpoint.calls == []


@pytest.mark.parametrize("processes", [1, 2])
def test_a_batch_whose_clips_are_all_bad_inputs_asks_no_endpoint_and_loads_no_tool(processes, wrong_endpoint,
                                                                                   tmp_path) -> None:
    """`raa score-batch` over a manifest whose clips are all missing (a wrong folder) or bad inputs checked the endpoint
    first (up to RAA_ENDPOINT_WAIT_S, 60 s), and exited 2 when it was wrong, where every run ends ineligible before
    any model call: now the rows are written at once, as `raa score` does for one clip."""
    (tmp_path / "clips").mkdir()
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"path": p, "instruction": "push"}) + "\n"
                                for p in ("nope.mp4", "clips", "gone.mp4")))
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--processes", str(processes)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and all(r["result"]["status"] == "ineligible" for r in rows)
    assert all(r["result"]["faults"][0]["stage"] == "quality" for r in rows)
    assert _Models.asked == [] and wrong_endpoint.calls == [] and "no-such-vjepa" not in res.output
