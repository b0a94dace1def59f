"""The test harness runs torch's CPU ops on one thread (tests/conftest.py sets ``OMP_NUM_THREADS``), in the pytest
process and in the processes it starts, unless whoever ran pytest chose a number."""

from __future__ import annotations

import os
import subprocess
import sys


def test_torch_uses_one_thread_in_the_pytest_process_and_its_children():
    import torch

    want = int(os.environ.get("OMP_NUM_THREADS", "1"))  # 1 unless set before pytest started
    assert torch.get_num_threads() == want
    code = "import torch; print(torch.get_num_threads())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert int(child.stdout) == want
