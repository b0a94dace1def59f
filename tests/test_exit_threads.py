"""No gloo thread outlives `training.train.main`: a gloo process group still referenced after
``destroy_process_group`` keeps its worker threads (``pt_gloo_runloop``) into interpreter teardown, where one
that drops the last reference to a finished collective's tensors needs the GIL, and a thread asking for it then
is ended by the interpreter through a C++ frame: ``terminate called without an active exception``, exit -6 after
the run had printed ``done`` (a 2-rank CI run on a loaded machine). torch.distributed.nn, imported by diffusers
after the group started, held the world group in its functions' default arguments; DeepSpeed's engine (a
reference cycle with the model's parameters) held its clone until a garbage collection, most often the one of
interpreter teardown (training/process_groups.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.launches import launch

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"
PROBE = ROOT / "tests" / "exit_threads_probe.py"
GLOO_THREADS = ("pt_gloo_runloop", "gloo_tcp_loop")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["finished", "diverged"])
def test_no_gloo_thread_outlives_a_run(tmp_path, case):
    """A finished run (exit 0), and one stopped after the model loaded (diverged: exit 1, the engine held by the
    exception's traceback until main returned): when main returns, no gloo thread is left."""
    extra = {"finished": ["--max_iterations", "1"], "diverged": ["--max_iterations", "2", "--learning_rate", "1e30"]}
    report = tmp_path / "exit.json"
    cmd = [sys.executable, str(PROBE), str(report), "--config", str(SMOKE), "--output_dir", str(tmp_path / "run"),
           "--progress", "false", "--tensorboard", "false", "--export", "none", *extra[case]]
    proc = launch(cmd, timeout=600, what="training")
    assert report.exists(), proc.stderr[-3000:]
    out = json.loads(report.read_text())
    assert out["code"] == {"finished": 0, "diverged": 1}[case], proc.stderr[-3000:]
    assert [name for name in out["threads"] if name in GLOO_THREADS] == [], out["threads"]
    assert proc.returncode == out["code"]
