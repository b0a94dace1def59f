"""An agent whose tracker runs in process beside a scorer of the tool service (`AgentTools(tracker=LKTracker(),
surprise=RemoteSurpriseScorer(...))`) runs each tool's jobs in that tool's lane (`ToolProvider.tracker_lane` /
`surprise_lane`, `graph.workers`): one flag put both in the "io" lane, so LK's CPU-bound tracking ran on the 8 io
threads (more threads than cores), and the exit hook, which waits only for running "cpu" jobs, left a speculative
grid track running in OpenCV when the process ended: `raa`-style scripts aborted at exit ("terminate called without
an active exception", status 134) after a run the tool service's outage had ended early."""

from __future__ import annotations

import threading

from graph_scripts import FakeSurprise, full_script, tool_call
from test_graph_tool_jobs import WHOLE_CLIP, ThreadRecordingTracker

from graph import AgentConfig
from graph.context import AgentTools, tool_provider
from tools.client import RemoteSurpriseScorer, ToolServiceClient
from tools.motion import LKTracker


class RecordingRemoteScorer(RemoteSurpriseScorer):
    """A scorer of the tool service, answering like `FakeSurprise` without a service, recording its thread."""

    def __init__(self, client: ToolServiceClient) -> None:
        super().__init__(client)
        self.threads: list[str] = []

    def score_file(self, video, *, frames=None, short_side=None):
        from tools.video import VideoReader

        self.threads.append(threading.current_thread().name)
        with VideoReader(video) as reader:
            return FakeSurprise().score(reader.read(range(frames or reader.meta.frames)))


def test_each_tool_gets_its_own_lane():
    client = ToolServiceClient("http://127.0.0.1:9")  # connects on first request: never here
    try:
        mixed = tool_provider(AgentTools(tracker=LKTracker(), surprise=RemoteSurpriseScorer(client)))
    finally:
        client.close()
    assert (mixed.tracker_lane, mixed.surprise_lane) == ("cpu", "io")
    local = tool_provider(AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    assert (local.tracker_lane, local.surprise_lane) == ("cpu", "cpu")


def test_an_in_process_tracker_beside_a_remote_scorer_tracks_on_the_cpu_lane(clip):
    from graph import build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel

    client = ToolServiceClient("http://127.0.0.1:9")
    tracker, scorer = ThreadRecordingTracker(), RecordingRemoteScorer(client)
    script = full_script(inspect=[tool_call("track_motion", WHOLE_CLIP), "done"])
    try:
        agent = build_reward_agent(AgentConfig(preset="full"), backbone=Backbone(ScriptedChatModel(script)),
                                   tools=AgentTools(tracker=tracker, surprise=scorer), checkpointer=False)
        out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right"})
    finally:
        client.close()
    assert out["result"].status == "scored", out["result"].reasons
    assert tracker.threads and all(t.startswith("raa-cpu-") for t in tracker.threads), tracker.threads
    assert scorer.threads and all(t.startswith("raa-io-") for t in scorer.threads), scorer.threads


def test_a_toolboxs_injected_tool_gets_its_own_lane():
    """The same for a `Toolbox`: one given its own in-process tracker beside the tool service of its settings
    (``Toolbox(ToolSettings(tools_url=...), tracker=LKTracker())``) put the tracking in the "io" lane, as
    `AgentTools` did; and a scorer of the tool service given to a toolbox without a URL waited on the network in a
    core's thread."""
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    beside_service = tool_provider(Toolbox(ToolSettings(tools_url="http://127.0.0.1:9"), tracker=LKTracker()))
    assert (beside_service.tracker_lane, beside_service.surprise_lane) == ("cpu", "io")
    client = ToolServiceClient("http://127.0.0.1:9")
    try:
        given_remote = tool_provider(Toolbox(ToolSettings(), scorer=RemoteSurpriseScorer(client)))
    finally:
        client.close()
    assert (given_remote.tracker_lane, given_remote.surprise_lane) == ("cpu", "io")


def test_a_hand_built_provider_says_each_tools_lane_and_a_wrong_one_is_refused():
    """A hand-built `ToolProvider` names each tool's lane itself (`tracker_lane`, `surprise_lane`); there is no
    aggregate `remote` flag left whose value could contradict them (it said "cpu" for an `AgentTools` whose two
    tools were both calls to the tool service). A lane that `graph.workers` has not is refused when built: it
    started a pool of its own that the exit hook then failed on (KeyError in `EXIT_WAIT_S`)."""
    import pytest

    from graph.context import ToolProvider

    provider = ToolProvider(lambda: LKTracker(), lambda: FakeSurprise(), tracker_lane="cpu", surprise_lane="io")
    assert (provider.tracker_lane, provider.surprise_lane) == ("cpu", "io")
    assert (ToolProvider().tracker_lane, ToolProvider().surprise_lane) == ("cpu", "cpu")
    with pytest.raises(ValueError, match="surprise_lane"):
        ToolProvider(surprise_lane="gpu")
    with pytest.raises(ValueError, match="tracker_lane"):
        ToolProvider(tracker_lane=True)


def test_both_tools_of_the_tool_service_are_in_the_io_lane():
    from tools.client import RemoteMotionTracker

    client = ToolServiceClient("http://127.0.0.1:9")
    try:
        both = tool_provider(AgentTools(tracker=RemoteMotionTracker(client), surprise=RemoteSurpriseScorer(client)))
    finally:
        client.close()
    assert (both.tracker_lane, both.surprise_lane) == ("io", "io")
