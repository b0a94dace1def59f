"""`preload_tools` loads an injected CoTracker3 as it loads an injected V-JEPA 2: given in `AgentTools` (or as a
`Toolbox`'s own tracker), it was handed back unloaded, so training's `AgentReward.load_tools` and `raa eval`'s start-up
check passed with a checkpoint that does not exist, and every clip of the run then ended ineligible (motion fault)."""

from __future__ import annotations

import pytest

from graph import AgentConfig
from graph.context import AgentTools, preload_tools
from tools.errors import ToolFault
from tools.motion import CoTracker3Tracker
from tools.settings import ToolSettings
from tools.toolbox import Toolbox


@pytest.mark.parametrize("wrap", [lambda t: AgentTools(tracker=t), lambda t: Toolbox(ToolSettings(), tracker=t)],
                         ids=["agent_tools", "toolbox"])
def test_an_injected_cotracker_that_cannot_load_fails_at_start(tmp_path, wrap):
    tracker = CoTracker3Tracker(checkpoint=tmp_path / "missing.pth")
    with pytest.raises(ToolFault) as caught:
        preload_tools(AgentConfig(preset="motion"), wrap(tracker))
    assert caught.value.tool == "motion" and "missing.pth" in caught.value.message


def test_an_injected_cotracker_is_not_loaded_when_motion_is_off(tmp_path):
    preload_tools(AgentConfig(preset="direct"), AgentTools(tracker=CoTracker3Tracker(checkpoint=tmp_path / "x.pth")))
