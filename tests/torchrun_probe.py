"""Run by tests/test_torchrun_launches.py under `tests.launches.torchrun` (arguments: output folder, mode), and by
tests/test_harness_launches.py under `tests.launches.deepspeed_launch` (``-m tests.torchrun_probe``). Each rank
writes ``OUT/rank{r}.json``: the rendezvous it was given and the sum of an all_reduce.

* ``meet``: torch.distributed (gloo); rank 0 also says whether the port it was given is held (bind: EADDRINUSE);
* ``deepspeed``: as training.trainer.train starts the process group (`deepspeed.init_distributed`);
* ``hang``: after the all_reduce rank 1 waits in a barrier rank 0 never joins.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
from pathlib import Path


def port_held(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def main(out: str, mode: str) -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    if mode == "deepspeed":
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo")
    else:
        dist.init_process_group("gloo")
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    port = int(os.environ["MASTER_PORT"])
    result = {"sum": total.item(), "port": port, "agent_store": os.environ.get("TORCHELASTIC_USE_AGENT_STORE"),
              "port_held": port_held(port) if rank == 0 else None}
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    if mode == "hang":
        if rank == 1:
            dist.barrier()
        time.sleep(3600)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*[a for a in sys.argv[1:] if not a.startswith("--local_rank=")])  # the deepspeed command passes it
