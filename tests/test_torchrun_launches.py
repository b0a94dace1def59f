"""The test harness's torchrun launches (tests/launches.py: `torchrun`, `run_to_end`): the ranks meet at ports
torchrun bound itself, DeepSpeed builds nothing in the machine's extensions folder, and a launch past its
deadline fails with every process's stacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.launches import ROOT, run_to_end, torchrun

PROBE = str(ROOT / "tests" / "torchrun_probe.py")

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def _answers(out: Path) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_the_ranks_meet_at_a_port_torchrun_bound_itself(tmp_path):
    """``--master_port`` took a port from a probe socket that was free only until the probe closed; another
    process could bind it before torchrun did. The launch names no port: torchrun binds its store to one the
    OS picks and holds it while the ranks run (they join it: TORCHELASTIC_USE_AGENT_STORE)."""
    cmd = torchrun()
    assert not any("port" in part or "endpoint" in part for part in cmd), cmd
    run_to_end([*cmd, PROBE, str(tmp_path), "meet"], timeout=120, what="probe")
    answers = _answers(tmp_path)
    assert [a["sum"] for a in answers] == [3.0, 3.0]
    assert answers[0]["port"] == answers[1]["port"] and answers[0]["port_held"] is True
    assert [a["agent_store"] for a in answers] == ["True", "True"]


def test_deepspeed_ranks_do_not_wait_on_the_machines_extension_builds(tmp_path, monkeypatch):
    """DeepSpeed's ranks JIT-built their shared-memory op at process-group start in the machine's extensions
    folder (~70 s after another launch's build) and waited without limit on the lock a killed build left. Here
    such a lock is in the folder the ranks use: they start and finish all the same, building nothing."""
    lock = tmp_path / "extensions" / "deepspeed_shm_comm" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    run_to_end([*torchrun(), PROBE, str(tmp_path), "deepspeed"], timeout=120, what="deepspeed probe")
    assert [a["sum"] for a in _answers(tmp_path)] == [3.0, 3.0]
    assert [p.name for p in lock.parent.iterdir()] == ["lock"]  # nothing built there


def test_a_hung_launch_fails_with_its_ranks_stacks(tmp_path):
    """A launch past its deadline was killed with nothing said of where its ranks waited; now each process
    writes its threads' stacks into the output the failure quotes."""
    with pytest.raises(pytest.fail.Exception) as failed:
        run_to_end([*torchrun(), PROBE, str(tmp_path), "hang"], timeout=60, what="probe")
    text = str(failed.value)
    assert text.startswith("probe hung (no exit in 60 s")
    assert [a["sum"] for a in _answers(tmp_path)] == [3.0, 3.0]  # both ranks got that far
    stacks = [line for line in text.splitlines() if 'torchrun_probe.py", line' in line and line.endswith(" in main")]
    assert len(stacks) >= 2, text  # rank 0 asleep, rank 1 in the barrier
    assert " in barrier" in text, text
