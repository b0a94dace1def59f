"""A run judges one clip file: its quality step records the file's size and modification time (`meta["file"]`,
`graph.clip_stamp`). The file at that path replaced afterwards (a policy's rollouts generated again into the same
folder, `raa demo` run again) used to be read as if it were the clip judged: a time-travel fork re-ran reflect on
the new clip's frames beside the old clip's assessments, and `raa report` showed the new frames as the evidence
frames of the old run."""

from __future__ import annotations

import os
import shutil

import pytest
from graph_scripts import make_agent, moving_square, nodes

INSTRUCTION = "push the red block to the right"


@pytest.fixture()
def own_clip(tmp_path):
    return moving_square(tmp_path / "clip.mp4")


def _replace(path, tmp_path):
    """Another clip at `path` (another size and time)."""
    other = moving_square(tmp_path / "other.mp4", frames=29, seed=7)
    shutil.copyfile(other, path)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_the_run_records_its_clip_file(own_clip):
    agent, _ = make_agent("full")
    out = agent.invoke({"video": str(own_clip), "instruction": INSTRUCTION}, {"configurable": {"thread_id": "s"}})
    st = os.stat(own_clip)
    assert out["meta"]["file"] == {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    assert out["result"].status == "scored"


def test_a_fork_of_a_run_whose_clip_was_replaced_is_ineligible(own_clip, tmp_path):
    agent, model = make_agent("full")
    config = {"configurable": {"thread_id": "cc"}}
    first = agent.invoke({"video": str(own_clip), "instruction": INSTRUCTION, "run_id": "cc"}, config)
    assert first["result"].status == "scored"
    before_reflect = next(h for h in agent.get_state_history(config) if h.next == ("reflect",))
    _replace(own_clip, tmp_path)
    calls = len(model.calls)
    forked = agent.invoke(None, agent.update_state(before_reflect.config, {"notes": ["fork"]}))
    assert forked["result"].status == "ineligible" and forked["result"].reward is None
    reason = "; ".join(forked["result"].reasons)
    assert "reflect: input:" in reason and "changed since" in reason and str(own_clip) in reason
    assert len(model.calls) == calls  # nothing judged the other clip
    assert nodes(forked)[-2:] == ["reflect", "gate"]


def test_the_report_of_a_run_whose_clip_was_replaced_shows_no_frames(own_clip, tmp_path):
    from evals.report import render_run_report
    from graph.tracing import read_trace

    agent, _ = make_agent("full")
    agent.invoke({"video": str(own_clip), "instruction": INSTRUCTION}, {"configurable": {"thread_id": "rp"}})
    trace = read_trace(agent.checkpointer, "rp")
    assert "data:image" in render_run_report(trace)
    _replace(own_clip, tmp_path)
    html = render_run_report(trace)
    assert "data:image" not in html and "changed since" in html


def test_a_stamp_that_went_through_a_javascript_number_still_names_the_clip(own_clip):
    """Studio (JavaScript) reads and writes a state's numbers as doubles: an edit of the quality step's output
    sends meta.file.mtime_ns back rounded to 256 ns (it is ~1.7e18, over 2**53). The unchanged clip read as
    changed ("modified T -> T", the same size) and the fork was ineligible; a real rewrite still counts."""
    from graph.clip_stamp import clip_change, clip_stamp

    stamp = clip_stamp(str(own_clip))
    os.utime(own_clip, ns=(stamp["mtime_ns"], stamp["mtime_ns"] // 1000 * 1000 + 123))
    stamp = clip_stamp(str(own_clip))
    via_js = {"size": stamp["size"], "mtime_ns": int(float(stamp["mtime_ns"]))}
    assert via_js != stamp
    assert clip_change(str(own_clip), via_js) is None
    os.utime(own_clip, ns=(stamp["mtime_ns"], stamp["mtime_ns"] + 1_000_000))  # rewritten 1 ms later
    assert clip_change(str(own_clip), via_js) is not None
