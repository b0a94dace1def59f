"""A fault's message is capped after its lone surrogates are escaped (`graph.schemas.Fault`).

Callers cut a message to 2000 characters, then the Fault escaped its surrogates (each one 6 characters): a long
video fault of a clip whose name is not UTF-8 grew past the limit, building the Fault raised a ValidationError in
the node's fault handling, and the run ended as the agent's "internal" fault (an outage since this session) instead
of the clip's video fault. `graph.run_results.machinery_failed` and `evals.reliability` each escaped first to avoid it."""

from __future__ import annotations

from graph.nodes.common import to_fault
from graph.schemas import Fault
from tools.video_errors import VideoDecodeError


def test_a_long_video_fault_of_a_non_utf8_name_is_the_clip_s_fault():
    name = "/clips/" + "\udcff" * 400 + ".mp4"
    fault = to_fault("observe", VideoDecodeError(f"{name}: decoding failed ({'x' * 1500})"))
    assert fault.kind == "video" and fault.stage == "observe"
    assert len(fault.message) <= 2000 and "\\udcff" in fault.message
    assert fault.message.encode("utf-8")  # no lone surrogate left


def test_a_message_is_cut_to_its_limit_after_escaping():
    fault = Fault(stage="s", kind="internal", message="a" * 1995 + "\udcff" * 5)
    assert len(fault.message) == 2000 and fault.message.startswith("a" * 1995)
